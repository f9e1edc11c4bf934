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
	// PauseQueue are other's ("deletePolicy" q, "pause" q d), DeletePolicy
	// only while setPolicy is nil (both are SetQueue of a policy).
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

// PutBatch is putBatch, or, for the front's Put (a batch of one), put
// where the test set it alone.
func (f *fakeBroker) PutBatch(ctx context.Context, queue string, rs []task.PutRequest) []task.PutResult {
	if f.putBatch == nil && f.put != nil && len(rs) == 1 {
		f.call("Put", true)
		var r task.PutResult
		r.Task, r.Created, r.Err = f.put(queue, rs[0])
		return []task.PutResult{r}
	}
	if f.call("PutBatch", f.putBatch != nil); f.putBatch == nil {
		return make([]task.PutResult, len(rs))
	}
	return f.putBatch(queue, rs)
}

// Read is the front's Get (by queue and id).
func (f *fakeBroker) Read(r service.TaskRef) (task.Task, error) {
	if f.call("Get", f.get != nil && r.Job == 0); f.get == nil || r.Job != 0 {
		return task.Task{}, nil
	}
	return f.get(r.Queue, r.ID)
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

// Settle is what the front makes of Nack, Release, Bury and Touch.
func (f *fakeBroker) Settle(ctx context.Context, queue, id, lease string, s service.Settlement) (task.Task, error) {
	if s.Outcome == service.Renewed {
		return f.leaseOp("touch", queue, id, lease, 0)
	}
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

// SetQueue is the front's SetPolicy, PauseQueue (other's "pause") and
// DeletePolicy, the zero policy: other's "deletePolicy" where setPolicy
// is not set.
func (f *fakeBroker) SetQueue(ctx context.Context, queue string, c service.QueueChange) (task.Policy, error) {
	switch {
	case c.Pause != nil:
		return task.Policy{}, f.otherOp("pause", queue, c.Pause.String())
	case c.Policy.IsZero() && f.setPolicy == nil:
		return task.Policy{}, f.otherOp("deletePolicy", queue)
	}
	if f.call("SetPolicy", f.setPolicy != nil); f.setPolicy == nil {
		return task.Policy{}, nil
	}
	return f.setPolicy(queue, *c.Policy)
}

func (f *fakeBroker) Policy(ctx context.Context, queue string) (task.Policy, error) {
	if f.call("Policy", f.policy != nil); f.policy == nil {
		return task.Policy{}, nil
	}
	return f.policy(queue)
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

// SetSchedule is the front's SetSchedule (a Spec).
func (f *fakeBroker) SetSchedule(ctx context.Context, name string, c service.ScheduleChange) (task.ScheduleInfo, bool, error) {
	if f.call("SetSchedule", f.schedule != nil && c.Spec != nil); f.schedule == nil || c.Spec == nil {
		return task.ScheduleInfo{}, false, nil
	}
	return f.schedule(*c.Spec)
}

func (f *fakeBroker) Schedules(context.Context, string) ([]task.ScheduleInfo, error) {
	if f.call("Schedules", f.scheds != nil); f.scheds == nil {
		return nil, nil
	}
	return f.scheds(), nil
}

func (f *fakeBroker) Err() error { return nil }
