package queue

import (
	"math"
	"math/bits"
)

// wheel is a hierarchical timing wheel in the manner of Kafka's
// TimingWheel, laid out as tokio's and Linux's are: a stack of levels of
// 64 slots, each level's slot covering 64 of the slots below, and a bitmap
// per level of the slots that hold anything, so finding the next slot to
// visit is a few bit operations and no empty tick is ever processed. It is
// the default structure of [Queue] and [KeyQueue], and so of hourglass's
// Timer and Keyed.
//
// Time is counted in ticks. A node due at tick t (its deadline rounded up
// to a tick) is kept at the lowest level whose slot can tell it apart from
// the current tick e: the level of the highest 6-bit digit in which t and
// e differ, in the slot named by t's digit at that level. With a 1 ms
// tick:
//
//	level 0: 64 slots of 1 ms       covers 64 ms
//	level 1: 64 slots of 64 ms      covers 4.1 s
//	level 2: 64 slots of 4.1 s      covers 4.4 min
//	level 3: 64 slots of 4.4 min    covers 4.7 h
//	level 4: 64 slots of 4.7 h      covers 12.4 days
//	level 5: 64 slots of 12.4 days  covers 2.2 years
//	level 6 and 7 cover the rest of the uint64 nanosecond range
//
// When time reaches the start of a slot above level 0, the slot's nodes
// cascade: each is filed again against the new current tick and lands on
// a lower level (or fires, if its tick is that start). A level-0 slot's
// nodes all fire when time reaches it. Everything at a lower level is due
// before anything at a higher one, so the next slot to visit is the first
// occupied slot after the current one on the lowest non-empty level.
//
// Worked example, 1 ms tick, current tick 100 (digits 1|36): a node due
// at tick 130 (digits 2|2) differs in digit 1, so it goes to level 1 slot
// 2, which starts at tick 2·64 = 128. next reports 128; advance to 128
// cascades the slot, and against current tick 128 (digits 2|0) the node
// now differs only in digit 0, so it moves to level 0 slot 2 and fires at
// tick 130.
//
// A move to a later deadline touches only the node: it stays in the slot
// it was filed in, which is now early, and when that slot comes due the
// node is filed again at its new deadline, as tokio's and Linux's wheels
// do. A deadline pushed back on every event (a heartbeat, an idle
// timeout) is thus re-filed about once per timeout period instead of
// relinked per event; the cost is that next may report a slot that fires
// nothing. An earlier deadline relinks the node at once.
//
// Costs, for L levels (8 for a 1 ms tick, 10 for 1 µs): add, remove and
// move O(1), next O(L), advance O(L + k·L) for k nodes handled, since a
// node cascades at most once per level (in practice one or two times).
// Deadlines up to math.MaxUint64 nanoseconds are held exactly, with no
// clamp. Nodes fire at the first tick boundary at or after their
// deadline: never early, and at most one tick late.
type wheel[V any] struct {
	base[V] // lists: each level's 64 slots in turn (list l*64+s), then due and firing
	levels
	// mid holds, for each list that a slot being emptied (empty) has sent
	// nodes to, the node after which the next of them goes, where its gen
	// is gen: see restage. Made on the first slot emptied (4 KiB at a 1 ms
	// tick), so that a wheel that never fires has none.
	mid []midMark
	gen uint32
	// upTo is the tick an advance goes to: while release runs (active),
	// a node filed at or before it goes to the due list, for the next
	// advance, though slots up to it are still to be emptied.
	upTo uint64
}

// midMark is a list's place in wheel.mid: at is a node, -1 for the
// list's front, set while gen was the wheel's.
type midMark struct {
	at  int32
	gen uint32
}

func newWheel[V any](t *table[V], tick uint64) *wheel[V] {
	w := &wheel[V]{levels: newLevels(tick)}
	n := levelCount(w.maxTick)
	w.init(t, n*levelSize)
	w.occupied = w.occ[:n] // level l's slots are lists l*64 to l*64+63
	return w
}

const (
	levelBits = 6              // each level resolves 6 bits of the tick count
	levelSize = 1 << levelBits // 64 slots: one occupancy bit each in a uint64
	levelMask = levelSize - 1
)

