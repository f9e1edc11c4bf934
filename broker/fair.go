package broker

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// Fairness between keys (issue 42), in the order of service.KeyCompare
// (issue 41). A queue's ready tasks are kept per key, each key's in its
// own heap in delivery order (readyHeap: priority, then due time, then
// job id), a lane; the lanes with ready tasks are in a second heap,
// ordered by the priority of their first task, then by their place in
// the round across keys: a round number, then the key in the order of
// service.KeyCompare (names, "" last). The queue's cursor is the round
// and key last served; a lane's place is the next time its key comes
// after the cursor: this round if service.KeyAfter, else the next. A
// reserve takes the first task of the first lane, moves the cursor to it
// and gives that lane the next round, so that among lanes whose first
// tasks have the same priority the keys are served once a round in the
// order of their names, and a higher priority of any key still goes
// first. A lane that comes in (a key with no ready task has no lane) or
// comes back from being parked is placed by its key against the cursor.
// A lane that the cursor passed while its first task's priority was
// lower keeps a place behind the cursor (stale): first places it again
// when it reaches the top, O(log k) once for each time the cursor passed
// it.
//
// takeLocked (reserve.go) serves each key at most once a reserve (the
// round) and fills the rest of a reserve in delivery order across the
// lanes (fill), as service.KeyCompare's rule says.
//
// Example: keys c, "", a, b put in that order, three tasks each, all of
// one priority. The lanes are a, b, c, "" (round 1); reserves of one
// take a1 (a goes to round 2), b1, c1, ""1, a2, ...
//
// A queue whose tasks all have the key "" (every task put without one,
// and over beanstalkd's protocol) has one lane, kept in queueState
// itself, and its order is the one heap's, as before keys.
//
// Memory: a key costs a lane (its key, heap header, round and place, 64
// bytes), a map entry, a slot of the lanes' heap (a laneRef, 40 bytes)
// and its heap's array,
// only while it has ready tasks (items in its heap); a key with none has
// no lane (TestLanes_Memory measures it). A delayed task of a key other
// than "" has its key in Broker.delayKeys until it falls due.

// keyLane is one key's ready tasks in a queue.
type keyLane struct {
	key  string
	heap readyHeap
	// round is the round of the lane's place (laneLess): the lane comes
	// after the cursor when (round, key) is after (lanes.round,
	// lanes.cursor).
	round uint64
	// pos is the lane's index in lanes.order; -1 while not in it.
	pos int
	// parked: the key is at its per-key concurrency, and the lane is
	// out of order while it keeps its items (perkey.go).
	parked bool
}

// lanes are a queue's ready tasks by key. Not safe for concurrent use:
// the broker's mutex guards them. push, first and served take
// O(log n + log k) for n ready tasks of the key and k keys with ready
// tasks (first amortised: see stale places above), each comparison of
// keys O(len).
type lanes struct {
	// plain is the lane of the key "".
	plain keyLane
	// byKey holds the lanes of the other keys that have items. A map
	// does not shrink as entries go, so it is made again when it holds
	// under a quarter of the most it held since it was made (peak), and
	// dropped when empty: O(1) amortised a lane.
	byKey map[string]*keyLane
	peak  int
	// order is a binary min-heap of the lanes that have items, by the
	// priority of their first item, then round, then key (laneLess),
	// each with a copy of the three, so that sifting reads this array
	// alone rather than two cache lines a lane (the lane, then its
	// heap's array): with 10,000 keys a serve sifts a lane down about
	// 13 levels.
	order []laneRef
	// round and cursor are the place of the last key served: round 0
	// and "" before any (the end of round 0, so that round 1 starts at
	// the first key).
	round  uint64
	cursor string
	// parked counts the parked lanes (perkey.go).
	parked int
}

// laneRef is a lane's place in lanes.order: the lane, with the priority
// of its first item, its round and its key as they were when it was last
// placed (ref), which every change of either places again.
type laneRef struct {
	round uint64
	prio  uint32
	key   string
	l     *keyLane
}

// ref returns l's laneRef, of its first item's priority and its place.
// l has items.
func (l *keyLane) ref() laneRef {
	return laneRef{round: l.round, prio: l.heap[0].prio, key: l.key, l: l}
}

// laneLess orders lanes that have items.
func laneLess(a, b laneRef) bool {
	if a.prio != b.prio {
		return a.prio < b.prio
	}
	if a.round != b.round {
		return a.round < b.round
	}
	return service.KeyLess(a.key, b.key)
}

// behind reports whether r's place is at or before the cursor: stale,
// to be placed again (place).
func (ls *lanes) behind(r laneRef) bool {
	return r.round < ls.round || r.round == ls.round && !service.KeyAfter(r.key, ls.cursor)
}

