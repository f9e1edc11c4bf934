package broker

import (
	"context"
	"maps"
	"slices"

	"github.com/hourglass-go/hourglass/task"
)

// Fairness between keys (issue 42). A queue's ready tasks are kept per
// key, each key's in its own heap in delivery order (readyHeap: priority,
// then due time, then job id), a lane; the lanes with ready tasks are in
// a second heap, ordered by the priority of their first task, then by
// their turn. A reserve takes the first task of the first lane and gives
// that lane the next turn of its queue, behind every other lane, so that
// among lanes whose first tasks have the same priority the keys take
// turns (round-robin), and a higher priority of any key still goes
// first. A lane new to the heap takes the next turn too: a key that puts
// one task waits for at most one task of each other key, whatever their
// backlogs.
//
// Example: key A has 3 ready tasks, then B and C one each, all of one
// priority. The lanes are A (turn 1), B (2), C (3). Reserves take A1 (A
// gets turn 4), B1 (B is empty and goes), C1, A2, A3.
//
// A queue whose tasks all have the key "" (every task put without one,
// and over beanstalkd's protocol) has one lane, kept in queueState
// itself, and its order is the one heap's, as before keys.
//
// Memory: a key costs a lane (its key, heap header, turn and place, 64
// bytes), a map entry, a slot of the lanes' heap (a laneRef, 24 bytes)
// and its heap's array,
// only while it has ready tasks (items in its heap); a key with none has
// no lane (TestLanes_Memory measures it). A delayed task of a key other
// than "" has its key in Broker.delayKeys until it falls due.

// keyLane is one key's ready tasks in a queue.
type keyLane struct {
	key  string
	heap readyHeap
	// turn orders lanes whose first tasks have the same priority: the
	// turn of the queue when the lane was last served or came in.
	turn uint64
	// pos is the lane's index in lanes.order; -1 while not in it.
	pos int
	// parked: the key is at its per-key concurrency, and the lane is
	// out of order while it keeps its items (perkey.go).
	parked bool
}

// lanes are a queue's ready tasks by key. Not safe for concurrent use:
// the broker's mutex guards them. push, first and served take
// O(log n + log k) for n ready tasks of the key and k keys with ready
// tasks.
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
	// priority of their first item, then turn (laneLess), each with a
	// copy of both, so that sifting reads this array alone rather than
	// two cache lines a lane (the lane, then its heap's array): with
	// 10,000 keys a serve sifts a lane down about 13 levels.
	order []laneRef
	// turn is the last turn given.
	turn uint64
	// parked counts the parked lanes (perkey.go).
	parked int
}

// laneRef is a lane's place in lanes.order: the lane, with the priority
// of its first item and its turn as they were when it was last placed
// (ref), which every change of either places again.
type laneRef struct {
	turn uint64
	prio uint32
	l    *keyLane
}

// ref returns l's laneRef, of its first item's priority and its turn.
// l has items.
func (l *keyLane) ref() laneRef {
	return laneRef{turn: l.turn, prio: l.heap[0].prio, l: l}
}

// laneLess orders lanes that have items.
func laneLess(a, b laneRef) bool {
	if a.prio != b.prio {
		return a.prio < b.prio
	}
	return a.turn < b.turn
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
		ls.turn++
		l.turn = ls.turn
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
// items.
func (ls *lanes) first() *keyLane {
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

// served gives l, whose first item a reserve took, the next turn.
func (ls *lanes) served(l *keyLane) {
	ls.turn++
	l.turn = ls.turn
	ls.changed(l)
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

// reset forgets every lane.
func (ls *lanes) reset() {
	*ls = lanes{}
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
