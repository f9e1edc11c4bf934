package broker

import (
	"context"
	"encoding/hex"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/store"
	"github.com/hourglass-go/hourglass/task"
)

// ReserveQueues hands out up to max ready tasks of queues, the first in
// delivery order across them: priority, then due time, then put order,
// each leased for its TTR: the answer's tasks carry Lease, which Ack,
// Touch and Nack take. When none is ready it waits up to wait for the
// first one and answers as soon as one is (an empty answer when none
// came, or when ctx ends). Every task it hands out is durable (its put
// committed); the reservation itself (the attempt and the lease) is
// committed with the next group but not waited for, as beanstalkd does
// not log reserves at all: a crash before that commit makes the task
// ready again as if its lease had run out, with the attempt not counted
// and the lease unknown. max must be 1 to MaxReserve and wait 0 to
// MaxWait. A paused queue (PauseQueue) hands out nothing until its pause
// ends, and a queue's rate and concurrency limits (SetPolicy) hold: a
// reserve that meets them answers what it got, or waits within wait for
// the first task they let it take.
func (b *Broker) ReserveQueues(ctx context.Context, queues []string, max int, wait time.Duration) ([]task.Task, error) {
	return b.reserve(ctx, queues, max, wait)
}

// reserve is Reserve over several queues: service.LongPoll over the
// broker's look (poller.Look).
func (b *Broker) reserve(ctx context.Context, names []string, max int, wait time.Duration) ([]task.Task, error) {
	return service.LongPoll(ctx, &b.mu, (*poller)(b), names, max, wait)
}

// noHandOver is the type of what a broker's waiter could be handed:
// nothing. A broker's reserve takes ready tasks under the lock that makes
// them ready, so there is nothing to gain by reserving tasks for a
// waiter before it looks.
type noHandOver struct{}

// waitList is a queue's blocked reservers (service.WaitList).
type waitList = service.WaitList[noHandOver]

// poller is the broker as service.LongPoll sees it.
type poller Broker

// Look is one look of a reservation (service.Poller).
//
// It is made in three steps, so that the store is never read with b.mu
// held (a read that misses the store's cache would hold up every put,
// ack and firing behind it): take picks the tasks and marks them
// reserved in memory, under b.mu; their records are read without it
// (readTaken); hand writes the reservations and arms their leases, under
// b.mu again, leaving out any task that was deleted or replaced in
// between (see Broker.taking). Finding none, it adds w to the waiting
// lists of the queues under the same hold of b.mu, so that a task made
// ready after it looked wakes w. A name that holds nothing is no queue:
// a look without w passes it over, and w waits on a queueState made for
// it (waitQueueLocked) that counts toward no limit and goes after w leaves
// (Left); past Config.MaxQueues such names, w does not wait on a new
// one, and the look asks to be made again within unwaitedPoll.
func (p *poller) Look(ctx context.Context, names []string, max int, w *service.Waiter[noHandOver]) ([]task.Task, time.Duration, error) {
	b := (*Broker)(p)
	qs := make([]*queueState, len(names))
	for {
		b.mu.Lock()
		if err := b.usableLocked(); err != nil {
			b.mu.Unlock()
			return nil, 0, err
		}
		var retry time.Duration
		for i, n := range names {
			qs[i] = b.byName[n] // nil: none, so nothing ready
			if qs[i] == nil && w != nil {
				if len(b.byName)-b.real < b.cfg.MaxQueues {
					qs[i] = b.waitQueueLocked(n)
				} else {
					retry = unwaitedPoll // too many names waited on
				}
			}
		}
		items, g, at := b.takeLocked(qs, max)
		if len(items) == 0 {
			if w != nil {
				for _, q := range qs {
					if q != nil {
						q.waiters.Add(w)
					}
				}
			}
			b.mu.Unlock()
			return nil, retry, nil
		}
		b.mu.Unlock()
		if b.takenHook != nil {
			b.takenHook()
		}
		b.readTaken(items)
		b.mu.Lock()
		tasks, err := b.handLocked(items, at)
		b.mu.Unlock()
		if len(tasks) == 0 && err == nil {
			continue // all deleted or replaced meanwhile: look again
		}
		// Wait for the commit of what the tasks handed out were put
		// with, if it is still running, even if ctx ends meanwhile (it
		// takes an fsync), so that a caller gone by then gets its
		// reservations given back at once rather than when their
		// leases run out.
		if g != nil {
			<-g.done
			if g.err != nil {
				return nil, 0, failed(g.err)
			}
		}
		if cerr := ctx.Err(); cerr != nil && len(tasks) > 0 {
			b.giveBack(tasks)
			return nil, 0, cerr
		}
		return tasks, 0, err
	}
}