// place gives l the next place of its key after the cursor.
func (ls *lanes) place(l *keyLane) {
	l.round = ls.round
	if !service.KeyAfter(l.key, ls.cursor) {
		l.round++
	}
}

// push adds it, a ready task of key, to its lane, bringing the lane in
// if it was out.
func (ls *lanes) push(key string, it readyItem) {
	l := &ls.plain
	if key != "" {
		l = ls.byKey[key]
		if l == nil {
			if ls.byKey == nil {
				ls.byKey = make(map[string]*keyLane)
			}
			l = &keyLane{key: key, pos: -1}
			ls.byKey[key] = l
			ls.peak = max(ls.peak, len(ls.byKey))
		}
	}
	if l.parked {
		l.heap.push(it) // back in order when its key is not full
		return
	}
	if len(l.heap) == 0 {
		l.pos = -1
	}
	l.heap.push(it)
	if l.pos < 0 {
		ls.place(l)
		l.pos = len(ls.order)
		ls.order = append(ls.order, l.ref())
		ls.up(l.pos)
	} else if l.heap[0].job == it.job {
		ls.order[l.pos].prio = l.heap[0].prio
		ls.up(l.pos) // its first task's priority may be higher now
	}
}

// first returns the lane to serve next (nil: none), whose first item may
// be stale: the caller checks it, and calls changed after popping stale
// items. It places again the lanes at the top whose places the cursor
// passed.
func (ls *lanes) first() *keyLane {
	for len(ls.order) > 0 && ls.behind(ls.order[0]) {
		l := ls.order[0].l
		ls.place(l)
		ls.order[0] = l.ref()
		ls.down(0)
	}
	if len(ls.order) == 0 {
		return nil
	}
	return ls.order[0].l
}

// changed puts l, whose first items were popped, back in its place: out
// when empty.
func (ls *lanes) changed(l *keyLane) {
	if len(l.heap) == 0 {
		ls.remove(l)
		return
	}
	ls.order[l.pos] = l.ref()
	ls.down(l.pos)
}

// served moves the cursor to l, whose first item a reserve took (l was
// first), and gives l the next round.
func (ls *lanes) served(l *keyLane) {
	ls.round, ls.cursor = l.round, l.key
	l.round++
	ls.changed(l)
}

// keyed reports whether the queue has lanes of keys other than "":
// then a reserve serves it in rounds (takeLocked).
func (ls *lanes) keyed() bool {
	return len(ls.byKey) > 0
}

// remove takes the empty lane l out of order, and forgets it unless it
// is the plain lane.
func (ls *lanes) remove(l *keyLane) {
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
	l.heap = nil // give back its array
	if l != &ls.plain {
		delete(ls.byKey, l.key)
		switch n := len(ls.byKey); {
		case n == 0:
			ls.byKey, ls.peak = nil, 0
		case ls.peak > 1024 && n < ls.peak/4:
			m := make(map[string]*keyLane, n) // maps.Clone keeps the size
			maps.Copy(m, ls.byKey)
			ls.byKey, ls.peak = m, n
		}
	}
	if cap(ls.order) > 1024 && len(ls.order) < cap(ls.order)/4 {
		ls.order = slices.Clone(ls.order) // give back a drained burst
	}
}

// each calls f with every item of every lane, parked ones too, stale
// ones included.
func (ls *lanes) each(f func(readyItem)) {
	ls.eachLane(func(l *keyLane) {
		for _, it := range l.heap {
			f(it)
		}
	})
}

// reset forgets every lane, keeping the cursor.
func (ls *lanes) reset() {
	*ls = lanes{round: ls.round, cursor: ls.cursor}
}

func (ls *lanes) up(i int) {
	o := ls.order
	for i > 0 {
		p := (i - 1) / 2
		if !laneLess(o[i], o[p]) {
			break
		}
		o[i], o[p] = o[p], o[i]
		o[i].l.pos, o[p].l.pos = i, p
		i = p
	}
}

func (ls *lanes) down(i int) {
	o := ls.order
	n := len(o)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && laneLess(o[r], o[l]) {
			m = r
		}
		if !laneLess(o[m], o[i]) {
			return
		}
		o[i], o[m] = o[m], o[i]
		o[i].l.pos, o[m].l.pos = i, m
		i = m
	}
}

