package cluster

import (
	"time"

	"github.com/hourglass-go/hourglass/service"
)

// queueWait is what a node keeps for one queue it has reservers waiting
// on: the waiters, oldest first (service.WaitList; the long-poll and its
// rules are service.LongPoll's). It lives while they wait: the last to
// leave drops it (poller.Left), so a name a client waited on leaves
// nothing behind. Guarded by Node.mu.
type queueWait struct {
	name string
	service.WaitList[handed]
	// gen counts the signals that tasks may have become ready in the
	// queue (Wake, WakeAll), whether they woke a waiter or not.
	gen uint64
	// emptyAt is gen as it was at the start of the last look of this
	// queue alone that found nothing, needed no look again (no pause, no
	// limit) and saw no signal before its end, until emptyUntil: see
	// poller.Look. emptyUntil is zero when there is none.
	emptyAt    uint64
	emptyUntil time.Time
}

// Wake is WaitList.Wake, counted in gen.
func (q *queueWait) Wake(k int) int {
	q.gen++
	return q.WaitList.Wake(k)
}

// WakeAll is WaitList.WakeAll, counted in gen.
func (q *queueWait) WakeAll() {
	q.gen++
	q.WaitList.WakeAll()
}

// knownEmpty reports whether a look of q alone at now would find what
// the last empty one found, nothing: no signal came since it began, and
// it is less than emptyFor old. n.mu is held. O(1).
func (q *queueWait) knownEmpty(now time.Time) bool {
	return !q.emptyUntil.IsZero() && q.gen == q.emptyAt && now.Before(q.emptyUntil)
}

// emptyFor is how long a look that found a queue empty stands for the
// looks of the reservers that come after it, when no signal came
// between (poller.Look).
const emptyFor = 100 * time.Millisecond

// handed is a row a flush reserved for a waiting reserver, with the
// database's clock when it did (the reservation's time).
type handed struct {
	row
	dbNow int64
}

// queueWait returns the waiting state of queue, creating it. n.mu is
// held.
func (n *Node) queueWait(queue string) *queueWait {
	q := n.queues[queue]
	if q == nil {
		q = &queueWait{name: queue}
		n.queues[queue] = q
	}
	return q
}

// Left drops the waiting state of those of queues no reserver waits on
// any more (service.Poller). n.mu is held. O(len(queues)).
func (p *poller) Left(queues []string) {
	n := (*Node)(p)
	for _, q := range queues {
		if qw := n.queues[q]; qw != nil && qw.Unused() {
			delete(n.queues, q)
		}
	}
}

// wakeNotified acts on a notification of tasks made ready in queues by
// another node: k of them (all: every reserver is to look again).
// The time of a wake is recorded for the hop notified → reserved
// (metrics.wakes).
func (n *Node) wakeNotified(queues []string, k int, all bool) {
	now := time.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, q := range queues {
		if qw := n.queues[q]; qw != nil {
			if all {
				qw.WakeAll()
			} else if qw.Wake(k) == 0 {
				continue
			}
			n.metrics.wakes.woken(q, now)
		}
	}
}

// waiting returns the queues with reservers waiting on them alone and
// how many tasks each takes, at most limit, for a flush to reserve for
// them (sqlFlush's hand). O(queues waited on).
func (n *Node) waiting(limit int) (queues []string, lims []int32) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for name, q := range n.queues {
		if k := min(q.Slots(), limit); k > 0 {
			queues, lims = append(queues, name), append(lims, int32(k))
		}
	}
	return queues, lims
}

// handOver gives rows, reserved by a flush for this node's waiting
// reservers, to them, queue by queue in delivery order, and gives back
// what no waiter was left to take.
func (n *Node) handOver(rows []row, dbNow int64) {
	sortRows(rows)
	byQueue := map[string][]handed{}
	for _, r := range rows {
		byQueue[r.queue] = append(byQueue[r.queue], handed{r, dbNow})
	}
	var left []handed
	n.mu.Lock()
	for name, hs := range byQueue {
		if q := n.queues[name]; q != nil {
			hs = q.HandOver(hs)
		}
		left = append(left, hs...)
	}
	n.mu.Unlock()
	n.metrics.handed.Add(float64(len(rows) - len(left)))
	if len(left) > 0 {
		n.giveBack(left)
	}
}

// leaseCall returns the leasing call of a flush that hands tasks of
// queues over to this node's waiting reservers (flushEnv): given back
// if its answer is lost, unless it hands none over.
func (n *Node) leaseCall(queues []string) *leaseCall {
	c := n.giveBacks.call(queues)
	if len(queues) == 0 {
		c.g = nil
	}
	return c
}
