package httpapi_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// fakeBroker is a service.Engine whose methods do what the test sets and
// count their calls; a method the test did not set fails the test, so
// that a request refused on the wire, or by service.New's checks, is seen
// to reach nothing. The methods it does not declare (the beanstalkd
// protocol's, the observing routes') are the nil embedded Engine's: a
// call panics, failing the test.
type fakeBroker struct {
	service.Engine
	t *testing.T

	mu    sync.Mutex
	calls int

	put      func(queue string, r task.PutRequest) (task.Task, bool, error)
	putBatch func(queue string, rs []task.PutRequest) []task.PutResult
	get      func(queue, id string) (task.Task, error)
	reserve  func(ctx context.Context, queue string, max int, wait time.Duration) ([]task.Task, error)
	lease    func(op, queue, id, lease string, delay time.Duration) (task.Task, error)
	other    func(op string, args ...string) error
	queues   func() []task.QueueStats
	schedule func(s task.ScheduleSpec) (task.ScheduleInfo, bool, error)
	scheds   func() []task.ScheduleInfo
	// setPolicy and policy answer SetPolicy and Policy; DeletePolicy and
	// PauseQueue are other's ("deletePolicy" q, "pause" q d).
	setPolicy func(queue string, p task.Policy) (task.Policy, error)
	policy    func(queue string) (task.Policy, error)
	// reason is the last reason given to Nack or Bury.
	reason string
}

var _ service.Engine = (*fakeBroker)(nil)

// Limits are the defaults.
func (f *fakeBroker) Limits() service.Limits { return service.Limits{} }

func (f *fakeBroker) call(name string, set bool) {
	f.mu.Lock()
	f.calls++
	f.mu.Unlock()
	if !set {
		f.t.Errorf("unexpected call of %s", name)
	}
}

// Calls returns how many broker calls were made.
func (f *fakeBroker) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func (f *fakeBroker) Put(ctx context.Context, queue string, r task.PutRequest) (task.Task, bool, error) {
	if f.call("Put", f.put != nil); f.put == nil {
		return task.Task{}, false, nil
	}
	return f.put(queue, r)
}

func (f *fakeBroker) PutBatch(ctx context.Context, queue string, rs []task.PutRequest) []task.PutResult {
	if f.call("PutBatch", f.putBatch != nil); f.putBatch == nil {
		return make([]task.PutResult, len(rs))
	}
	return f.putBatch(queue, rs)
}

func (f *fakeBroker) Get(queue, id string) (task.Task, error) {
	if f.call("Get", f.get != nil); f.get == nil {
		return task.Task{}, nil
	}
	return f.get(queue, id)
}

// ReserveQueues is the front's Reserve of one queue.
func (f *fakeBroker) ReserveQueues(ctx context.Context, queues []string, max int, wait time.Duration) ([]task.Task, error) {
	if f.call("Reserve", f.reserve != nil); f.reserve == nil {
		return nil, nil
	}
	return f.reserve(ctx, queues[0], max, wait)
}

func (f *fakeBroker) leaseOp(op, queue, id, lease string, delay time.Duration) (task.Task, error) {
	if f.call(op, f.lease != nil); f.lease == nil {
		return task.Task{}, nil
	}
	return f.lease(op, queue, id, lease, delay)
}

// AckMany is the front's Ack: each ack a leaseOp "ack".
func (f *fakeBroker) AckMany(ctx context.Context, acks []task.Ack) ([]error, error) {
	errs := make([]error, len(acks))
	for i, a := range acks {
		_, errs[i] = f.leaseOp("ack", a.Queue, a.ID, a.Lease, 0)
	}
	return errs, nil
}

func (f *fakeBroker) Touch(ctx context.Context, queue, id, lease string) (task.Task, error) {
	return f.leaseOp("touch", queue, id, lease, 0)
}

// Settle is what the front makes of Nack, Release and Bury.
func (f *fakeBroker) Settle(ctx context.Context, queue, id, lease string, s service.Settlement) (task.Task, error) {
	if s.Error != nil {
		f.mu.Lock()
		f.reason = *s.Error
		f.mu.Unlock()
	}
	switch s.Outcome {
	case task.AttemptNacked:
		return f.leaseOp("nack", queue, id, lease, s.Delay)
	case task.AttemptReleased:
		return f.leaseOp("release", queue, id, lease, s.Delay)
	}
	return f.leaseOp("bury", queue, id, lease, 0)
}

// Reason returns the last reason given to Nack or Bury.
func (f *fakeBroker) Reason() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reason
}

func (f *fakeBroker) SetPolicy(ctx context.Context, queue string, p task.Policy) (task.Policy, error) {
	if f.call("SetPolicy", f.setPolicy != nil); f.setPolicy == nil {
		return task.Policy{}, nil
	}
	return f.setPolicy(queue, p)
}

func (f *fakeBroker) Policy(ctx context.Context, queue string) (task.Policy, error) {
	if f.call("Policy", f.policy != nil); f.policy == nil {
		return task.Policy{}, nil
	}
	return f.policy(queue)
}

func (f *fakeBroker) DeletePolicy(ctx context.Context, queue string) error {
	return f.otherOp("deletePolicy", queue)
}

func (f *fakeBroker) PauseQueue(ctx context.Context, queue string, d time.Duration) error {
	return f.otherOp("pause", queue, d.String())
}

func (f *fakeBroker) otherOp(op string, args ...string) error {
	if f.call(op, f.other != nil); f.other == nil {
		return nil
	}
	return f.other(op, args...)
}

func (f *fakeBroker) Delete(ctx context.Context, queue, id string, _ service.DeleteOptions) error {
	return f.otherOp("delete", queue, id)
}

func (f *fakeBroker) Kick(ctx context.Context, queue, id string, _ service.KickOptions) error {
	return f.otherOp("kick", queue, id)
}

func (f *fakeBroker) DeleteSchedule(ctx context.Context, name string) error {
	return f.otherOp("deleteSchedule", name)
}

func (f *fakeBroker) Queues(context.Context) ([]task.QueueStats, error) {
	if f.call("Queues", f.queues != nil); f.queues == nil {
		return nil, nil
	}
	return f.queues(), nil
}

func (f *fakeBroker) SetSchedule(ctx context.Context, s task.ScheduleSpec) (task.ScheduleInfo, bool, error) {
	if f.call("SetSchedule", f.schedule != nil); f.schedule == nil {
		return task.ScheduleInfo{}, false, nil
	}
	return f.schedule(s)
}

func (f *fakeBroker) Schedules(context.Context) ([]task.ScheduleInfo, error) {
	if f.call("Schedules", f.scheds != nil); f.scheds == nil {
		return nil, nil
	}
	return f.scheds(), nil
}

func (f *fakeBroker) Err() error { return nil }
