package queue

import (
	"fmt"
	"math/bits"
	"time"
)

// IndexWheel is a [HierarchicalWheel] whose entries are small integers
// instead of pointers: entry i lives in a table the wheel owns, with a
// value of type V, linked to its slot neighbours by index. The links are
// not pointers, so however many entries it holds the garbage collector has
// no chains to follow, and for a V without pointers (a key, an index) it
// does not scan the table at all. A table entry is 24 bytes plus V. It is
// the structure for keeping millions of deadlines: hourglass's Timer keeps
// its timeouts in one with V a handle pointer, and Keyed with V the key.
// The caller chooses the indices, typically from a free list.
//
// IndexWheel adds one operation to the hierarchical wheel's: [IndexWheel.Move],
// which moves a queued entry's deadline. A move to a later deadline
// touches only the entry: the entry stays in the slot it was filed in,
// which is now early, and when that slot comes due the entry is filed
// again at its new deadline, as tokio's and Linux's wheels do. A deadline
// pushed back on every event (a heartbeat, an idle timeout) is thus
// re-filed about once per timeout period instead of relinked per event.
// The cost is that [IndexWheel.Next] may report a slot that fires
// nothing.
//
// Costs, for L levels: Add, Remove and Move O(1), Next O(L), Advance
// O(L + k·L) for k entries handled. Entries fire at the first tick boundary
// at or after their deadline: never early, and at most one tick late.
//
// IndexWheel is not safe for concurrent use.
type IndexWheel[V any] struct {
	levels
	slots  [][levelSize]ilist // per level
	nodes  [][]node[V]        // pages of nodeBlock entries, by index
	due    ilist              // entries added already due
	firing ilist              // due entries not yet handed to fire
	len    int
	now    uint64 // the greatest now passed to Advance
	active bool   // inside Advance's fire phase: fire must not call Advance
}

// ilist is a list of entries, by index+1, in the order they were linked.
type ilist struct{ head, tail int32 }

// node is an entry of an IndexWheel. Links hold index+1, so 0 is none.
type node[V any] struct {
	when       uint64
	next, prev int32
	pos        int32 // 0 not queued, level*64+slot+1 in a slot, posDue if due
	value      V
}

const nodeBlock = 1 << 12 // entries per page of the table

// NewIndexWheel returns an empty wheel with the given tick. It panics if
// tick is not positive.
func NewIndexWheel[V any](tick time.Duration) *IndexWheel[V] {
	if tick <= 0 {
		panic("queue: NewIndexWheel with non-positive tick")
	}
	w := &IndexWheel[V]{levels: newLevels(uint64(tick))}
	w.slots = make([][levelSize]ilist, len(w.occupied))
	return w
}

// node returns entry i, growing the table to hold it.
func (w *IndexWheel[V]) node(i int32) *node[V] {
	p := int(i / nodeBlock)
	for p >= len(w.nodes) {
		w.nodes = append(w.nodes, make([]node[V], nodeBlock))
	}
	return &w.nodes[p][i%nodeBlock]
}

// Len reports the number of queued entries.
func (w *IndexWheel[V]) Len() int { return w.len }

// Queued reports whether entry i is queued.
func (w *IndexWheel[V]) Queued(i int32) bool {
	return int(i/nodeBlock) < len(w.nodes) && w.node(i).pos != 0
}

// When reports entry i's deadline, the last one it was added or moved to.
func (w *IndexWheel[V]) When(i int32) uint64 { return w.node(i).when }

// Add queues entry i, which must be non-negative and not queued, to fire
// at when, with value v. It is O(1); it allocates only to grow the table,
// one page of 4096 entries at a time.
func (w *IndexWheel[V]) Add(i int32, when uint64, v V) {
	if i < 0 {
		panic("queue: IndexWheel.Add of a negative index")
	}
	n := w.node(i)
	if n.pos != 0 {
		panic("queue: Add of an entry that is already queued")
	}
	n.when, n.value = when, v
	w.len++
	w.file(i, n)
}

