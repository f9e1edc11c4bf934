package queue

// heap is a 4-ary min-heap of nodes ordered by deadline, the structure of
// Go's runtime timers and of Java's ScheduledThreadPoolExecutor. The heap's
// array holds each node's deadline beside its index, so that sifting
// compares deadlines without visiting the nodes, and each node records its
// place in the array (in its next link), so removal needs no search.
//
// Costs, for n queued nodes: add, remove and move O(log n), next O(1), and
// advance O(k log n) for k nodes due. A 4-ary heap is half as deep as a
// binary one and a node's four children sit side by side in memory, which
// is why the Go runtime uses it. Deadlines are exact: a node fires on the
// first advance whose now reaches its deadline.
type heap[V any] struct {
	base[V] // lists: due and firing only
	items   []heapItem
}

// heapItem is a node in the heap's array: its deadline and its index.
type heapItem struct {
	when uint64
	i    int32
}

func newHeap[V any](t *table[V]) *heap[V] {
	h := &heap[V]{}
	h.init(t, 0)
	return h
}

func (h *heap[V]) add(i int32, n *node[V]) {
	h.len++
	if n.when <= h.now {
		h.link(h.dueList(), i, n)
		return
	}
	h.items = append(h.items, heapItem{n.when, i})
	n.prev = inHeap
	h.up(len(h.items) - 1)
}

func (h *heap[V]) remove(i int32, n *node[V]) {
	h.len--
	if n.prev != inHeap {
		h.unlink(i, n)
		return
	}
	h.removeAt(int(n.next - 1))
	n.next, n.prev = 0, 0
}

func (h *heap[V]) move(i int32, n *node[V], when uint64) {
	h.remove(i, n)
	n.when = when
	h.add(i, n)
}

func (h *heap[V]) relocate(to int32, n *node[V]) {
	if n.prev == inHeap {
		h.items[n.next-1].i = to
		return
	}
	h.base.relocate(to, n)
}

func (h *heap[V]) rehome(i int32, n *node[V], moved func(link int32) (int32, bool)) {
	if n.prev == inHeap {
		h.items[n.next-1].i = i
		return
	}
	h.base.rehome(i, n, moved)
}

// next reports the earliest deadline. It is O(1).
func (h *heap[V]) next() (uint64, bool) {
	if h.pendingDue() {
		return h.now, true
	}
	if len(h.items) == 0 {
		return 0, false
	}
	return h.items[0].when, true
}

// advance fires every node whose deadline is at or before now: first
// those that were added already due, then the rest in deadline order.
func (h *heap[V]) advance(now uint64, release func(i int32, n *node[V])) {
	h.begin(now)
	h.stageDue()
	for len(h.items) > 0 && h.items[0].when <= h.now {
		i := h.items[0].i
		n := h.node(i)
		h.removeAt(0)
		h.link(h.firingList(), i, n)
	}
	h.fire(release)
}

func (h *heap[V]) drain(fn func(i int32, n *node[V])) {
	h.drainLists(fn)
	for _, it := range h.items {
		n := h.node(it.i)
		n.next, n.prev = 0, 0
		h.len--
		fn(it.i, n)
	}
	clear(h.items)
	h.items = h.items[:0]
}

// removeAt takes the item at index k out of the array; its node's links
// are left for the caller.
func (h *heap[V]) removeAt(k int) {
	last := len(h.items) - 1
	if k != last {
		h.items[k] = h.items[last]
	}
	h.items = h.items[:last]
	if k != last && !h.up(k) {
		h.down(k)
	}
}

// place puts it at index k and records k in its node.
func (h *heap[V]) place(k int, it heapItem) {
	h.items[k] = it
	h.node(it.i).next = int32(k + 1)
}

// up moves the item at k towards the root and reports whether it moved.
func (h *heap[V]) up(k int) bool {
	it := h.items[k]
	start := k
	for k > 0 {
		p := (k - 1) / 4
		if h.items[p].when <= it.when {
			break
		}
		h.place(k, h.items[p])
		k = p
	}
	h.place(k, it)
	return k != start
}

// down moves the item at k away from the root.
func (h *heap[V]) down(k int) {
	n := len(h.items)
	it := h.items[k]
	for {
		c := 4*k + 1
		if c >= n {
			break
		}
		m := c // the smallest of up to four children
		for j := c + 1; j < min(c+4, n); j++ {
			if h.items[j].when < h.items[m].when {
				m = j
			}
		}
		if it.when <= h.items[m].when {
			break
		}
		h.place(k, h.items[m])
		k = m
	}
	h.place(k, it)
}
