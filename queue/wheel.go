package queue

import (
	"math"
	"math/bits"
)

// wheel is a hierarchical timing wheel in the manner of Kafka's
// TimingWheel, laid out as tokio's and Linux's are: a stack of levels,
// each level's slot covering a whole turn of the level below, and a
// bitmap of the slots that hold anything, so finding the next slot to
// visit is a few bit operations and no empty tick is ever processed. It
// is the default structure of [Queue] and [KeyQueue], and so of
// hourglass's Timer and Keyed.
//
// Time is counted in ticks, and a tick count is read as digits: 10 bits
// for level 0, then 6 bits a level. A node due at tick t (its deadline
// rounded up to a tick) is kept at the lowest level whose slot can tell
// it apart from the current tick e: the level of the highest digit in
// which t and e differ, in the slot named by t's digit at that level.
// With a 1 ms tick:
//
//	level 0: 1,024 slots of 1 ms    covers 1.02 s
//	level 1: 64 slots of 1.02 s     covers 65.5 s
//	level 2: 64 slots of 65.5 s     covers 69.9 min
//	level 3: 64 slots of 69.9 min   covers 74.6 h
//	level 4: 64 slots of 74.6 h     covers 199 days
//	level 5: 64 slots of 199 days   covers 34.9 years
//	level 6 covers the rest of the uint64 nanosecond range
//
// When time reaches the start of a slot above level 0, the slot's nodes
// cascade: each is filed again against the new current tick and lands on
// a lower level (or fires, if its tick is that start). A level-0 slot's
// nodes all fire when time reaches it: its list is taken whole and fired
// in order, each node read once, while a second walk reads the list from
// its other end (fireSlot). Everything at a lower level is due before
// anything at a higher one, so the next slot to visit is the first
// occupied slot after the current one on the lowest non-empty level.
//
// Level 0 is wider than the rest because a cascade reads every node of
// its slot, a cache miss a node once the slot outgrows the core's
// caches, and so does firing: a node filed straight into level 0 costs
// one miss, one that cascades two. With 1,024 slots, a node due within a
// few hundred ticks lands in level 0 most of the time (a burst due
// within 200 ms, 90 % of its nodes on average, against 16 % with 64).
//
// Worked example, 1 ms tick, current tick 1,000 (digits 0|1000): a node
// due at tick 1,010 (0|1010) differs only in digit 0, so it goes straight
// to level 0 slot 1,010. A node due at tick 1,030 (1|6) differs in digit
// 1, so it goes to level 1 slot 1, which starts at tick 1·1,024 = 1,024.
// next reports 1,010, where advance fires slot 1,010 whole, then 1,024;
// advance to 1,024 cascades the slot, and against current tick 1,024
// (1|0) the node now differs only in digit 0, so it moves to level 0
// slot 6 and fires at tick 1,030.
//
// A move to a later deadline touches only the node: it stays in the slot
// it was filed in, which is now early, and when that slot comes due the
// node is filed again at its new deadline, as tokio's and Linux's wheels
// do. A deadline pushed back on every event (a heartbeat, an idle
// timeout) is thus re-filed about once per timeout period instead of
// relinked per event; the cost is that next may report a slot that fires
// nothing. An earlier deadline relinks the node at once.
//
// Costs, for L levels (7 for a 1 ms tick, 9 for 1 µs): add, remove and
// move O(1), next O(L + 16) (level 0's 16 words of bitmap), advance
// O(L + 16 + k·L) for k nodes handled, since a node cascades at most
// once per level (in practice zero to two times). Deadlines up to
// math.MaxUint64 nanoseconds are held exactly, with no clamp. Nodes fire
// at the first tick boundary at or after their deadline: never early,
// and at most one tick late.
type wheel[V any] struct {
	base[V] // lists: each level's 64 slots in turn (list l*64+s), then due and firing
	levels
	// mid holds, for each list that a slot being emptied (empty) has sent
	// nodes to, the node after which the next of them goes, where its gen
	// is gen: see restage. Made on the first slot emptied (11 KiB at a
	// 1 ms tick), so that a wheel that never cascades has none.
	mid []midMark
	gen uint32
	// fixed is set by a Queue, whose nodes never move in the table, which
	// never shrinks: a level-0 slot then fires whole (fireSlot), whose
	// second walk may read any node a link once named. A KeyQueue's
	// nodes move as its tables rebuild, and its slots go through the
	// firing list (empty).
	fixed bool
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
	n := slotCount(levelCount(w.maxTick))
	w.init(t, n)
	w.occupied = w.occ[:n/64] // bit id%64 of word id/64: list id
	return w
}