// levels is a hierarchical wheel's geometry: the tick, the current tick,
// and for each level the bitmap of occupied slots.
type levels struct {
	tick    tickSize
	maxTick uint64 // the tick of the latest representable deadline
	elapsed uint64 // the current tick: every node due at or before it has fired
	// occupied has a word per level, bit s set when slot s holds nodes:
	// the wheel's base.occ: file sets a slot's bit, unlink clears it.
	occupied []uint64
}

// newLevels returns the geometry for tick, without the bitmaps.
func newLevels(tick uint64) levels {
	ts := newTickSize(tick)
	return levels{tick: ts, maxTick: ts.ceil(math.MaxUint64)}
}

// levelCount returns how many levels it takes to cover every tick up to
// maxTick.
func levelCount(maxTick uint64) int {
	return (bits.Len64(maxTick) + levelBits - 1) / levelBits
}

// place returns the level and slot for a node due at tick t, which must
// be after elapsed: the level of the highest 6-bit digit in which t and
// elapsed differ, and t's digit there.
func (v *levels) place(t uint64) (level int, slot uint64) {
	l := (bits.Len64((v.elapsed^t)|levelMask) - 1) / levelBits
	return l, (t >> (l * levelBits)) & levelMask
}

// nextSlot finds the slot to visit next: its level, its index and the
// tick at which it starts. ok is false if no slot is occupied. Every
// occupied slot of a level comes after the level's current slot, so the
// answer is the first occupied slot after the current one on the lowest
// non-empty level. It is O(levels).
func (v *levels) nextSlot() (lvl int, slot, start uint64, ok bool) {
	for l, occ := range v.occupied {
		if occ == 0 {
			continue
		}
		shift := uint(l * levelBits)
		cur := (v.elapsed >> shift) & levelMask
		after := occ &^ (uint64(2)<<cur - 1)
		s := uint64(bits.TrailingZeros64(after))
		// The start of slot s in the block of 64^(l+1) ticks that holds
		// elapsed. A shift of 64 or more yields 0 in Go, which clears the
		// whole tick count at the top level, as it should.
		block := v.elapsed &^ (uint64(1)<<(shift+levelBits) - 1)
		return l, s, block + s<<shift, true
	}
	return 0, 0, 0, false
}

// target returns the tick that advance to now reaches; now ==
// math.MaxUint64 reaches the end of time, so everything fires.
func (v *levels) target(now uint64) uint64 {
	if now == math.MaxUint64 {
		return v.maxTick
	}
	q, _ := v.tick.div(now)
	return q
}

// time returns the start of tick t on the caller's clock, saturating.
func (v *levels) time(t uint64) uint64 {
	if t > math.MaxUint64/v.tick.n {
		return math.MaxUint64
	}
	return t * v.tick.n
}

// file links queued node i into the slot for its deadline, or the due
// list if its tick has been reached.
func (w *wheel[V]) file(i int32, n *node[V]) {
	id := w.dueList()
	if t := w.tick.ceil(n.when); t > w.elapsed && !(w.active && t <= w.upTo) {
		l, s := w.place(t)
		w.occupied[l] |= 1 << s
		id = int32(l*levelSize + int(s))
	}
	w.link(id, i, n)
}

func (w *wheel[V]) add(i int32, n *node[V]) {
	w.len++
	w.file(i, n)
}

func (w *wheel[V]) remove(i int32, n *node[V]) {
	w.unlink(i, n)
	w.len--
}

// move records a later deadline, which advance files when the node's list
// comes due, wherever it is (a slot, the due list, the firing list), and
// relinks the node at once for an earlier one, which may belong to an
// earlier slot.
func (w *wheel[V]) move(i int32, n *node[V], when uint64) {
	if when >= n.when {
		n.when = when
		return
	}
	w.unlink(i, n)
	n.when = when
	w.file(i, n)
}

// next reports the start of the next occupied slot, or the structure's
// time if nodes are due. It is O(L).
func (w *wheel[V]) next() (uint64, bool) {
	if w.pendingDue() {
		return w.now, true
	}
	_, _, start, ok := w.nextSlot()
	if !ok {
		return 0, false
	}
	return w.time(start), true
}

