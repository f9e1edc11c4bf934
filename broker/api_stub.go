package broker

// Temporary: the method set the adapters build against while the
// implementation is written. Replaced by the real files.

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/hourglass-go/hourglass/store"
	"github.com/prometheus/client_golang/prometheus"
)

// Config holds the broker's limits and collaborators. Zero fields take the
// defaults named on each.
type Config struct {
	MaxDelay   time.Duration // default 10 years
	MaxPayload int           // bytes; default 1 MiB
	DefaultTTR time.Duration // default 60 s
	Logger     *slog.Logger  // default slog.Default()
	// Registerer receives the broker's Prometheus metrics; nil: none.
	Registerer prometheus.Registerer
}

type Broker struct{}

var errTODO = errors.New("hourglass: not implemented yet")

func Open(st store.Store, cfg Config) (*Broker, error) { return nil, errTODO }
func (b *Broker) Close() error                         { return errTODO }
func (b *Broker) Put(ctx context.Context, queue string, r PutRequest) (Task, bool, error) {
	return Task{}, false, errTODO
}
func (b *Broker) PutBatch(ctx context.Context, queue string, rs []PutRequest) []PutResult {
	return nil
}
func (b *Broker) Get(queue, id string) (Task, error)                 { return Task{}, errTODO }
func (b *Broker) Delete(ctx context.Context, queue, id string) error { return errTODO }
func (b *Broker) Reserve(ctx context.Context, queue string, max int, wait time.Duration) ([]Task, error) {
	return nil, errTODO
}
func (b *Broker) Ack(ctx context.Context, queue, id, lease string) error { return errTODO }
func (b *Broker) Touch(ctx context.Context, queue, id, lease string) (Task, error) {
	return Task{}, errTODO
}
func (b *Broker) Nack(ctx context.Context, queue, id, lease string, delay time.Duration) error {
	return errTODO
}
func (b *Broker) Kick(ctx context.Context, queue, id string) error { return errTODO }
func (b *Broker) Queues() []QueueStats                             { return nil }
func (b *Broker) SetSchedule(ctx context.Context, s ScheduleSpec) (ScheduleInfo, bool, error) {
	return ScheduleInfo{}, false, errTODO
}
func (b *Broker) Schedules() []ScheduleInfo                             { return nil }
func (b *Broker) DeleteSchedule(ctx context.Context, name string) error { return errTODO }
