package broker

import (
	"context"
	"errors"
	"time"

	"github.com/hourglass-go/hourglass/task"
)

var errNotYet = errors.New("hourglass: not implemented yet")

func (b *Broker) Release(ctx context.Context, queue, id, lease string, delay time.Duration) (task.Task, error) {
	return task.Task{}, errNotYet
}

func (b *Broker) Bury(ctx context.Context, queue, id, lease, reason string) (task.Task, error) {
	return task.Task{}, errNotYet
}

func (b *Broker) SetPolicy(ctx context.Context, queue string, p task.Policy) (task.Policy, error) {
	return task.Policy{}, errNotYet
}

func (b *Broker) Policy(ctx context.Context, queue string) (task.Policy, error) {
	return task.Policy{}, nil
}

func (b *Broker) DeletePolicy(ctx context.Context, queue string) error { return errNotYet }
