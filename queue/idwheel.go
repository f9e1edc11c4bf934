package queue

import (
	"fmt"
	"math/bits"
)

// idWheel is the hierarchical wheel over entries named by int32 indices
// that [IndexWheel] and [KeyWheel] share. They differ only in who chooses
// an entry's index and where it lives: IndexWheel's caller picks indices
// and the table grows in pages to hold them; KeyWheel's hash table picks
// them and moves entries between slots as it grows. The wheel's lists
// hold index+1, so a relocated entry needs only its neighbours' links
// rewritten ([idWheel.relocate]).
//
// The algorithm is the one explained on [HierarchicalWheel]; the lazy
// later move on [IndexWheel].
type idWheel[V any] struct {
	levels
	slots [][levelSize]ilist // per level
	// nodes holds entry i at nodes[i>>shift][i&mask]: fixed pages for
	// IndexWheel, one hash table each for KeyWheel.
	nodes  [][]node[V]
	shift  uint
	mask   int32
	due    ilist // entries added already due
	firing ilist // due entries not yet handed to fire
	len    int
	now    uint64 // the greatest now passed to Advance
	active bool   // inside Advance's fire phase: fire must not call Advance
}

// ilist is a list of entries, by index+1, in the order they were linked.
type ilist struct{ head, tail int32 }

// node is an entry of an idWheel. Links hold index+1, so 0 is none. hash
// is KeyWheel's and fills what would be padding for a V of 8 bytes.
type node[V any] struct {
	when       uint64
	next, prev int32
	pos        int32 // 0 not queued, level*64+slot+1 in a slot, posDue if due, posFiring if firing
	hash       uint32
	value      V
}

func newIDWheel[V any](tick uint64, shift uint) idWheel[V] {
	w := idWheel[V]{levels: newLevels(tick), shift: shift, mask: 1<<shift - 1}
	w.slots = make([][levelSize]ilist, len(w.occupied))
	return w
}

// node returns entry i, which must lie in the table.
func (w *idWheel[V]) node(i int32) *node[V] {
	return &w.nodes[i>>w.shift][i&w.mask]
}

// Len reports the number of queued entries.
func (w *idWheel[V]) Len() int { return w.len }

// file links queued entry i into the slot for its deadline, or the due
// list if its tick has been reached.
func (w *idWheel[V]) file(i int32, n *node[V]) {
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

// list returns the list that position pos names.
func (w *idWheel[V]) list(pos int32) *ilist {
	switch pos {
	case posDue:
		return &w.due
	case posFiring:
		return &w.firing
	}
	p := int(pos - 1)
	return &w.slots[p/levelSize][p%levelSize]
}

// link appends entry i to l.
func (w *idWheel[V]) link(l *ilist, i int32, n *node[V]) {
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
func (w *idWheel[V]) unlink(i int32, n *node[V]) {
	l := w.list(n.pos)
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

// relink points the neighbours of entry n, now at index to, at it: the
// entry before it (or its list's head) and the one after (or the tail).
// Moving a queued entry to another index is a copy and a relink.
func (w *idWheel[V]) relink(to int32, n *node[V]) {
	l := w.list(n.pos)
	if n.prev != 0 {
		w.node(n.prev - 1).next = to + 1
	} else {
		l.head = to + 1
	}
	if n.next != 0 {
		w.node(n.next - 1).prev = to + 1
	} else {
		l.tail = to + 1
	}
}

// move changes queued entry i's deadline to when. An entry in a wheel
// slot moved later only records it: the slot comes due no later than the
// new deadline, and the entry is filed again then (see advance). Any
// other move relinks the entry at once: an earlier deadline may belong to
// an earlier slot, and an entry in the due or firing list would otherwise
// fire at its old deadline.
func (w *idWheel[V]) move(i int32, n *node[V], when uint64) {
	if when >= n.when && n.pos > 0 {
		n.when = when
		return
	}
	w.unlink(i, n)
	n.when = when
	w.file(i, n)
}

// stage appends entry i, unlinked and due, to the firing list.
func (w *idWheel[V]) stage(i int32, n *node[V]) {
	w.link(&w.firing, i, n)
	n.pos = posFiring
}

// Next reports the start of the next occupied slot, or the structure's
// time if entries are due. It is O(L).
func (w *idWheel[V]) Next() (uint64, bool) {
	if w.due.head != 0 || (w.firing.head != 0 && !w.active) {
		return w.now, true
	}
	_, _, start, ok := w.next()
	if !ok {
		return 0, false
	}
	return w.time(start), true
}

// advance is Advance for both wheels: it moves time to now, stages every
// entry whose tick has been reached (re-filing those whose deadline was
// moved later) and then, for each staged entry, unlinks it, marks it not
// queued and calls release(i, n), which takes it out of the table and
// hands it to the caller's fire.
func (w *idWheel[V]) advance(now uint64, release func(i int32, n *node[V])) {
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
	for w.firing.head != 0 {
		i := w.firing.head - 1
		n := w.node(i)
		w.unlink(i, n)
		n.pos = 0
		w.len--
		release(i, n)
	}
}

// drain unlinks every queued entry and hands each to fn, in no particular
// order, leaving the lists and bitmaps empty. fn must not call back into
// the wheel.
func (w *idWheel[V]) drain(fn func(i int32, n *node[V])) {
	each := func(l *ilist) {
		for c := l.head; c != 0; {
			n := w.node(c - 1)
			next := n.next
			n.next, n.prev, n.pos = 0, 0, 0
			w.len--
			fn(c-1, n)
			c = next
		}
		*l = ilist{}
	}
	each(&w.due)
	each(&w.firing)
	for l := range w.slots {
		for occ := w.occupied[l]; occ != 0; occ &= occ - 1 {
			each(&w.slots[l][bits.TrailingZeros64(occ)])
		}
		w.occupied[l] = 0
	}
}

// verify checks the wheel: links both ways, recorded positions, the
// occupancy bitmaps, and that every entry is filed no later than its
// deadline, in a slot after the current one.
func (w *idWheel[V]) verify() error {
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
			if n > w.len {
				return n, fmt.Errorf("index wheel: a list holds more entries than the wheel (a cycle?)")
			}
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
