package service

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hourglass-go/hourglass/task"
)

// Cancelling work under way.
//
// Cancel deletes a task as Delete does, in any state, and records it
// cancelled: its running attempt, if it is reserved, ends with
// task.AttemptCancelled, and its record in the history says
// task.FinishedCancelled. The engines tell a Cancel from a Delete by its
// context ([Cancelling]), so that Engine needs no method of its own. A
// task that is gone answers task.ErrNotFound, to Delete and Cancel alike:
// a second Cancel of one task answers 404.
//
// When a reserved task is deleted, by Delete or Cancel, its lease ends,
// and whoever holds it is to stop its work. The engine reports the lease
// once the delete is durable ([LeaseEnder]): the embedded engine at once,
// a cluster node to every node of the cluster, through its notifications
// (a line on the channel every node listens to). The Service keeps what
// it hears for the two kinds of holder:
//
//   - in this process, the pusher: [Service.WatchCancels] calls it with
//     the lease, and it cancels the push's request;
//   - in another process, a worker: it asks, about once a second, which
//     of the leases it holds have ended so ([Service.CancelledLeases]),
//     and the Service answers from the leases ended in the last
//     CancelMemory, at most MaxCancelled of them, in memory: the check
//     costs no write and no statement on either engine.
//
// A cluster node that loses its listen connection misses the cancels
// sent meanwhile: a worker asking that node learns of such a cancel only
// at its next touch, which answers 404 as for any deleted task.

// CancelMemory is how long the Service remembers a lease ended by a
// delete, for CancelledLeases: much longer than a worker's second
// between checks, so that a check that failed and backed off a few times
// still learns of it.
const CancelMemory = time.Minute

// MaxCancelled bounds the leases remembered: the oldest are forgotten
// first, before their CancelMemory is over. At a few dozen bytes a
// lease, that is a few MiB at most.
const MaxCancelled = 100_000

// cancelKey marks a Delete's context as a Cancel's (withCancel).
type cancelKey struct{}

// withCancel returns ctx for the Delete that a Cancel makes.
func withCancel(ctx context.Context) context.Context {
	return context.WithValue(ctx, cancelKey{}, true)
}

// Cancelling reports whether an engine's Delete under ctx is a Cancel's:
// the engine records the task's running attempt as task.AttemptCancelled
// and its history record as task.FinishedCancelled, instead of
// task.FinishedDeleted. O(1): a lookup in ctx.
func Cancelling(ctx context.Context) bool {
	v, _ := ctx.Value(cancelKey{}).(bool)
	return v
}

// FinishedOutcome returns the history outcome of a Delete under ctx:
// task.FinishedCancelled for a Cancel's, task.FinishedDeleted otherwise.
func FinishedOutcome(ctx context.Context) string {
	if Cancelling(ctx) {
		return task.FinishedCancelled
	}
	return task.FinishedDeleted
}

// LeaseEnder is implemented by both engines. NotifyLeaseEnds registers f,
// to be called with the lease of every reserved task deleted (Delete,
// Cancel, a bulk delete), once the delete is durable, on any node of a
// cluster; f is called from a goroutine of the engine's and must not
// block. A delete by the lease's own holder (a beanstalkd delete of a job
// it reserved) ends no work, and is not reported.
type LeaseEnder interface {
	NotifyLeaseEnds(f func(lease string))
}

// CheckLeases checks a CancelledLeases question: 1 to task.MaxAcks
// leases, none empty.
func CheckLeases(leases []string) error {
	if len(leases) == 0 || len(leases) > task.MaxAcks {
		return fmt.Errorf("%w: 1 to %d leases in a check", task.ErrInvalid, task.MaxAcks)
	}
	for _, l := range leases {
		if err := CheckLease(l); err != nil {
			return err
		}
		if len(l) > task.MaxNameLen {
			return fmt.Errorf("%w: lease longer than %d bytes", task.ErrInvalid, task.MaxNameLen)
		}
	}
	return nil
}

// Cancel is Service.Cancel: Delete, recorded as a Cancel.
func (f *front) Cancel(ctx context.Context, queue, id string) error {
	if err := checkTask(queue, id); err != nil {
		return err
	}
	return f.e.Delete(withCancel(ctx), queue, id, DeleteOptions{})
}

// CancelledLeases is Service.CancelledLeases.
func (f *front) CancelledLeases(leases []string) ([]string, error) {
	if err := CheckLeases(leases); err != nil {
		return nil, err
	}
	return f.cancels.ended(leases, time.Now()), nil
}

// WatchCancels is Service.WatchCancels.
func (f *front) WatchCancels(fn func(lease string)) (stop func()) { return f.cancels.watch(fn) }

// cancels is what a Service heard of leases ended by deletes: the
// watchers to tell, and the leases ended lately, oldest first. It is
// safe for concurrent use by multiple goroutines; each method is O(1)
// amortised, but ended, O(len(leases)), and a lease's end, O(watchers).
type cancels struct {
	mu sync.Mutex
	// watchers are WatchCancels', by a number of their own; next is the
	// next number. Guarded by mu.
	watchers map[int]func(string)
	next     int
	// at is when each remembered lease ended; order holds them oldest
	// first from order[head]. Guarded by mu.
	at    map[string]time.Time
	order []string
	head  int
}

func newCancels() *cancels {
	return &cancels{watchers: map[int]func(string){}, at: map[string]time.Time{}}
}

// leaseEnded records that lease ended at now and tells the watchers,
// outside the lock.
func (c *cancels) leaseEnded(lease string, now time.Time) {
	c.mu.Lock()
	c.forget(now)
	if _, ok := c.at[lease]; !ok {
		c.at[lease] = now
		c.order = append(c.order, lease)
	}
	for len(c.at) > MaxCancelled {
		c.drop()
	}
	ws := make([]func(string), 0, len(c.watchers))
	for _, w := range c.watchers {
		ws = append(ws, w)
	}
	c.mu.Unlock()
	for _, w := range ws {
		w(lease)
	}
}

// forget drops the leases ended before now − CancelMemory. c.mu is held.
func (c *cancels) forget(now time.Time) {
	for c.head < len(c.order) && now.Sub(c.at[c.order[c.head]]) > CancelMemory {
		c.drop()
	}
}

// drop forgets the oldest lease, and gives back the order's space once
// half of it is forgotten. c.mu is held.
func (c *cancels) drop() {
	delete(c.at, c.order[c.head])
	c.order[c.head] = ""
	c.head++
	if c.head == len(c.order) {
		c.order, c.head = c.order[:0], 0
	} else if c.head > len(c.order)/2 {
		c.order = append([]string(nil), c.order[c.head:]...)
		c.head = 0
	}
}

// ended returns those of leases that ended within CancelMemory of now.
func (c *cancels) ended(leases []string, now time.Time) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forget(now)
	var out []string
	for _, l := range leases {
		if _, ok := c.at[l]; ok {
			out = append(out, l)
		}
	}
	return out
}

// watch registers fn until stop is called.
func (c *cancels) watch(fn func(string)) (stop func()) {
	c.mu.Lock()
	k := c.next
	c.next++
	c.watchers[k] = fn
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		delete(c.watchers, k)
		c.mu.Unlock()
	}
}