// advance stages every node whose tick has been reached, filing again
// those whose deadline was moved later, and hands the staged ones to
// release. A node still staged when release moves it later is filed
// again instead.
func (w *wheel[V]) advance(now uint64, release func(i int32, n *node[V])) {
	w.begin(now)
	target := w.target(w.now)
	due, firing := &w.lists[w.dueList()], &w.lists[w.firingList()]
	for due.head != 0 {
		i := due.head - 1
		n := w.node(i)
		w.unlink(i, n)
		w.stageOrFile(i, n, w.elapsed)
	}
	w.upTo = max(w.elapsed, target)
	for w.len > 0 {
		l, s, start, ok := w.nextSlot()
		if !ok || start > target {
			break
		}
		w.elapsed = start
		w.empty(int32(l*levelSize+int(s)), start)
		// Each slot's nodes fire as soon as it is emptied, while they are
		// still in the caches: a driver behind by many ticks empties more
		// than its core's cache holds. The order is the same, the firing
		// list's.
		if firing.head != 0 {
			w.fire(release)
		}
	}
	w.elapsed = max(w.elapsed, target)
	w.fire(release)
}

// fire hands the firing list to release, in order, filing again each
// node that release moved past the advance's target.
func (w *wheel[V]) fire(release func(i int32, n *node[V])) {
	w.active = true
	defer func() { w.active = false }()
	firing := &w.lists[w.firingList()]
	for firing.head != 0 {
		i := firing.head - 1
		n := w.node(i)
		w.unlink(i, n)
		if w.tick.ceil(n.when) > w.upTo {
			w.file(i, n) // moved later by release
			continue
		}
		w.len--
		release(i, n)
	}
}

// stageOrFile appends unlinked node i to the firing list if its tick is at
// or before t, and files it again otherwise.
func (w *wheel[V]) stageOrFile(i int32, n *node[V], t uint64) {
	if w.tick.ceil(n.when) > t {
		w.file(i, n)
	} else {
		w.link(w.firingList(), i, n)
	}
}

// empty takes every node out of list id, the slot that time has
// reached at tick t, and stages or files each again (stageOrFile), each
// list it sends nodes to getting them in the order they were in. It
// walks the list from both ends at once: a node's links are read from
// the node, which was filed long before and is out of the caches, and
// the next node's place is known only once that read is done, so a walk
// from one end waits for one cache miss after another; two walks wait
// for two at a time. That wait is most of the driver's work per timeout
// through a burst (the queue's Burst benchmarks). O(nodes).
func (w *wheel[V]) empty(id int32, t uint64) {
	l := w.lists[id]
	w.lists[id] = ilist{}
	w.occ[id>>6] &^= 1 << (id & 63)
	if w.mid == nil {
		w.mid = make([]midMark, len(w.lists))
	}
	if w.gen++; w.gen == 0 {
		clear(w.mid)
		w.gen = 1
	}
	f, b := l.head, l.tail // the front walk's next node and the back's, plus one
	for f != 0 {
		fi := f - 1
		fn := w.node(fi)
		if f == b {
			w.restage(fi, fn, t, true)
			return
		}
		bi := b - 1
		bn := w.node(bi)
		fnext, bprev := fn.next, bn.prev
		w.restage(fi, fn, t, true)
		w.restage(bi, bn, t, false)
		if fnext == b {
			return
		}
		f, b = fnext, bprev
	}
}

// restage is stageOrFile for empty: node i, out of its list, goes to
// the firing list if its tick is at or before t, and is filed again
// otherwise, in the list it goes to after the nodes that empty's front
// walk has sent there (front) or before those its back walk has (not
// front): so that each list gets them in their order in the list empty
// takes them from, after those it held.
func (w *wheel[V]) restage(i int32, n *node[V], t uint64, front bool) {
	dest := w.firingList()
	if tk := w.tick.ceil(n.when); tk > t {
		l, s := w.place(tk)
		w.occupied[l] |= 1 << s
		dest = int32(l*levelSize + int(s))
	}
	m := &w.mid[dest]
	at := w.lists[dest].tail - 1 // -1: the front of an empty list
	if m.gen == w.gen {
		at = m.at
	}
	w.linkAfter(dest, at, i, n)
	switch {
	case front:
		*m = midMark{i, w.gen}
	case m.gen != w.gen:
		*m = midMark{at, w.gen}
	}
}

// drain is O(n + L·64), with no cascading: the way to empty a wheel of
// millions of nodes at shutdown.
func (w *wheel[V]) drain(fn func(i int32, n *node[V])) {
	w.drainLists(fn)
}
