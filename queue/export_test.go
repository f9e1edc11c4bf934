package queue

import (
	"fmt"
	"time"
)

// This file holds what only the tests reach: the invariant checkers of
// every structure and of the two tables, and hooks for package queue_test.

// Verify runs the invariant checker of q, a *Queue or a *KeyQueue of any
// type, and returns the first violation found. It lets the tests in
// package queue_test check after every step.
func Verify(q any) error {
	v, ok := q.(interface{ verify() error })
	if !ok {
		panic(fmt.Sprintf("queue: Verify of %T, which has no invariant checker", q))
	}
	return v.verify()
}

// NewKeyQueueBits returns a KeyQueue whose tables hold at most 2^bits
// slots, so that tests reach table splits and directory doubling with
// few keys.
func NewKeyQueueBits[K comparable](s Structure, bits uint) *KeyQueue[K] {
	return newKeyQueue[K](s, bits)
}

// Tables reports how many hash tables w has and its directory's depth.
func (w *KeyQueue[K]) Tables() (tables int, depth uint) { return len(w.tables), w.depth }

// Levels reports the number of levels of a hierarchical wheel of tick.
func Levels(tick time.Duration) int { return HierarchicalWheel(tick).Levels() }

// verifier is what every structure implements here.
type verifier interface{ verify() error }

func (q *Queue[V]) verify() error {
	if err := q.s.(verifier).verify(); err != nil {
		return err
	}
	queued, reserved := 0, 0
	for i := range q.top {
		n := q.t.node(i)
		switch {
		case n.next == reservedLink:
			if n.prev < 1 || int(n.prev) > len(q.reserved) || q.reserved[n.prev-1] != i {
				return fmt.Errorf("queue: reserved id %d has place %d in %v", i, n.prev-1, q.reserved)
			}
			reserved++
		case n.queued():
			queued++
		}
	}
	if queued != q.s.size() {
		return fmt.Errorf("queue: %d ids queued, structure holds %d", queued, q.s.size())
	}
	live := 0
	for _, i := range q.reserved {
		if i >= 0 {
			live++
		}
	}
	if live != reserved {
		return fmt.Errorf("queue: %d ids reserved, %d nodes say so", live, reserved)
	}
	queued += reserved
	free := 0
	seen := make(map[int32]bool, len(q.free))
	for _, f := range q.free {
		if f < 0 || f >= q.top {
			return fmt.Errorf("queue: free stack holds id %d of %d", f, q.top)
		}
		if q.t.node(f).queued() {
			return fmt.Errorf("queue: free id %d is queued", f)
		}
		if seen[f] {
			return fmt.Errorf("queue: free stack holds id %d twice", f)
		}
		seen[f] = true
		free++
	}
	if free+queued != int(q.top) {
		return fmt.Errorf("queue: %d free and %d queued of %d ids", free, queued, q.top)
	}
	return nil
}

// verifyLists checks every list of b: links both ways, each list's first
// and last node naming it, and calls check on each node with its list. It
// returns the nodes counted.
func (b *base[V]) verifyLists(check func(id int, n *node[V]) error) (int, error) {
	total := 0
	for id := range b.lists {
		list := b.lists[id]
		ref := listRef(int32(id))
		n, prev := 0, ref
		for c := list.head; c > 0; c = b.node(c - 1).next {
			e := b.node(c - 1)
			if e.prev != prev {
				return 0, fmt.Errorf("node %d of list %d has prev %d, want %d", c-1, id, e.prev, prev)
			}
			if err := check(id, e); err != nil {
				return 0, fmt.Errorf("node %d of list %d: %w", c-1, id, err)
			}
			prev = c
			n++
			if n > b.len {
				return 0, fmt.Errorf("list %d holds more nodes than the structure (a cycle?)", id)
			}
			if next := e.next; next <= 0 && next != ref {
				return 0, fmt.Errorf("last node %d of list %d has next %d, want %d", c-1, id, next, ref)
			}
		}
		if tail := list.tail; (n == 0 && tail != 0) || (n > 0 && tail != prev) {
			return 0, fmt.Errorf("list %d tail %d, last node %d", id, tail, prev)
		}
		if b.occ[id/64]&(1<<(id%64)) != 0 && n == 0 { // the wheels check the converse
			return 0, fmt.Errorf("list %d is empty and its occupancy bit set", id)
		}
		total += n
	}
	return total, nil
}