// unwaitedPoll is how often a reserve looks again at a name it could not
// wait on: one that holds nothing, while the broker keeps
// Config.MaxQueues such names that reservers wait on (or just waited
// on). Past that bound a client naming ever new queues in long polls
// makes no more state; a reserver on a name past it still gets the
// tasks put there, within unwaitedPoll.
const unwaitedPoll = time.Second

// Left notes the queues of names that hold nothing and that no reserver
// waits on any more, for sweepIdle to drop after idleGrace
// (service.Poller). b.mu must be held. O(len(names)).
func (p *poller) Left(names []string) {
	b := (*Broker)(p)
	for _, n := range names {
		if q, ok := b.byName[n]; ok && !q.holdsLocked() && q.waiters.Unused() {
			b.leftIdleLocked(q)
		}
	}
}

// Deliver is never called: nothing is handed to a broker's waiter.
func (p *poller) Deliver([]noHandOver) []task.Task { return nil }

// GiveBack is never called: nothing is handed to a broker's waiter.
func (p *poller) GiveBack([]noHandOver) {}

// taken is a task take picked: reserved in memory, its record (or just
// its payload) still to be read when need is set.
type taken struct {
	job   uint64
	ready int64 // when it was made ready, Unix ns
	q     *queueState
	key   string // its key, for a task made ready again (hand)
	rec   store.Task
	need  bool
	err   error // reading the record failed
}

// takeLocked picks up to max ready tasks from qs, marks them reserved in
// memory and in b.taking, and returns them with the time it picked them,
// in the order of service.KeyCompare's rule: first the round of each
// queue that uses keys (each key whose first task has the queue's first
// priority, once, in the order of its name after the queue's cursor,
// which moves to it), the rounds' tasks across queues by priority, then
// place in their round, then due time and job id; then the rest (the
// fill) in delivery order across the queues' keys. Records still in the
// overlay are copied from it; the others are left to readTaken. A paused
// queue is passed over, and so is one whose limits allow no more: as
// many tasks reserved as its concurrency, or no token of its rate left
// (then a timer is armed to wake its waiters when one is due); a key at
// its per-key limits is parked (perkey.go). pending is the newest group
// still to be committed that wrote any of them before (their put, say),
// which the caller waits for before handing them out, or nil. b.mu must
// be held. O(t (q + log n + log k)) for t tasks taken from q queues, n
// ready tasks a key and k keys, and O(k) more for a queue whose round
// leaves a fill over several keys (its lanes, once a take).
func (b *Broker) takeLocked(qs []*queueState, max int) (out []taken, pending *group, at time.Time) {
	at = time.Now()
	now := at.UnixNano()
	ready, keyed := 0, false
	for _, q := range qs {
		if q != nil {
			ready += q.readyN
			keyed = keyed || q.ready.keyed()
		}
	}
	if ready > 0 {
		// At most what is ready: a taken is 280 bytes, and growing the
		// slice by appends would allocate about twice the final size.
		out = make([]taken, 0, min(max, ready))
	}
	t := taker{b: b, qs: qs, now: now, mono: b.monoNow()}
	if keyed {
		var buf [4]keyRound
		t.rounds = buf[:0]
		if len(qs) > len(buf) {
			t.rounds = make([]keyRound, 0, len(qs))
		}
		t.rounds = t.rounds[:len(qs)]
		for len(out) < max {
			i, top, lane := t.nextLocked(true)
			if i < 0 {
				break
			}
			if !t.spendLocked(qs[i], lane) {
				continue
			}
			lane.heap.pop()
			qs[i].ready.served(lane)
			t.rounds[i].n++
			out, pending = b.pickLocked(qs[i], lane.key, top, out, pending)
		}
	}
	for len(out) < max {
		i, top, lane := t.nextLocked(false)
		if i < 0 {
			break
		}
		if !t.spendLocked(qs[i], lane) {
			continue
		}
		lane.heap.pop()
		qs[i].ready.changed(lane)
		if t.rounds != nil {
			t.rounds[i].fill.took(lane)
		}
		out, pending = b.pickLocked(qs[i], lane.key, top, out, pending)
	}
	if len(out) < max {
		// A reserve that a limit held back: it took fewer than it asked
		// for, and a queue with ready tasks met its limit
		// (service.HeldBy, which a cluster node asks alike).
		for _, q := range t.held {
			if why := service.HeldBy(q.fullLocked(), b.rateSpentLocked(q)); why != "" {
				b.metrics.HeldBack(q.name, why)
			}
		}
	}
	return out, pending, at
}