const (
	levelBits = 6              // each level above 0 resolves 6 bits of the tick count
	levelSize = 1 << levelBits // 64 slots: one occupancy bit each in a uint64
	levelMask = levelSize - 1
	// Level 0 resolves 10 bits: 1,024 slots, 16 words of occupancy. A
	// node due within the current block of 1,024 ticks is filed straight
	// into its firing slot and never cascades: each cascade reads every
	// node of a slot, a cache miss a node once the slot outgrows the
	// caches, so through a burst a node due a few hundred ticks ahead
	// costs one miss (its firing) instead of two.
	level0Bits  = 10
	level0Size  = 1 << level0Bits
	level0Mask  = level0Size - 1
	level0Words = level0Size / 64
)

// levelShift returns the bit at which level l's digit of a tick starts.
func levelShift(l int) uint {
	if l == 0 {
		return 0
	}
	return uint(level0Bits + (l-1)*levelBits)
}

// levelOf returns the level and slot of list id, one of a wheel's slots:
// level 0's slots are lists 0 to 1,023, level l's (l ≥ 1) the 64 lists
// from 1,024 + (l−1)·64, so each level above 0 has one word of occupancy.
func levelOf(id int) (level int, slot uint64) {
	if id < level0Size {
		return 0, uint64(id)
	}
	id -= level0Size
	return 1 + id/levelSize, uint64(id % levelSize)
}

// levels is a hierarchical wheel's geometry: the tick, the current tick,
// and the bitmap of occupied slots.
type levels struct {
	tick    tickSize
	maxTick uint64 // the tick of the latest representable deadline
	elapsed uint64 // the current tick: every node due at or before it has fired
	// occupied has a bit per slot, bit id%64 of word id/64 set when list
	// id holds nodes: level 0's 16 words, then a word per level above.
	// It is the wheel's base.occ: file sets a slot's bit, unlink clears
	// it.
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
	b := bits.Len64(maxTick)
	if b <= level0Bits {
		return 1
	}
	return 1 + (b-level0Bits+levelBits-1)/levelBits
}

// slotCount returns the number of slots, and so of lists, of n levels.
func slotCount(n int) int { return level0Size + (n-1)*levelSize }

// place returns the list for a node due at tick t, which must be after
// elapsed: the slot, at the level of the highest digit in which t and
// elapsed differ, named by t's digit there.
func (v *levels) place(t uint64) int32 {
	x := v.elapsed ^ t
	if x <= level0Mask {
		return int32(t & level0Mask)
	}
	l := 1 + (bits.Len64(x)-1-level0Bits)/levelBits
	s := (t >> levelShift(l)) & levelMask
	return int32(level0Size + (l-1)*levelSize + int(s))
}