// Value returns queued entry i's value.
func (w *IndexWheel[V]) Value(i int32) V { return w.node(i).value }

// file links queued entry i into the slot for its deadline, or the due
// list if its tick has been reached.
func (w *IndexWheel[V]) file(i int32, n *node[V]) {
	t := ceilTicks(n.when, w.tick)
	if t <= w.elapsed {
		w.link(&w.due, i, n)
		n.pos = posDue
		return
	}
	l, s := w.place(t)
	w.link(&w.slots[l][s], i, n)
	w.occupy(l, s)
	n.pos = int32(l*levelSize + int(s) + 1)
}

// link appends entry i to l.
func (w *IndexWheel[V]) link(l *ilist, i int32, n *node[V]) {
	n.next, n.prev = 0, l.tail
	if l.tail != 0 {
		w.node(l.tail - 1).next = i + 1
	} else {
		l.head = i + 1
	}
	l.tail = i + 1
}

// unlink takes queued entry i out of its list, vacating its slot if that
// empties it.
func (w *IndexWheel[V]) unlink(i int32, n *node[V]) {
	var l *ilist
	switch n.pos {
	case posDue:
		l = &w.due
	case posFiring:
		l = &w.firing
	default:
		p := int(n.pos - 1)
		l = &w.slots[p/levelSize][p%levelSize]
	}
	if n.prev != 0 {
		w.node(n.prev - 1).next = n.next
	} else {
		l.head = n.next
	}
	if n.next != 0 {
		w.node(n.next - 1).prev = n.prev
	} else {
		l.tail = n.prev
	}
	if l.head == 0 && n.pos > 0 {
		p := int(n.pos - 1)
		w.vacate(p/levelSize, uint64(p%levelSize))
	}
	n.next, n.prev = 0, 0
}

// Drain takes every entry out of the wheel and hands each to fn, in no
// particular order. It is O(n + L·64), with no cascading: the way to empty
// a wheel of millions of entries at shutdown. fn must not call back into
// the wheel.
func (w *IndexWheel[V]) Drain(fn func(i int32, v V)) {
	var zero V
	drain := func(l *ilist) {
		for c := l.head; c != 0; {
			n := w.node(c - 1)
			next, v := n.next, n.value
			n.next, n.prev, n.pos, n.value = 0, 0, 0, zero
			w.len--
			fn(c-1, v)
			c = next
		}
		*l = ilist{}
	}
	drain(&w.due)
	drain(&w.firing)
	for l := range w.slots {
		for occ := w.occupied[l]; occ != 0; occ &= occ - 1 {
			drain(&w.slots[l][bits.TrailingZeros64(occ)])
		}
		w.occupied[l] = 0
	}
}

// Remove takes entry i out of the wheel and reports whether it was queued.
// It is O(1).
func (w *IndexWheel[V]) Remove(i int32) bool {
	if i < 0 || !w.Queued(i) {
		return false
	}
	n := w.node(i)
	w.unlink(i, n)
	var zero V
	n.pos, n.value = 0, zero
	w.len--
	return true
}

// Move changes queued entry i's deadline to when. A later deadline is
// recorded in place and the entry is re-filed when its old slot comes due;
// an earlier one relinks it at once. It is O(1) and panics if i is not
// queued.
func (w *IndexWheel[V]) Move(i int32, when uint64) {
	if !w.Queued(i) {
		panic("queue: Move of an entry that is not queued")
	}
	n := w.node(i)
	if when >= n.when {
		n.when = when
		return
	}
	w.unlink(i, n)
	n.when = when
	w.file(i, n)
}

// Next reports the start of the next occupied slot, or the structure's
// time if entries are due. It is O(L).
func (w *IndexWheel[V]) Next() (uint64, bool) {
	if w.due.head != 0 || (w.firing.head != 0 && !w.active) {
		return w.now, true
	}
	_, _, start, ok := w.next()
	if !ok {
		return 0, false
	}
	return w.time(start), true
}