// taker is one takeLocked: its queues, the queues a limit held back in
// it, and the queues' rounds.
type taker struct {
	b    *Broker
	qs   []*queueState
	now  int64
	mono int64 // the per-key rates' clock (keyrate.go)
	// held are the queues held back by a limit in this take.
	held []*queueState
	// rounds are the queues' rounds, by index in qs; nil when no queue
	// uses keys.
	rounds []keyRound
}

// keyRound is a queue's round in one take (takeLocked).
type keyRound struct {
	// started: prio, end and on are set (at the queue's first look).
	started bool
	// on: the round is not over.
	on bool
	// prio is the priority of the queue's first task as the take began:
	// the round serves the keys whose first task has it.
	prio uint32
	// endRound and endKey are the cursor as the take began, a round on:
	// a lane placed after them was served in this take.
	endRound uint64
	endKey   string
	// n counts the keys served in the round.
	n int
	// fill orders the queue's lanes for the fill.
	fill fillHeap
}

// within reports whether l's place is in r's round.
func (r *keyRound) within(l *keyLane) bool {
	return l.round < r.endRound || l.round == r.endRound && service.KeyCompare(l.key, r.endKey) <= 0
}

// nextLocked returns the index in t.qs of the queue to take from next,
// with its task's item and lane, or -1: in the rounds (round), the first
// by priority, place in the round, due time and job id of each queue's
// next key of its round; else (the fill) the first in delivery order of
// each queue's first task across its keys. It passes over the queues
// that are paused or held back, and notes those that a limit holds back.
// b.mu must be held.
func (t *taker) nextLocked(round bool) (int, readyItem, *keyLane) {
	b := t.b
	best, bestPos := -1, 0
	var top readyItem
	var lane *keyLane
	for i, q := range t.qs {
		if q == nil || q.pausedUntil > t.now || slices.Contains(t.held, q) {
			continue
		}
		if round && !t.rounds[i].started && !q.ready.keyed() {
			continue // no round: decided as the take began
		}
		if q.readyN > 0 && q.fullLocked() {
			t.held = append(t.held, q)
			continue
		}
		var it readyItem
		var l *keyLane
		var ok bool
		pos := 0
		if round {
			r := &t.rounds[i]
			if r.started && !r.on {
				continue
			}
			it, l, ok = b.peekLiveLocked(q, t.mono)
			if ok && !r.started {
				r.started, r.on, r.prio = true, true, it.prio
				r.endRound, r.endKey = q.ready.round+1, q.ready.cursor
				if l == &q.ready.plain && !b.keyedLiveLocked(q) {
					r.on = false // only tasks of the key "": no round
					continue
				}
			}
			if ok && (it.prio != r.prio || !r.within(l)) {
				r.on = false
				continue
			}
			pos = r.n
		} else if t.rounds != nil && (len(q.ready.order) > 1 || t.rounds[i].fill.built) {
			it, l, ok = b.fillFirstLocked(q, &t.rounds[i].fill, t.mono)
		} else {
			it, l, ok = b.peekLiveLocked(q, t.mono)
		}
		if !ok {
			if q.readyN > 0 && b.rateSpentLocked(q) {
				// Every key with ready tasks is at its limit, and
				// the rate would hold them too: counted as the rate
				// (a cluster node counts alike, heldBack).
				t.held = append(t.held, q)
			}
			continue
		}
		if best < 0 || it.prio < top.prio || it.prio == top.prio && (pos < bestPos || pos == bestPos && it.less(top)) {
			best, bestPos, top, lane = i, pos, it, l
		}
	}
	return best, top, lane
}

// spendLocked takes a token of q's rate, if it has one, and of lane's key
// rate, if it has one, for a task of lane; false, noting q held back,
// when q's rate has none left. b.mu must be held.
func (t *taker) spendLocked(q *queueState, lane *keyLane) bool {
	b := t.b
	if r := q.policy.Rate; r != nil {
		mono := b.monoNow()
		if took, next := q.bucket.Take(*r, mono, 1); took == 0 {
			b.armRateLocked(q, mono, next)
			t.held = append(t.held, q)
			return false
		}
	}
	if q.policy.PerKey != nil {
		b.takeKeyTokenLocked(q, lane.key, t.mono)
	}
	return true
}

