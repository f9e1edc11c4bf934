package queue

import "fmt"

// Heap is a 4-ary min-heap of entries ordered by deadline, the structure of
// Go's runtime timers and of Java's ScheduledThreadPoolExecutor. Each entry
// records its index, so removal needs no search.
//
// Costs, for n queued entries: Add O(log n), Remove O(log n), Next O(1), and
// Advance O(k log n) for k entries due. A 4-ary heap is half as deep as a
// binary one and a node's four children sit side by side in memory, which
// is why the Go runtime uses it. Deadlines are exact: an entry fires on the
// first Advance whose now reaches its deadline.
//
// The zero Heap is empty and ready to use. Heap is not safe for concurrent
// use.
type Heap[T any] struct {
	staging[T]
	items []*Entry[T]
}

// NewHeap returns an empty heap.
func NewHeap[T any]() *Heap[T] { return &Heap[T]{} }

// Len reports the number of queued entries. It is O(1).
func (h *Heap[T]) Len() int { return len(h.items) + h.n }

// Add queues e to fire at when. It is O(log n) and allocates only when the
// heap's backing array grows. It panics if e is already queued.
func (h *Heap[T]) Add(e *Entry[T], when uint64) {
	if e.pos != 0 {
		panic("queue: Add of an entry that is already queued")
	}
	e.when = when
	if when <= h.now {
		h.addDue(e)
		return
	}
	h.items = append(h.items, e)
	h.up(len(h.items) - 1)
}

// Remove takes e out of the heap and reports whether it was queued. It is
// O(log n).
func (h *Heap[T]) Remove(e *Entry[T]) bool {
	if e.pos <= 0 {
		return h.remove(e)
	}
	h.removeAt(int(e.pos - 1))
	return true
}

// Next reports the earliest deadline. It is O(1).
func (h *Heap[T]) Next() (uint64, bool) {
	if h.pendingDue() {
		return h.now, true
	}
	if len(h.items) == 0 {
		return 0, false
	}
	return h.items[0].when, true
}

// Advance fires every entry whose deadline is at or before now: first those
// that were added already due, then the rest in deadline order. It is
// O(k log n) for k entries fired and allocates nothing.
func (h *Heap[T]) Advance(now uint64, fire func(*Entry[T])) {
	now = h.begin(now)
	for len(h.items) > 0 && h.items[0].when <= now {
		e := h.items[0]
		h.removeAt(0)
		h.stage(e)
	}
	h.fire(fire)
}

func (h *Heap[T]) removeAt(i int) {
	last := len(h.items) - 1
	e := h.items[i]
	if i != last {
		h.items[i] = h.items[last]
	}
	h.items[last] = nil
	h.items = h.items[:last]
	if i != last && !h.up(i) {
		h.down(i)
	}
	e.pos = 0
}

// up moves the entry at i towards the root and reports whether it moved.
func (h *Heap[T]) up(i int) bool {
	e := h.items[i]
	start := i
	for i > 0 {
		p := (i - 1) / 4
		if h.items[p].when <= e.when {
			break
		}
		h.items[i] = h.items[p]
		h.items[i].pos = int32(i + 1)
		i = p
	}
	h.items[i] = e
	e.pos = int32(i + 1)
	return i != start
}

// down moves the entry at i away from the root.
func (h *Heap[T]) down(i int) {
	n := len(h.items)
	e := h.items[i]
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		m := c // the smallest of up to four children
		for j := c + 1; j < min(c+4, n); j++ {
			if h.items[j].when < h.items[m].when {
				m = j
			}
		}
		if e.when <= h.items[m].when {
			break
		}
		h.items[i] = h.items[m]
		h.items[i].pos = int32(i + 1)
		i = m
	}
	h.items[i] = e
	e.pos = int32(i + 1)
}

// verify checks the heap invariants: every parent's deadline is at most its
// children's, every entry's recorded index is its place, and nothing in the
// heap is due at the structure's time.
func (h *Heap[T]) verify() error {
	if err := h.staging.verify(); err != nil {
		return fmt.Errorf("heap: %w", err)
	}
	for i, e := range h.items {
		if e.pos != int32(i+1) {
			return fmt.Errorf("heap: entry at %d records pos %d", i, e.pos)
		}
		if i > 0 {
			if p := h.items[(i-1)/4]; p.when > e.when {
				return fmt.Errorf("heap: parent %d (when %d) after child %d (when %d)", (i-1)/4, p.when, i, e.when)
			}
		}
	}
	if len(h.items) > 0 && h.items[0].when <= h.now && !h.active {
		return fmt.Errorf("heap: root due at %d but time is %d", h.items[0].when, h.now)
	}
	return nil
}
