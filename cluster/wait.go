package cluster

// queueWait is what a node keeps for one queue it has had reservers
// waiting on: the waiters, oldest first. Whether the node listens to the
// queue's channel is the notifications' (listenQueue). Guarded by
// Node.mu.
type queueWait struct {
	name    string
	waiters []*waiter
}

// waiter is one blocked reservation, signalled (buffered 1) when tasks
// may have become ready in its queue; max is how many it takes at most.
// A waiter on one queue that has looked and found nothing (waiting) may
// be handed tasks by the flush (see handOver): rows, reserved for it by
// the flush's own statement, with dbNow the database's clock then. The
// fields are guarded by Node.mu, and rows is set only together with the
// signal and the waiter's removal from its list.
type waiter struct {
	ch      chan struct{}
	max     int
	single  bool
	waiting bool
	rows    []row
	dbNow   int64
}

// wake signals waiters, oldest first, taking them off the list, until
// those signalled can take k tasks between them, and returns how many
// they can take: k tasks made ready wake one reserver of max 100, not k
// of them, so that one statement takes them all rather than many race for
// them. A waiter woken for nothing (another reserver was first) looks
// once and waits again.
func (q *queueWait) wake(k int) (took int) {
	for took < k && len(q.waiters) > 0 {
		w := q.waiters[0]
		q.waiters[0] = nil
		q.waiters = q.waiters[1:]
		select {
		case w.ch <- struct{}{}:
			took += max(w.max, 1)
		default:
		}
	}
	return took
}

// slots is how many tasks the flush may reserve for the waiters of q:
// the sum of what its waiters on q alone, waiting, take at most.
func (q *queueWait) slots() (k int) {
	for _, w := range q.waiters {
		if w.single && w.waiting {
			k += w.max
		}
	}
	return k
}

// handOver gives rows, reserved for q's waiters in delivery order, to
// its waiters on q alone, oldest first, each as many as it takes,
// signalling them and taking them off the list, and returns the rows no
// waiter was left to take (waiters that left while the rows were being
// reserved).
func (q *queueWait) handOver(rows []row, dbNow int64) (left []row) {
	kept := q.waiters[:0]
	for _, w := range q.waiters {
		if len(rows) == 0 || !w.single || !w.waiting || len(w.ch) > 0 {
			kept = append(kept, w)
			continue
		}
		k := min(w.max, len(rows))
		w.rows, w.dbNow, rows = rows[:k:k], dbNow, rows[k:]
		w.ch <- struct{}{}
	}
	clear(q.waiters[len(kept):])
	q.waiters = kept
	return rows
}

// wakeAll signals every waiter.
func (q *queueWait) wakeAll() {
	for _, w := range q.waiters {
		select {
		case w.ch <- struct{}{}:
		default:
		}
	}
	clear(q.waiters)
	q.waiters = q.waiters[:0]
}

// remove takes w off the list and reports whether it was there (false:
// it was signalled).
func (q *queueWait) remove(w *waiter) bool {
	for i, x := range q.waiters {
		if x == w {
			q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
			return true
		}
	}
	return false
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

// wakeNotified acts on a notification of tasks made ready in queues by
// another node: k of them (all: every reserver is to look again).
func (n *Node) wakeNotified(queues []string, k int, all bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, q := range queues {
		if qw := n.queues[q]; qw != nil {
			if all {
				qw.wakeAll()
			} else {
				qw.wake(k)
			}
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
		if k := min(q.slots(), limit); k > 0 {
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
	byQueue := map[string][]row{}
	for _, r := range rows {
		byQueue[r.queue] = append(byQueue[r.queue], r)
	}
	var left []row
	n.mu.Lock()
	for name, rs := range byQueue {
		if q := n.queues[name]; q != nil {
			rs = q.handOver(rs, dbNow)
		}
		left = append(left, rs...)
	}
	n.mu.Unlock()
	n.metrics.handed.Add(float64(len(rows) - len(left)))
	if len(left) > 0 {
		n.giveBack(left)
	}
}