// keyedLiveLocked reports whether q has a ready task of a key other than
// "" (or a parked lane of one), dropping the stale first items of the
// lanes it looks at: a queue whose ready tasks are all of the key "" has
// no round (service.KeyCompare's rule), whatever its lanes keep of tasks
// gone. b.mu must be held. O(1) but for the stale items dropped, each
// O(log n + log k) once.
func (b *Broker) keyedLiveLocked(q *queueState) bool {
	ls := &q.ready
	for {
		var stale *keyLane
		for _, r := range ls.order {
			if r.l == &ls.plain {
				continue
			}
			if b.liveLocked(q, r.l.heap[0]) {
				return true
			}
			stale = r.l
			break
		}
		if stale == nil {
			return ls.parked > 1 || ls.parked == 1 && !ls.plain.parked
		}
		for len(stale.heap) > 0 && !b.liveLocked(q, stale.heap[0]) {
			stale.heap.pop()
		}
		ls.changed(stale) // out of order when empty
	}
}

// peekLiveLocked is peekReadyLocked, parking the lanes of keys that their
// per-key limits hold back (back when a task of the key is not reserved,
// perkey.go, or its next token is due, keyrate.go). b.mu must be held.
func (b *Broker) peekLiveLocked(q *queueState, mono int64) (readyItem, *keyLane, bool) {
	it, l, ok := b.peekReadyLocked(q)
	for ok && q.policy.PerKey != nil && b.keyHeldLocked(q, l.key, mono) {
		q.ready.park(l)
		it, l, ok = b.peekReadyLocked(q)
	}
	return it, l, ok
}

// pickLocked marks the task of item top, of key in q, whose item was just
// popped, reserved in memory and in b.taking, and appends it to out,
// with its record if the overlay or b.recent has it; pending is as
// takeLocked's. b.mu must be held.
func (b *Broker) pickLocked(q *queueState, key string, top readyItem, out []taken, pending *group) ([]taken, *group) {
	it := taken{job: top.job, ready: top.ready, q: q, key: key, need: true}
	if p, ok := b.over.tasks[top.job]; ok {
		if pending == nil || p.g.seq > pending.seq {
			pending = p.g // groups commit in order: the newest covers the rest
		}
		it.rec, it.need = p.t, p.t.Payload == nil
		if it.need {
			if pl, ok := b.recent.payload(top.job); ok {
				it.rec.Payload, it.need = pl, false
			}
		}
	} else if rec, ok := b.recent.take(top.job); ok {
		it.rec, it.need = rec, false
	}
	b.recent.count(!it.need)
	s := b.tasks.at(top.job)
	q.countLocked(task.Ready, task.Reserved)
	s.set(task.Reserved)
	b.tasks.set(top.job, s)
	b.taking[top.job] = key
	q.holdLocked(key)
	return append(out, it), pending
}

// fillHeap is a binary min-heap of a queue's lanes by their first items
// in delivery order, for a take's fill (takeLocked). It is made at the
// fill's first step from the lanes whose first item has at most the
// priority of the queue's first lane (limit), found by a walk of the
// lanes' heap that passes over the subtrees of lower priorities: O(g) for
// the g lanes of that priority, so that a key of a high priority filling
// reserves does not cost the lanes of every key of a lower one. Only when
// the fill needs a task of a lower priority is it made again from every
// lane, O(k), once a take. Each step is O(log g). Lanes whose first items
// are stale sort too early and are set right when they come to the top
// (fillFirstLocked).
type fillHeap struct {
	built bool
	// limit is the lowest priority (the highest number) of the lanes
	// gathered; every lane left out has a first item of a lower one.
	limit uint32
	lanes []*keyLane
	stack []int
}

// gather makes f of the lanes of order whose places say a first item of
// priority limit or higher (a lane's place has its first item's
// priority, or a higher one if that item is stale).
func (f *fillHeap) gather(order []laneRef, limit uint32) {
	f.built, f.limit, f.lanes = true, limit, f.lanes[:0]
	if len(order) > 0 {
		f.stack = append(f.stack[:0], 0)
	}
	for len(f.stack) > 0 {
		i := f.stack[len(f.stack)-1]
		f.stack = f.stack[:len(f.stack)-1]
		if order[i].prio > limit {
			continue // so is every lane below it
		}
		f.lanes = append(f.lanes, order[i].l)
		for _, c := range []int{2*i + 1, 2*i + 2} {
			if c < len(order) {
				f.stack = append(f.stack, c)
			}
		}
	}
	for i := len(f.lanes)/2 - 1; i >= 0; i-- {
		f.down(i)
	}
}