// nextSlot finds the slot to visit next: its list and the tick at which
// it starts. ok is false if no slot is occupied. Every occupied slot of
// a level comes after the level's current slot, so the answer is the
// first occupied slot after the current one on the lowest non-empty
// level. It is O(levels + 16).
func (v *levels) nextSlot() (id int32, start uint64, ok bool) {
	cur := v.elapsed & level0Mask
	for k := int(cur / 64); k < level0Words; k++ {
		occ := v.occupied[k]
		if k == int(cur/64) {
			occ &^= uint64(2)<<(cur%64) - 1
		}
		if occ != 0 {
			s := uint64(k*64 + bits.TrailingZeros64(occ))
			return int32(s), v.elapsed&^level0Mask | s, true
		}
	}
	for l, occ := range v.occupied[level0Words:] {
		if occ == 0 {
			continue
		}
		shift := levelShift(l + 1)
		cur := (v.elapsed >> shift) & levelMask
		after := occ &^ (uint64(2)<<cur - 1)
		s := uint64(bits.TrailingZeros64(after))
		// The start of slot s in the block of ticks that holds elapsed.
		// A shift of 64 or more yields 0 in Go, which clears the whole
		// tick count at the top level, as it should.
		block := v.elapsed &^ (uint64(1)<<(shift+levelBits) - 1)
		return int32(level0Size + l*levelSize + int(s)), block + s<<shift, true
	}
	return 0, 0, false
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
		id = w.place(t)
		w.occupied[id>>6] |= 1 << (id & 63)
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
	_, start, ok := w.nextSlot()
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
	if firing.head != 0 {
		w.fire(release) // due before any slot's nodes
	}
	for w.len > 0 {
		id, start, ok := w.nextSlot()
		if !ok || start > target {
			break
		}
		w.elapsed = start
		if id < level0Size && w.fixed {
			w.fireSlot(id, release)
			continue
		}
		w.empty(id, start)
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

// fireSlot fires level-0 slot id, the slot of the current tick, whole:
// its nodes are all due but for those moved later, which it files
// again. The slot's list becomes the firing list in O(1) (the firing
// list is empty here), and its nodes are handed to release in their
// order, each read once, where emptying the slot into the firing list
// and then firing that read each twice and relinked it.
//
// A node's links are read from the node, which was filed long before
// and is out of the caches, and the next node's place is known only
// once that read is done: a walk from one end waits for one cache miss
// after another. So, as the firing walk goes from the front, a second
// walk reads the nodes from the back, one a node fired, until the two
// meet: two misses are waited for at a time, and the firing walk finds
// the back half in the caches. The second walk only reads, so what
// release does meanwhile (a Remove takes a node out before it fires)
// cannot lead it astray: a node it lands on that is no longer linked
// ends it, and one linked elsewhere costs a read. The list stays whole
// while release runs, so a panic in release leaves the rest in the
// firing list for the next Advance. O(nodes).
func (w *wheel[V]) fireSlot(id int32, release func(i int32, n *node[V])) {
	fid := w.firingList()
	l := w.lists[id]
	w.lists[id] = ilist{}
	w.occ[id>>6] &^= 1 << (id & 63)
	w.lists[fid] = l
	ref := listRef(fid)
	w.node(l.head - 1).prev = ref
	w.node(l.tail - 1).next = ref
	w.active = true
	defer func() { w.active = false }()
	firing := &w.lists[fid]
	back := l.tail // the back walk's node, plus one; 0 once it is done
	for firing.head != 0 {
		f := firing.head
		if back != 0 {
			if back != f {
				back = max(w.node(back-1).prev, 0)
			}
			if back == f {
				back = 0 // met
			}
		}
		w.fireNode(f-1, w.node(f-1), release)
	}
}

// fireNode takes node i, in the firing list, out of it and hands it to
// release, or files it again if its tick is after the current one (moved
// later): to a later slot, which this advance reaches if it is due.
func (w *wheel[V]) fireNode(i int32, n *node[V], release func(i int32, n *node[V])) {
	w.unlink(i, n)
	if tk := w.tick.ceil(n.when); tk > w.elapsed {
		id := w.place(tk)
		w.occupied[id>>6] |= 1 << (id & 63)
		w.link(id, i, n)
		return
	}
	w.len--
	release(i, n)
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
// reached at tick t (a cascading slot, above level 0, or any slot of a
// KeyQueue's wheel), and stages or files each again (stageOrFile), each
// list it sends nodes to getting them in the order they were in. It
// walks the list from both ends at once: a node's links are read from
// the node, which was filed long before and is out of the caches, and
// the next node's place is known only once that read is done, so a walk
// from one end waits for one cache miss after another; two walks wait
// for two at a time (fireSlot, for a level-0 slot, has the same two in
// flight). O(nodes).
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
		dest = w.place(tk)
		w.occupied[dest>>6] |= 1 << (dest & 63)
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