func (b *base[V]) verifyCount(listed int, what string) error {
	if listed != b.len {
		return fmt.Errorf("%s: holds %d nodes, count says %d", what, listed, b.len)
	}
	return nil
}

// verify checks the wheel: the lists, the occupancy bitmaps, and that
// every node is filed no later than its deadline, in a slot after the
// current one.
func (w *wheel[V]) verify() error {
	counts := make([]int, len(w.lists))
	total, err := w.verifyLists(func(id int, e *node[V]) error {
		counts[id]++
		if id >= len(w.occupied)*64 || w.active {
			return nil
		}
		l, s := levelOf(id)
		t := ceilTicks(e.when, w.tick.n)
		top := levelShift(l + 1) // the shift of the level above: this level's block
		start := w.elapsed&^(uint64(1)<<top-1) | s<<levelShift(l)
		if t < start {
			return fmt.Errorf("due at tick %d, filed in a slot starting at %d", t, start)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("hierarchical wheel: %w", err)
	}
	for id := range len(w.occupied) * 64 {
		l, s := levelOf(id)
		n := counts[id]
		if (n > 0) != (w.occupied[id/64]&(1<<(id%64)) != 0) {
			return fmt.Errorf("hierarchical wheel: level %d slot %d holds %d nodes, bitmap disagrees", l, s, n)
		}
		mask := uint64(levelMask)
		if l == 0 {
			mask = level0Mask
		}
		if n > 0 && !w.active && s <= (w.elapsed>>levelShift(l))&mask {
			return fmt.Errorf("hierarchical wheel: level %d slot %d occupied at or before the current slot", l, s)
		}
	}
	return w.verifyCount(total, "hierarchical wheel")
}

// verify checks every slot: each node in the slot of its tick and not
// yet due, and the bitmap.
func (w *hashedWheel[V]) verify() error {
	slots := int(w.mask + 1)
	counts := make([]int, slots)
	total, err := w.verifyLists(func(id int, e *node[V]) error {
		if id >= slots {
			return nil
		}
		counts[id]++
		t := ceilTicks(e.when, w.tick.n)
		if t&w.mask != uint64(id) {
			return fmt.Errorf("due at tick %d in slot %d", t, id)
		}
		if t <= w.cur && !w.active {
			return fmt.Errorf("due at tick %d still queued at tick %d", t, w.cur)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("hashed wheel: %w", err)
	}
	for s, n := range counts {
		if (n > 0) != (w.occ[s/64]&(1<<(s%64)) != 0) {
			return fmt.Errorf("hashed wheel: slot %d holds %d nodes, bitmap disagrees", s, n)
		}
	}
	return w.verifyCount(total, "hashed wheel")
}

// verify checks the heap invariants: every parent's deadline is at most
// its children's, every node's recorded place is its place, and nothing
// in the heap is due at the structure's time.
func (h *heap[V]) verify() error {
	listed, err := h.verifyLists(func(int, *node[V]) error { return nil })
	if err != nil {
		return fmt.Errorf("heap: %w", err)
	}
	for k, it := range h.items {
		n := h.node(it.i)
		if n.prev != inHeap || n.next != int32(k+1) || n.when != it.when {
			return fmt.Errorf("heap: item %d (node %d, when %d) records place %d, prev %d, when %d", k, it.i, it.when, n.next-1, n.prev, n.when)
		}
		if k > 0 {
			if p := h.items[(k-1)/4]; p.when > it.when {
				return fmt.Errorf("heap: parent %d (when %d) after child %d (when %d)", (k-1)/4, p.when, k, it.when)
			}
		}
	}
	if len(h.items) > 0 && h.items[0].when <= h.now && !h.active {
		return fmt.Errorf("heap: root due at %d but time is %d", h.items[0].when, h.now)
	}
	return h.verifyCount(listed+len(h.items), "heap")
}

// verify checks that the list is ordered and holds nothing due at the
// structure's time.
func (s *sortedList[V]) verify() error {
	var last uint64
	total, err := s.verifyLists(func(id int, e *node[V]) error {
		if id != 0 {
			return nil
		}
		if e.when < last {
			return fmt.Errorf("deadline %d after %d", e.when, last)
		}
		if e.when <= s.now && !s.active {
			return fmt.Errorf("due at %d but time is %d", e.when, s.now)
		}
		last = e.when
		return nil
	})
	if err != nil {
		return fmt.Errorf("sorted list: %w", err)
	}
	return s.verifyCount(total, "sorted list")
}

// verify checks the structure and the hash table: the directory, each
// table's count, and that every key is found where it is, from its home
// slot.
func (w *KeyQueue[K]) verify() error {
	if err := w.s.(verifier).verify(); err != nil {
		return err
	}
	if len(w.dir) != 1<<w.depth {
		return fmt.Errorf("key table: directory of %d entries at depth %d", len(w.dir), w.depth)
	}
	for j, t := range w.dir {
		d := w.tables[t].depth
		if d > w.depth {
			return fmt.Errorf("key table: table %d of depth %d under a directory of depth %d", t, d, w.depth)
		}
		// Every directory entry sharing j's top d bits names the same table.
		if first := j >> (w.depth - d) << (w.depth - d); w.dir[first] != t {
			return fmt.Errorf("key table: directory entries %d and %d differ within table %d's depth", first, j, t)
		}
		if j >= len(w.look) || w.look[j].t != t || w.look[j].depth != d || len(w.look[j].tab) != len(w.t.nodes[t]) ||
			len(w.t.nodes[t]) > 0 && &w.look[j].tab[0] != &w.t.nodes[t][0] {
			return fmt.Errorf("key table: look entry %d does not match table %d", j, t)
		}
	}
	if len(w.look) != len(w.dir) {
		return fmt.Errorf("key table: %d look entries for a directory of %d", len(w.look), len(w.dir))
	}
	total := 0
	for t, tab := range w.t.nodes {
		count := 0
		ctrl := w.tables[t].ctrl
		if len(ctrl) != len(tab)+group || string(ctrl[len(tab):]) != string(ctrl[:group]) {
			return fmt.Errorf("key table: table %d of %d slots has %d control bytes, or a bad copy", t, len(tab), len(ctrl))
		}
		for s := range tab {
			n := &tab[s]
			if n.queued() != (ctrl[s] != empty) {
				return fmt.Errorf("key table: table %d slot %d: next %d, control byte %#x", t, s, n.next, ctrl[s])
			}
			if !n.queued() {
				continue
			}
			count++
			ft, _, tag, fs, found := w.find(n.value.key)
			if ctrl[s] != tag {
				return fmt.Errorf("key table: key %v has control byte %#x, want %#x", n.value.key, ctrl[s], tag)
			}
			if !found || int(ft) != t || fs != s {
				return fmt.Errorf("key table: key %v in table %d slot %d is found at %d/%d (%v)", n.value.key, t, s, ft, fs, found)
			}
		}
		if count != int(w.tables[t].count) {
			return fmt.Errorf("key table: table %d holds %d keys, count says %d", t, count, w.tables[t].count)
		}
		if count*5 > len(tab)*4 {
			return fmt.Errorf("key table: table %d holds %d keys in %d slots", t, count, len(tab))
		}
		total += count
	}
	if total != w.s.size() {
		return fmt.Errorf("key table: tables hold %d keys, the structure %d", total, w.s.size())
	}
	return nil
}

// ceilTicks is tickSize.ceil by division, the model verify checks the
// wheels against.
func ceilTicks(when, tick uint64) uint64 {
	t := when / tick
	if when%tick != 0 {
		t++
	}
	return t
}