// fillFirstLocked returns the first live ready item of q in delivery
// order across its lanes, and its lane, which is f's first; it gathers f
// on its first call, and again from every lane when the first item it
// has is of a lower priority than some lane left out may have; it drops
// stale items and parks the lanes of keys that their per-key limits hold
// back. b.mu must be held.
func (b *Broker) fillFirstLocked(q *queueState, f *fillHeap, mono int64) (readyItem, *keyLane, bool) {
	if !f.built {
		if len(q.ready.order) == 0 {
			return readyItem{}, nil, false
		}
		f.gather(q.ready.order, q.ready.order[0].prio)
	}
	for {
		if len(f.lanes) == 0 {
			if f.limit == math.MaxUint32 || len(q.ready.order) == 0 {
				return readyItem{}, nil, false
			}
			f.gather(q.ready.order, math.MaxUint32)
			continue
		}
		l := f.lanes[0]
		popped := false
		for len(l.heap) > 0 && !b.liveLocked(q, l.heap[0]) {
			l.heap.pop()
			popped = true
		}
		if popped {
			q.ready.changed(l) // out of order when empty
		}
		switch {
		case len(l.heap) == 0:
			f.pop()
		case q.policy.PerKey != nil && b.keyHeldLocked(q, l.key, mono):
			f.pop()
			q.ready.park(l)
		case popped:
			f.down(0)
		case l.heap[0].prio > f.limit:
			// A lane left out may come first.
			f.gather(q.ready.order, math.MaxUint32)
		default:
			return l.heap[0], l, true
		}
	}
}

// took places l, f's first lane, whose first item a take popped, again:
// out of f when it has none left.
func (f *fillHeap) took(l *keyLane) {
	if !f.built || len(f.lanes) == 0 || f.lanes[0] != l {
		return
	}
	if len(l.heap) == 0 {
		f.pop()
		return
	}
	f.down(0)
}

// pop drops f's first lane.
func (f *fillHeap) pop() {
	n := len(f.lanes) - 1
	f.lanes[0] = f.lanes[n]
	f.lanes[n] = nil
	f.lanes = f.lanes[:n]
	if n > 0 {
		f.down(0)
	}
}

