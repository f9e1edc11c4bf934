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
	// lists holds each level's 64 slots in turn (list l*64+s), then the
	// due list (entries added already due) and the firing list (due
	// entries not yet handed to fire).
	lists []ilist
	// nodes holds entry i at nodes[i>>shift][i&mask]: fixed pages for
	// IndexWheel, one hash table each for KeyWheel.
	nodes  [][]node[V]
	shift  uint
	mask   int32
	len    int
	now    uint64 // the greatest now passed to Advance
	active bool   // inside Advance's fire phase: fire must not call Advance
}

// ilist is a list of entries, by index+1, in the order they were linked:
// 0 for none.
type ilist struct{ head, tail int32 }

// node is an entry of an idWheel: 16 bytes and its value. Its links hold
// index+1 of the entry before and after it; the first entry's prev and
// the last one's next hold -(list+1) instead, naming the list, so that an
// entry can be unlinked without being told which list it is in. An entry
// that is not queued has both links 0.
type node[V any] struct {
	when       uint64
	next, prev int32
	value      V
}

func newIDWheel[V any](tick uint64, shift uint) idWheel[V] {
	w := idWheel[V]{levels: newLevels(tick), shift: shift, mask: 1<<shift - 1}
	w.lists = make([]ilist, len(w.occupied)*levelSize+2)
	return w
}

// dueList and firingList return the ids of the due and firing lists.
func (w *idWheel[V]) dueList() int32    { return int32(len(w.lists) - 2) }
func (w *idWheel[V]) firingList() int32 { return int32(len(w.lists) - 1) }

// listRef is the link that names list id.
func listRef(id int32) int32 { return -(id + 1) }

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
		w.link(w.dueList(), i, n)
		return
	}
	l, s := w.place(t)
	w.link(int32(l*levelSize+int(s)), i, n)
	w.occupy(l, s)
}

// link appends entry i to list id.
func (w *idWheel[V]) link(id int32, i int32, n *node[V]) {
	l := &w.lists[id]
	n.next = listRef(id)
	if l.tail != 0 {
		n.prev = l.tail
		w.node(l.tail - 1).next = i + 1
	} else {
		n.prev = listRef(id)
		l.head = i + 1
	}
	l.tail = i + 1
}

// unlink takes queued entry i out of its list, vacating its slot if that
// empties it.
func (w *idWheel[V]) unlink(i int32, n *node[V]) {
	next, prev := n.next, n.prev
	if prev > 0 {
		w.node(prev - 1).next = next
	} else if next > 0 {
		w.lists[-prev-1].head = next
	}
	if next > 0 {
		w.node(next - 1).prev = prev
	} else if prev > 0 {
		w.lists[-next-1].tail = prev
	} else { // the list's only entry
		id := int(-next - 1)
		w.lists[id] = ilist{}
		if l := id / levelSize; l < len(w.occupied) {
			w.vacate(l, uint64(id%levelSize))
		}
	}
	n.next, n.prev = 0, 0
}

// relink points the neighbours of queued entry n, now at index to, at it:
// the entry before it (or its list's head) and the one after (or the
// tail). Moving a queued entry to another index is a copy and a relink.
func (w *idWheel[V]) relink(to int32, n *node[V]) {
	if n.prev > 0 {
		w.node(n.prev - 1).next = to + 1
	} else {
		w.lists[-n.prev-1].head = to + 1
	}
	if n.next > 0 {
		w.node(n.next - 1).prev = to + 1
	} else {
		w.lists[-n.next-1].tail = to + 1
	}
}

// move changes queued entry i's deadline to when. A later deadline is
// only recorded: the entry's list comes due no later than the new
// deadline, and advance files the entry again then, wherever it is (a
// wheel slot, the due list, the firing list). An earlier deadline relinks
// it at once, since it may belong to an earlier slot.
func (w *idWheel[V]) move(i int32, n *node[V], when uint64) {
	if when >= n.when {
		n.when = when
		return
	}
	w.unlink(i, n)
	n.when = when
	w.file(i, n)
}

// stage appends entry i, unlinked and due, to the firing list.
func (w *idWheel[V]) stage(i int32, n *node[V]) {
	w.link(w.firingList(), i, n)
}

// Next reports the start of the next occupied slot, or the structure's
// time if entries are due. It is O(L).
func (w *idWheel[V]) Next() (uint64, bool) {
	if w.lists[w.dueList()].head != 0 || (w.lists[w.firingList()].head != 0 && !w.active) {
		return w.now, true
	}
	_, _, start, ok := w.next()
	if !ok {
		return 0, false
	}
	return w.time(start), true
}