// Advance moves time to now and hands every entry whose deadline's tick
// has been reached to fire, after taking it out of the wheel: first those
// added already due, then the rest in deadline order up to a tick. Entries
// moved to a later deadline are re-filed instead. As with the other
// structures, entries are handed over only once time has moved, so fire
// may call Add, Remove and Move: an entry it adds that is already due
// fires on the next Advance. Advance to math.MaxUint64 fires everything.
func (w *IndexWheel[V]) Advance(now uint64, fire func(i int32, v V)) {
	if w.active {
		panic("queue: Advance called from its own fire callback")
	}
	w.now = max(w.now, now)
	target := w.target(w.now)
	for w.due.head != 0 {
		i := w.due.head - 1
		n := w.node(i)
		w.unlink(i, n)
		w.stage(i, n)
	}
	for w.len > 0 {
		l, s, start, ok := w.next()
		if !ok || start > target {
			break
		}
		w.elapsed = start
		slot := &w.slots[l][s]
		for slot.head != 0 {
			i := slot.head - 1
			n := w.node(i)
			w.unlink(i, n)
			if ceilTicks(n.when, w.tick) > start {
				w.file(i, n) // moved later, or cascading down
			} else {
				w.stage(i, n)
			}
		}
	}
	w.elapsed = max(w.elapsed, target)
	w.active = true
	defer func() { w.active = false }()
	var zero V
	for w.firing.head != 0 {
		i := w.firing.head - 1
		n := w.node(i)
		w.unlink(i, n)
		v := n.value
		n.pos, n.value = 0, zero
		w.len--
		fire(i, v)
	}
}

// stage appends entry i, unlinked and due, to the firing list.
func (w *IndexWheel[V]) stage(i int32, n *node[V]) {
	w.link(&w.firing, i, n)
	n.pos = posFiring
}

// verify checks the wheel: links both ways, recorded positions, the
// occupancy bitmaps, and that every entry is filed no later than its
// deadline, in a slot after the current one.
func (w *IndexWheel[V]) verify() error {
	total := 0
	check := func(list ilist, pos int32, l int, s uint64) (int, error) {
		n, prev := 0, int32(0)
		for c := list.head; c != 0; c = w.node(c - 1).next {
			e := w.node(c - 1)
			if e.prev != prev {
				return n, fmt.Errorf("index wheel: entry %d has a wrong prev link", c-1)
			}
			if e.pos != pos {
				return n, fmt.Errorf("index wheel: entry %d records pos %d, is in %d", c-1, e.pos, pos)
			}
			if pos > 0 && !w.active {
				t := ceilTicks(e.when, w.tick)
				start := w.elapsed&^(uint64(1)<<(uint(l+1)*levelBits)-1) | s<<(uint(l)*levelBits)
				if t < start {
					return n, fmt.Errorf("index wheel: entry %d due at tick %d filed in a slot starting at %d", c-1, t, start)
				}
			}
			prev = c
			n++
		}
		if list.tail != prev {
			return n, fmt.Errorf("index wheel: list tail %d, last entry %d", list.tail, prev)
		}
		return n, nil
	}
	for _, l := range []struct {
		list ilist
		pos  int32
	}{{w.due, posDue}, {w.firing, posFiring}} {
		n, err := check(l.list, l.pos, 0, 0)
		if err != nil {
			return err
		}
		total += n
	}
	for l := range w.slots {
		for s := range w.slots[l] {
			n, err := check(w.slots[l][s], int32(l*levelSize+s+1), l, uint64(s))
			if err != nil {
				return err
			}
			if (n > 0) != (w.occupied[l]&(1<<s) != 0) {
				return fmt.Errorf("index wheel: level %d slot %d holds %d entries, bitmap disagrees", l, s, n)
			}
			if n > 0 && !w.active && !w.filedAfterCurrent(l, uint64(s)) {
				return fmt.Errorf("index wheel: level %d slot %d occupied at or before the current slot", l, s)
			}
			total += n
		}
	}
	if total != w.len {
		return fmt.Errorf("index wheel: lists hold %d entries, count says %d", total, w.len)
	}
	return nil
}