func (f *fillHeap) down(i int) {
	s := f.lanes
	n := len(s)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && s[r].heap[0].less(s[l].heap[0]) {
			m = r
		}
		if !s[m].heap[0].less(s[i].heap[0]) {
			return
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
}

// readTaken reads from the store the records (or, for records taken from
// the overlay, the payloads) that take left out. b.mu is not held: the
// tasks are marked taken, so nothing writes their records meanwhile
// without hand noticing.
func (b *Broker) readTaken(items []taken) {
	for i := range items {
		it := &items[i]
		if !it.need {
			continue
		}
		full, err := b.st.Task(it.job)
		switch {
		case err != nil:
			it.err = b.storeErr(err)
			if it.rec.JobID == 0 {
				it.rec = full // the record, if only the payload is damaged
			}
		case it.rec.JobID != 0:
			it.rec.Payload = full.Payload
		default:
			it.rec = full
		}
	}
}

// handLocked leases the tasks take picked at time at that are still taken,
// and returns them in delivery order. A task whose record or payload is damaged in
// the store is made dead (see damaged), so that it does not stop its
// queue; a task whose record could not be read for another reason is
// ready again, and its error is returned if no task is handed out. b.mu
// must be held.
func (b *Broker) handLocked(items []taken, at time.Time) ([]task.Task, error) {
	if err := b.usableLocked(); err != nil {
		return nil, err
	}
	now := time.Now()
	out := make([]task.Task, 0, len(items))
	var failed error
	for _, it := range items {
		if _, ok := b.taking[it.job]; !ok {
			continue // deleted or replaced since take
		}
		delete(b.taking, it.job)
		s := b.tasks.at(it.job)
		if errors.Is(it.err, store.ErrCorrupt) {
			it.q.unholdLocked(it.key)
			b.damagedLocked(it, s)
			continue
		}
		if it.err != nil {
			it.q.unholdLocked(it.key)
			it.q.countLocked(task.Reserved, task.Ready)
			s.set(task.Ready)
			b.tasks.set(it.job, s)
			it.q.ready.push(it.key, readyItem{due: s.due, ready: it.ready, prio: s.prio, job: it.job})
			it.q.waiters.Wake(1)
			if failed == nil {
				failed = it.err
			}
			continue
		}
		out = append(out, b.leaseLocked(it.job, s, it.rec, now))
		it.q.deliveries++
		late, ready := service.SplitLateness(it.rec.Due, it.ready, at.UnixNano())
		b.metrics.Delivered(late, ready)
		b.late.Add(at, late, ready)
	}
	// The tokens take took go into the group of the reservations: a
	// crash loses both or neither.
	for i, it := range items {
		if it.q.policy.Rate != nil && (i == 0 || it.q != items[i-1].q) {
			b.writeBucketLocked(it.q)
		}
	}
	if len(out) > 0 {
		// The answer lists the tasks in delivery order, as a cluster
		// node's does (cluster's deliver), whatever order the rounds
		// took them in.
		slices.SortFunc(out, func(a, b task.Task) int {
			if task.DeliveredBefore(a.Priority, a.Due.UnixNano(), a.JobID, b.Priority, b.Due.UnixNano(), b.JobID) {
				return -1
			}
			return 1
		})
		return out, nil
	}
	return nil, failed
}

// damagedLocked makes dead the task it, taken by a reserve, whose record or
// payload the store reports damaged (it.err wraps store.ErrCorrupt), and
// logs the damage: every reserve reaching it would fail otherwise, and
// the tasks behind it in its queue would never be handed out. A dead task
// stays until it is deleted (or kicked, to fail again). With its record
// readable (only the payload damaged) the death is recorded; with the
// record damaged too it is dead in memory only. b.mu must be held.
func (b *Broker) damagedLocked(it taken, s slot) {
	rec := it.rec
	b.log.Error("hourglass: task damaged in the store; it is dead now and can be deleted",
		"queue", it.q.name, "id", rec.ID, "job_id", it.job, "err", it.err)
	if rec.JobID != 0 {
		now := time.Now().UnixNano()
		rec.State = store.Dead
		rec.Lease, rec.LeaseUntil, rec.Payload = "", 0, nil
		b.leaveLocked(&rec, task.FinishedDead, now)
		rec.Reserved = now // while dead: when it died, for Recover's order
		b.writeTaskLocked(store.UpdateTask, rec)
	}
	b.buryLocked(it.job, s, it.q)
	b.metrics.Failed(it.q.name, 1, true, false)
}

// peekReadyLocked returns the first item of q's ready tasks in delivery
// order across keys (fair.go) whose task is still ready there, with that
// due time and priority, and its key's lane, dropping stale items. b.mu
// must be held.
func (b *Broker) peekReadyLocked(q *queueState) (readyItem, *keyLane, bool) {
	for {
		l := q.ready.first()
		if l == nil {
			return readyItem{}, nil, false
		}
		popped := false
		for len(l.heap) > 0 && !b.liveLocked(q, l.heap[0]) {
			l.heap.pop()
			popped = true
		}
		if !popped {
			return l.heap[0], l, true
		}
		q.ready.changed(l) // another lane may come first now
	}
}

// liveLocked reports whether it is the current item of a task ready in
// q: an item is only if it still has the task's due time and priority,
// since a task reserved by job id (beanstalkd's reserve-job) leaves its
// item behind, and made ready again it has a newer one, later in the
// order. b.mu must be held. O(1).
func (b *Broker) liveLocked(q *queueState, it readyItem) bool {
	s, ok := b.tasks.get(it.job)
	return ok && s.state() == task.Ready && s.queue() == q.index && s.due == it.due && s.prio == it.prio
}

// leaseLocked writes job's reservation (its slot s already marked reserved
// and counted; rec its record) until now+TTR, arms the lease wheel and
// returns the task with its lease. b.mu must be held.
func (b *Broker) leaseLocked(job uint64, s slot, rec store.Task, now time.Time) task.Task {
	rec.State = store.Reserved
	rec.Attempts++
	rec.Reserved = now.UnixNano()
	rec.Lease = newLease(job)
	rec.LeaseUntil = now.Add(rec.TTR).UnixNano()
	payload := rec.Payload
	rec.Payload = nil // an update leaves the stored payload as it is
	b.writeTaskLocked(store.UpdateTask, rec)
	b.leased[job] = rec
	b.leases.Set(job, rec.TTR)
	rec.Payload = payload
	t := view(rec, s)
	t.Lease = rec.Lease
	return t
}

// newLease returns a fresh lease token for job: 64 random bits in hex,
// then job's id in hex, so that a lease names its task (leaseJob) and
// ack, touch and nack find it without looking the task's id up in the
// store.
func newLease(job uint64) string {
	var buf [8]byte
	v := rand.Uint64()
	for i := range buf {
		buf[i] = byte(v >> (8 * i))
	}
	return string(strconv.AppendUint(hex.AppendEncode(make([]byte, 0, 32), buf[:]), job, 16))
}

// leaseJob returns the job id a lease made by newLease names; ok is false
// for any other string (a lease from an older version, or garbage).
func leaseJob(lease string) (job uint64, ok bool) {
	if len(lease) <= 16 {
		return 0, false
	}
	job, err := strconv.ParseUint(lease[16:], 16, 64)
	return job, err == nil
}

// fire is the delay wheel's callback: job has fallen due. It runs on the
// wheel's goroutine.
func (b *Broker) fire(job uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.tasks.get(job)
	if !ok || s.state() != task.Delayed || b.closed {
		return // deleted, kicked or replaced since it was armed
	}
	if left := s.due - time.Now().UnixNano(); left > 0 {
		// The wall clock moved back since the wheel was armed: a task is
		// never handed out before its due time by the wall clock, which
		// is the one due times are given in. Wait out the rest.
		b.delays.Set(job, time.Duration(left))
		return
	}
	b.fallDueLocked(job, s)
}

// fallDueLocked makes the delayed task job ready: into its key's lane of
// its queue's ready tasks, waking one reserver. b.mu must be held.
func (b *Broker) fallDueLocked(job uint64, s slot) {
	q := b.queues[s.queue()]
	q.countLocked(task.Delayed, task.Ready)
	s.set(task.Ready)
	b.tasks.set(job, s)
	key, ok := b.delayKeys[job]
	if ok {
		delete(b.delayKeys, job)
	}
	q.ready.push(key, readyItem{due: s.due, ready: time.Now().UnixNano(), prio: s.prio, job: job})
	q.waiters.Wake(1)
}

// expireLease is the lease wheel's callback: job's reservation may have
// run out. It runs on the wheel's goroutine.
func (b *Broker) expireLease(job uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.tasks.get(job)
	if !ok || s.state() != task.Reserved || b.closed || b.failed != nil {
		return
	}
	rec, err := b.metaLocked(job)
	if err != nil {
		b.log.Error("hourglass: lease expiry: reading the task", "job_id", job, "err", err)
		return
	}
	now := time.Now()
	if left := rec.LeaseUntil - now.UnixNano(); left > 0 {
		// Touched after the wheel took it, or the wall clock moved back:
		// wait out the rest.
		b.leases.Set(job, time.Duration(left))
		return
	}
	b.expiredLocked(job, s, rec, now.UnixNano())
}

// expiredLocked settles job, whose lease ran out (the wheel fired, or it
// ran out while the broker was down), as service.Expired decides. b.mu
// must be held.
func (b *Broker) expiredLocked(job uint64, s slot, rec store.Task, now int64) {
	b.settleLocked(job, s, rec, service.Expired(b.heldOfLocked(s, rec), rand.Float64()), now)
}

// giveBack ends reservations whose caller went away before it was
// answered: each task is waiting again as it was before (its attempt not
// counted), unless something else changed it since.
func (b *Broker) giveBack(tasks []task.Task) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now().UnixNano()
	for _, t := range tasks {
		s, ok := b.tasks.get(t.JobID)
		if !ok || s.state() != task.Reserved {
			continue
		}
		rec, err := b.metaLocked(t.JobID)
		if err != nil || rec.Lease != t.Lease {
			continue
		}
		b.leases.Remove(t.JobID)
		b.unleaseLocked(t.JobID)
		rec.Attempts--
		rec.State = store.Waiting
		rec.Lease, rec.LeaseUntil, rec.Payload = "", 0, nil
		b.writeTaskLocked(store.UpdateTask, rec)
		b.placeLocked(t.JobID, s, b.queues[s.queue()], now, rec.Key)
	}
}
