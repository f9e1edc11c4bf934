package broker

import (
	"github.com/hourglass-go/hourglass"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// queueState is what the broker keeps in memory for one queue: its ready
// tasks in delivery order, by key (fair.go), the reservers waiting for one,
// and counts by state. It lives while the queue holds something or
// reservers wait on it (see Broker.queueForLocked). Guarded by Broker.mu.
type queueState struct {
	name  string
	index uint32
	ready lanes
	// waiters are reservers blocked in Reserve, oldest first.
	waiters waitList

	// buried holds the queue's dead tasks in the order they died, for
	// beanstalkd's peek-buried and kick; entries whose task is no longer
	// dead there are skipped and dropped lazily.
	buried []uint64
	// reburied counts, for a task that left the dead state (unplace),
	// its entries in buried from before: a task that dies again is
	// appended again, and its older entries must not put it where it
	// first died. Emptied when bury compacts buried (which keeps one
	// entry a task).
	reburied map[uint64]int
	// pausedUntil is when a pause (PauseQueue) ends, Unix ns; 0: none;
	// math.MaxInt64: until resumed. pauseEnd is the timer that ends a
	// finite pause (nil: none armed).
	pausedUntil int64
	pauseEnd    *hourglass.Timeout
	// pauses counts PauseQueue calls.
	pauses uint64

	// policy is the queue's policy (SetPolicy; policy.go), the zero
	// Policy when none was set. Its Retry and Rate are never changed in
	// place: a new policy replaces them.
	policy task.Policy
	// bucket holds the tokens of policy.Rate. Its At is on the monotonic
	// clock (Broker.monoNow); the queue's record keeps it on the wall
	// clock (writeBucketLocked), and recoverQueuesLocked restores it, so
	// that a restart does not refill it.
	bucket service.Bucket
	// recSeq and recOp say where the open group writes q's record, when
	// recSeq is its seq: Ops[recOp], a PutQueue that writeBucketLocked
	// updates in place rather than writing the record again.
	recSeq uint64
	recOp  int
	// rateWake wakes the queue's waiters when the next token is due, at
	// rateAt (Broker.monoNow); nil when none is armed (armRateLocked).
	rateWake *hourglass.Timeout
	rateAt   int64

	// held counts the queue's reserved tasks by key, a key other than ""
	// only while it has some; heldPlain the key "" (perkey.go).
	held      map[string]int
	heldPlain int
	// keyRates are the buckets of the per-key rate, a key's only while
	// it is not full (keyrate.go).
	keyRates map[string]*keyRate

	delayed, readyN, reserved, dead int
	puts, deliveries, acks          uint64
	// schedules counts the schedules that put into the queue.
	schedules int
	// real: the queue counts toward Config.MaxQueues (queueForLocked);
	// noted: it is in Broker.emptied; idleNoted: in Broker.idle, since its
	// last waiter left at pass leftGen of sweepIdle.
	real, noted, idleNoted bool
	leftGen                uint64
}

// readyItem is a ready task's place in its queue's delivery order
// (task.DeliveredBefore); ready is when it was made ready (Unix ns), for
// the lateness's split (service.SplitLateness).
type readyItem struct {
	due   int64
	ready int64
	prio  uint32
	job   uint64
}

// less reports whether a is delivered before b (task.DeliveredBefore).
func (a readyItem) less(b readyItem) bool {
	return task.DeliveredBefore(a.prio, a.due, a.job, b.prio, b.due, b.job)
}

// readyHeap is a binary min-heap of readyItems. Removing a task that is
// ready (delete, replace) leaves its item in the heap; Reserve skips items
// whose task is no longer ready when it pops them. Push and pop are
// O(log n).
type readyHeap []readyItem

func (h *readyHeap) push(it readyItem) {
	*h = append(*h, it)
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !s[i].less(s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *readyHeap) pop() (readyItem, bool) {
	s := *h
	if len(s) == 0 {
		return readyItem{}, false
	}
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s = s[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && s[r].less(s[l]) {
			m = r
		}
		if !s[m].less(s[i]) {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	if cap(s) > 1024 && len(s) < cap(s)/4 {
		*h = append(readyHeap(nil), s...) // give back a drained burst
	}
	return top, true
}