// advance is Advance for both wheels: it moves time to now, stages every
// entry whose tick has been reached (filing again those whose deadline
// was moved later) and then, for each staged entry, unlinks it and calls
// release(i, n), which takes it out of the table and hands it to the
// caller's fire. An entry still staged when fire moves it later is filed
// again instead.
func (w *idWheel[V]) advance(now uint64, release func(i int32, n *node[V])) {
	if w.active {
		panic("queue: Advance called from its own fire callback")
	}
	w.now = max(w.now, now)
	target := w.target(w.now)
	due, firing := &w.lists[w.dueList()], &w.lists[w.firingList()]
	for due.head != 0 {
		i := due.head - 1
		n := w.node(i)
		w.unlink(i, n)
		if ceilTicks(n.when, w.tick) > w.elapsed {
			w.file(i, n) // moved later: to a slot
		} else {
			w.stage(i, n)
		}
	}
	for w.len > 0 {
		l, s, start, ok := w.next()
		if !ok || start > target {
			break
		}
		w.elapsed = start
		slot := &w.lists[l*levelSize+int(s)]
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
	for firing.head != 0 {
		i := firing.head - 1
		n := w.node(i)
		w.unlink(i, n)
		if ceilTicks(n.when, w.tick) > w.elapsed {
			w.file(i, n) // moved later by fire
			continue
		}
		w.len--
		release(i, n)
	}
}

// drain unlinks every queued entry and hands each to fn, in no particular
// order, leaving the lists and bitmaps empty. fn must not call back into
// the wheel.
func (w *idWheel[V]) drain(fn func(i int32, n *node[V])) {
	each := func(id int) {
		l := &w.lists[id]
		for c := l.head; c > 0; {
			n := w.node(c - 1)
			next := n.next
			n.next, n.prev = 0, 0
			w.len--
			fn(c-1, n)
			c = next
		}
		*l = ilist{}
	}
	each(int(w.dueList()))
	each(int(w.firingList()))
	for l := range w.occupied {
		for occ := w.occupied[l]; occ != 0; occ &= occ - 1 {
			each(l*levelSize + bits.TrailingZeros64(occ))
		}
		w.occupied[l] = 0
	}
}

// verify checks the wheel: links both ways, each list's first and last
// entry naming it, the occupancy bitmaps, and that every entry is filed
// no later than its deadline, in a slot after the current one.
func (w *idWheel[V]) verify() error {
	total := 0
	for id := range w.lists {
		list := w.lists[id]
		ref := listRef(int32(id))
		l, s := id/levelSize, uint64(id%levelSize)
		inSlot := l < len(w.occupied)
		n, prev := 0, ref
		for c := list.head; c > 0; c = w.node(c - 1).next {
			e := w.node(c - 1)
			if e.prev != prev {
				return fmt.Errorf("index wheel: entry %d of list %d has prev %d, want %d", c-1, id, e.prev, prev)
			}
			if inSlot && !w.active {
				t := ceilTicks(e.when, w.tick)
				start := w.elapsed&^(uint64(1)<<(uint(l+1)*levelBits)-1) | s<<(uint(l)*levelBits)
				if t < start {
					return fmt.Errorf("index wheel: entry %d due at tick %d filed in a slot starting at %d", c-1, t, start)
				}
			}
			prev = c
			n++
			if n > w.len {
				return fmt.Errorf("index wheel: list %d holds more entries than the wheel (a cycle?)", id)
			}
			if next := e.next; next <= 0 && next != ref {
				return fmt.Errorf("index wheel: last entry %d of list %d has next %d, want %d", c-1, id, next, ref)
			}
		}
		if tail := list.tail; (n == 0 && tail != 0) || (n > 0 && tail != prev) {
			return fmt.Errorf("index wheel: list %d tail %d, last entry %d", id, tail, prev)
		}
		if inSlot {
			if (n > 0) != (w.occupied[l]&(1<<s) != 0) {
				return fmt.Errorf("index wheel: level %d slot %d holds %d entries, bitmap disagrees", l, s, n)
			}
			if n > 0 && !w.active && !w.filedAfterCurrent(l, s) {
				return fmt.Errorf("index wheel: level %d slot %d occupied at or before the current slot", l, s)
			}
		}
		total += n
	}
	if total != w.len {
		return fmt.Errorf("index wheel: lists hold %d entries, count says %d", total, w.len)
	}
	return nil
}
