package broker

import "github.com/hourglass-go/hourglass/task"

// Limits per key (issue 42, task.Policy's PerKey) on the embedded
// engine. A queue counts its reserved tasks by key (queueState.held): a
// task counts from the take that reserves it (or ReserveJob, or a
// recovered lease) until its reservation ends (unlease, or unplace of a
// task still being taken). A key is in the count only while it has
// reserved tasks: an idle key costs nothing.
//
// A key with as many tasks reserved as the policy's
// per_key.concurrency has its lane (fair.go) parked: out of the lanes'
// heap, so that a reserve passes to the next key in O(log k) rather than
// finding the full key first each time. Its ready tasks stay in its lane
// (puts go on into it); the lane comes back, at its key's place after
// the cursor (fair.go), when one of the key's reservations ends (unhold)
// or the policy changes (reparkAllLocked), and a waiting reserver is
// woken.
//
// Example: per_key.concurrency 2, key A with 10 ready tasks, B with 10,
// a reserve of max 10: A1, B1 (the round), then the fill in delivery
// order: A2 (A holds 2: parked), B2 (parked), and nothing else is ready:
// 4 tasks. An ack of A1 unparks A; the next reserve takes A3.
//
// The counts and parked lanes live in memory only: a restart counts the
// recovered leases again.

// holdLocked counts a task of key reserved in q. b.mu must be held.
func (q *queueState) holdLocked(key string) {
	if key == "" {
		q.heldPlain++
		return
	}
	if q.held == nil {
		q.held = make(map[string]int)
	}
	q.held[key]++
}

// heldOfLocked returns how many tasks of key q has reserved. b.mu must be
// held.
func (q *queueState) heldOfLocked(key string) int {
	if key == "" {
		return q.heldPlain
	}
	return q.held[key]
}

// keyFullLocked reports whether key has as many tasks reserved in q as its
// per-key concurrency allows. b.mu must be held.
func (q *queueState) keyFullLocked(key string) bool {
	k := q.policy.PerKey
	return k != nil && k.Concurrency > 0 && q.heldOfLocked(key) >= k.Concurrency
}

// unholdLocked ends the count of one reserved task of key in q; a key left
// with none is forgotten, and a parked lane of a key no longer full comes
// back, waking one waiter. b.mu must be held. O(log k) for k lanes.
func (q *queueState) unholdLocked(key string) {
	if key == "" {
		if q.heldPlain > 0 {
			q.heldPlain--
		}
	} else if n, ok := q.held[key]; ok {
		if n <= 1 {
			delete(q.held, key)
			if len(q.held) == 0 {
				q.held = nil // give back the map of a burst of keys
			}
		} else {
			q.held[key] = n - 1
		}
	}
	if q.ready.parked > 0 && !q.keyFullLocked(key) && !q.rateSpentKeyLocked(key) {
		if l := q.ready.lane(key); l != nil && l.parked {
			q.ready.unpark(l)
			q.waiters.Wake(1)
		}
	}
}

// unleaseLocked ends job's lease record in b.leased and its count by key.
// b.mu must be held.
func (b *Broker) unleaseLocked(job uint64) {
	rec, ok := b.leased[job]
	if !ok {
		return
	}
	delete(b.leased, job)
	if q := b.byName[rec.Queue]; q != nil {
		q.unholdLocked(rec.Key)
	}
}

// reparkAllLocked brings back q's parked lanes whose keys are no longer
// full nor waiting for a token of their rate (keyrate.go): after a change
// of policy. b.mu must be held. O(k log k).
func (q *queueState) reparkAllLocked() {
	if q.ready.parked == 0 {
		return
	}
	var back []*keyLane
	q.ready.eachLane(func(l *keyLane) {
		if l.parked && !q.keyFullLocked(l.key) && !q.rateSpentKeyLocked(l.key) {
			back = append(back, l)
		}
	})
	for _, l := range back {
		q.ready.unpark(l)
	}
}

// lane returns key's lane, nil when the key has none.
func (ls *lanes) lane(key string) *keyLane {
	if key == "" {
		return &ls.plain
	}
	return ls.byKey[key]
}

// park takes l, in the heap, out of it, keeping its items.
func (ls *lanes) park(l *keyLane) {
	i, n := l.pos, len(ls.order)-1
	if i != n {
		ls.order[i] = ls.order[n]
		ls.order[i].l.pos = i
	}
	ls.order[n] = laneRef{}
	ls.order = ls.order[:n]
	if i != n {
		ls.down(i)
		ls.up(i)
	}
	l.pos = -1
	l.parked = true
	ls.parked++
}

// unpark puts the parked lane l back in the heap, at its key's next
// place after the cursor, or forgets it if it has no items left.
func (ls *lanes) unpark(l *keyLane) {
	l.parked = false
	ls.parked--
	if len(l.heap) == 0 {
		l.pos = len(ls.order)
		ls.order = append(ls.order, laneRef{l: l})
		ls.remove(l)
		return
	}
	ls.place(l)
	l.pos = len(ls.order)
	ls.order = append(ls.order, l.ref())
	ls.up(l.pos)
}

// eachLane calls f with every lane that has items, parked or not.
func (ls *lanes) eachLane(f func(*keyLane)) {
	for _, r := range ls.order {
		f(r.l)
	}
	if ls.plain.parked {
		f(&ls.plain)
	}
	for _, l := range ls.byKey {
		if l.parked {
			f(l)
		}
	}
}

// rateSpentLocked reports whether q's rate limit has no token now, without
// taking one. b.mu must be held.
func (b *Broker) rateSpentLocked(q *queueState) bool {
	r := q.policy.Rate
	if r == nil {
		return false
	}
	probe := q.bucket
	took, _ := probe.Take(*r, b.monoNow(), 1)
	return took == 0
}

// peekFirstLocked returns q's first ready task in delivery order (priority,
// then due time, then job id, which is put order) across every key,
// parked lanes too, ignoring the rounds: beanstalkd's peek-ready, the job
// its reserve would get next in a queue whose tasks have no key (all of
// beanstalkd's), and the cluster's answer (cluster/jobs.go's
// sqlPeekReady), which both engines give cheaply whatever the rounds.
// It drops the stale first items of the lanes. b.mu must be held. O(k + s
// log n) for k keys with ready tasks and s stale items dropped.
func (b *Broker) peekFirstLocked(q *queueState) (readyItem, bool) {
	live := func(it readyItem) bool {
		s, ok := b.tasks.get(it.job)
		return ok && s.state() == task.Ready && s.queue() == q.index && s.due == it.due && s.prio == it.prio
	}
	var stale []*keyLane
	q.ready.eachLane(func(l *keyLane) {
		if len(l.heap) > 0 && !live(l.heap[0]) {
			stale = append(stale, l)
		}
	})
	for _, l := range stale {
		for len(l.heap) > 0 && !live(l.heap[0]) {
			l.heap.pop()
		}
		if !l.parked {
			q.ready.changed(l) // out of order when empty
		}
	}
	var first readyItem
	found := false
	q.ready.eachLane(func(l *keyLane) {
		if len(l.heap) > 0 && (!found || l.heap[0].less(first)) {
			first, found = l.heap[0], true
		}
	})
	return first, found
}