// KeyCounts counts the ready, reserved and delayed tasks of queue by key
// (service.Engine). It takes O(r + l + d) under the broker's lock for the
// r ready items of the queue, the l tasks reserved and the d delayed
// tasks with a key, across queues.
func (b *Broker) KeyCounts(ctx context.Context, queue string) ([]task.KeyCount, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.usableLocked(); err != nil {
		return nil, err
	}
	q := b.byName[queue]
	if q == nil {
		return nil, nil
	}
	counts := map[string]*task.KeyCount{}
	of := func(key string) *task.KeyCount {
		c := counts[key]
		if c == nil {
			c = &task.KeyCount{Key: key}
			counts[key] = c
		}
		return c
	}
	current := func(it readyItem) bool {
		s, ok := b.tasks.get(it.job)
		return ok && s.state() == task.Ready && s.queue() == q.index && s.due == it.due && s.prio == it.prio
	}
	ready := 0
	q.ready.eachLane(func(l *keyLane) {
		for _, it := range l.heap {
			if current(it) {
				of(l.key).Ready++
				ready++
			}
		}
	})
	if ready > q.readyN {
		// A task with two items of the same due time and priority (made
		// ready again as it was): count each task once.
		seen := map[uint64]bool{}
		for _, c := range counts {
			c.Ready = 0
		}
		q.ready.eachLane(func(l *keyLane) {
			for _, it := range l.heap {
				if !seen[it.job] && current(it) {
					seen[it.job] = true
					of(l.key).Ready++
				}
			}
		})
	}
	for _, rec := range b.leased {
		if rec.Queue == queue {
			of(rec.Key).Reserved++
		}
	}
	keyed := 0
	for job, key := range b.delayKeys {
		if s, ok := b.tasks.get(job); ok && s.state() == task.Delayed && s.queue() == q.index {
			of(key).Delayed++
			keyed++
		}
	}
	if n := q.delayed - keyed; n > 0 {
		of("").Delayed += n
	}
	out := make([]task.KeyCount, 0, len(counts))
	for _, c := range counts {
		if c.Total() > 0 {
			out = append(out, *c)
		}
	}
	return out, nil
}

// keptCursors keeps the cursors (lanes.cursor) of the queues the broker
// dropped while they held nothing (dropLocked), for keptCursorAge, so
// that a queue that drains and fills again within it goes on with its
// round where it was, as a cluster node's cursor row outlives its
// queue's tasks (it is pruned a round after the turn rows of the queue's
// last keys, which live a minute unwritten: cluster/prune.go). At most
// maxKeptCursors are kept, the oldest dropped going first: a cursor costs
// its entries (about 100 bytes) and its names' bytes. A cursor at the
// key "" is not kept: the next round starts at the first key either way.
// A restart forgets them. Not safe for concurrent use: the broker's
// mutex guards it. keep and take are O(1) amortised.
type keptCursors struct {
	m map[string]keptCursor
	// fifo holds the names kept, oldest first, with when they were
	// kept; an entry whose name was taken or kept again since is
	// skipped.
	fifo []keptCursor
}

// keptCursor is a kept cursor: its queue's name, key, and when it was
// kept (Broker.monoNow).
type keptCursor struct {
	name, key string
	at        int64
}

const (
	// keptCursorAge is how long a dropped queue's cursor is kept.
	keptCursorAge = time.Minute
	// maxKeptCursors bounds the cursors kept.
	maxKeptCursors = 10_000
)

// keep keeps cursor, the cursor of the queue name dropped at now.
func (k *keptCursors) keep(name, cursor string, now int64) {
	k.expire(now)
	if cursor == "" {
		delete(k.m, name)
		return
	}
	if k.m == nil {
		k.m = make(map[string]keptCursor)
	}
	c := keptCursor{name: name, key: cursor, at: now}
	k.m[name] = c
	k.fifo = append(k.fifo, c)
	for len(k.fifo) > maxKeptCursors {
		k.popFront()
	}
}

// take returns the cursor kept for the queue name, "" if none, and
// forgets it.
func (k *keptCursors) take(name string, now int64) string {
	if len(k.m) == 0 {
		return ""
	}
	k.expire(now)
	c, ok := k.m[name]
	if !ok {
		return ""
	}
	delete(k.m, name)
	return c.key
}

// expire forgets the cursors kept longer than keptCursorAge.
func (k *keptCursors) expire(now int64) {
	for len(k.fifo) > 0 && now-k.fifo[0].at > int64(keptCursorAge) {
		k.popFront()
	}
}

// popFront forgets the oldest entry of fifo, and its cursor unless it was
// kept again since.
func (k *keptCursors) popFront() {
	f := k.fifo[0]
	k.fifo[0] = keptCursor{}
	k.fifo = k.fifo[1:]
	if c, ok := k.m[f.name]; ok && c.at == f.at {
		delete(k.m, f.name)
	}
	if len(k.fifo) == 0 {
		k.fifo = nil // give back a burst's array
	}
	if len(k.m) == 0 {
		k.m = nil
	}
}
