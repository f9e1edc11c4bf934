package queue

// node is one deadline of a structure: 16 bytes and its value. A node is
// named by its index in a [table], an int32, and the structures link
// nodes by index, never by pointer, so however many a table holds the
// garbage collector has no chains to follow; for a V without pointers it
// does not scan the table at all.
//
// next and prev hold index+1 of the node after and before it in its list;
// the first node's prev and the last one's next hold -(list+1) instead,
// naming the list, so that a node can be unlinked without being told which
// list it is in. A heap node is in no list: its prev is inHeap and its
// next its place in the heap plus one. A node that is not queued has both
// links 0.
type node[V any] struct {
	when       uint64
	next, prev int32
	value      V
}

// inHeap is the prev of a node kept in a heap's array.
const inHeap = -1 << 31

// queued reports whether n is in a structure.
func (n *node[V]) queued() bool { return n.next != 0 }

// table holds the nodes of one structure: node i at nodes[i>>shift][i&mask].
// Who chooses the indices is the table's owner: [Queue] hands them out from
// a free list and grows the table in fixed pages; [KeyQueue] takes them
// from a hash table whose tables are the pages.
type table[V any] struct {
	nodes [][]node[V]
	shift uint
	mask  int32
}

func newTable[V any](shift uint) *table[V] {
	return &table[V]{shift: shift, mask: 1<<shift - 1}
}

// node returns node i, which must lie in the table.
func (t *table[V]) node(i int32) *node[V] {
	return &t.nodes[i>>t.shift][i&t.mask]
}

// ilist is a list of nodes, by index+1, in the order they were linked: 0
// for none.
type ilist struct{ head, tail int32 }

// listRef is the link that names list id.
func listRef(id int32) int32 { return -(id + 1) }

// base is what the four structures share: the table they link, their
// lists (each structure's own, then the due list and the firing list),
// the count of queued nodes, and the two phases of Advance.
//
// Advance works in two phases so that a structure stays consistent while
// fire runs: first everything due moves to the firing list without
// calling out, then the firing list is handed to fire one node at a time.
// Whatever fire does in between is safe: Remove of a node still in the
// firing list takes it out (it will not fire), and Add of a node whose
// deadline has been reached puts it in the due list, which the next
// Advance fires. So an Advance always ends, even when fire re-adds what
// it is given. If fire panics, the rest of the firing list waits for the
// next Advance, and Next says so.
type base[V any] struct {
	*table[V]
	lists  []ilist
	len    int    // queued nodes, in any list (or the heap)
	now    uint64 // the greatest now passed to Advance
	active bool   // inside Advance's fire phase: fire must not call Advance
}

// init gives b n lists of its own, besides the due and firing lists.
func (b *base[V]) init(t *table[V], n int) {
	b.table = t
	b.lists = make([]ilist, n+2)
}

func (b *base[V]) size() int { return b.len }

// dueList and firingList return the ids of the due and firing lists.
func (b *base[V]) dueList() int32    { return int32(len(b.lists) - 2) }
func (b *base[V]) firingList() int32 { return int32(len(b.lists) - 1) }

// link appends node i to list id.
func (b *base[V]) link(id int32, i int32, n *node[V]) {
	l := &b.lists[id]
	n.next = listRef(id)
	if l.tail != 0 {
		n.prev = l.tail
		b.node(l.tail - 1).next = i + 1
	} else {
		n.prev = listRef(id)
		l.head = i + 1
	}
	l.tail = i + 1
}

// linkAfter links node i into list id after node at, or at its front
// when at is -1.
func (b *base[V]) linkAfter(id, at, i int32, n *node[V]) {
	l := &b.lists[id]
	var next int32
	if at < 0 {
		n.prev = listRef(id)
		next = l.head
		l.head = i + 1
	} else {
		a := b.node(at)
		n.prev = at + 1
		next = a.next
		a.next = i + 1
	}
	if next > 0 {
		n.next = next
		b.node(next - 1).prev = i + 1
	} else {
		n.next = listRef(id)
		l.tail = i + 1
	}
}

// unlink takes node i out of its list and returns the list's id if that
// emptied it, -1 otherwise.
func (b *base[V]) unlink(i int32, n *node[V]) (emptied int32) {
	next, prev := n.next, n.prev
	emptied = -1
	if prev > 0 {
		b.node(prev - 1).next = next
	} else if next > 0 {
		b.lists[-prev-1].head = next
	}
	if next > 0 {
		b.node(next - 1).prev = prev
	} else if prev > 0 {
		b.lists[-next-1].tail = prev
	} else { // the list's only node
		emptied = -next - 1
		b.lists[emptied] = ilist{}
	}
	n.next, n.prev = 0, 0
	return emptied
}

// relocate points the neighbours of node n, a list node copied to index
// to, at it: the node before it (or its list's head) and the one after (or
// the tail).
func (b *base[V]) relocate(to int32, n *node[V]) {
	if n.prev > 0 {
		b.node(n.prev - 1).next = to + 1
	} else {
		b.lists[-n.prev-1].head = to + 1
	}
	if n.next > 0 {
		b.node(n.next - 1).prev = to + 1
	} else {
		b.lists[-n.next-1].tail = to + 1
	}
}

// rehome is relocate for a table rebuilt whole: node n, now at index i,
// had neighbours that may have moved too; moved maps an old link to the
// new one for those that did.
func (b *base[V]) rehome(i int32, n *node[V], moved func(link int32) (int32, bool)) {
	if n.prev < 0 {
		b.lists[-n.prev-1].head = i + 1
	} else if p, ok := moved(n.prev); ok {
		n.prev = p
	} else {
		b.node(n.prev - 1).next = i + 1
	}
	if n.next < 0 {
		b.lists[-n.next-1].tail = i + 1
	} else if p, ok := moved(n.next); ok {
		n.next = p
	} else {
		b.node(n.next - 1).prev = i + 1
	}
}

// begin starts an Advance to now: it checks that fire is not calling
// Advance and moves the structure's time on.
func (b *base[V]) begin(now uint64) {
	if b.active {
		panic("queue: Advance called from its own fire callback")
	}
	b.now = max(b.now, now)
}

// stageDue moves the due list to the end of the firing list.
func (b *base[V]) stageDue() {
	due := &b.lists[b.dueList()]
	for due.head != 0 {
		i := due.head - 1
		n := b.node(i)
		b.unlink(i, n)
		b.link(b.firingList(), i, n)
	}
}

// fire hands the firing list to release, in order, each node unlinked
// and uncounted first, and ends the Advance.
func (b *base[V]) fire(release func(i int32, n *node[V])) {
	b.active = true
	defer func() { b.active = false }()
	firing := &b.lists[b.firingList()]
	for firing.head != 0 {
		i := firing.head - 1
		n := b.node(i)
		b.unlink(i, n)
		b.len--
		release(i, n)
	}
}

// pendingDue reports whether the due list holds work for the next
// Advance, or the firing list does because fire panicked out of the last
// one.
func (b *base[V]) pendingDue() bool {
	return b.lists[b.dueList()].head != 0 || (!b.active && b.lists[b.firingList()].head != 0)
}

// drainList unlinks every node of list id and hands each to fn.
func (b *base[V]) drainList(id int, fn func(i int32, n *node[V])) {
	l := &b.lists[id]
	for c := l.head; c > 0; {
		n := b.node(c - 1)
		next := n.next
		n.next, n.prev = 0, 0
		b.len--
		fn(c-1, n)
		c = next
	}
	*l = ilist{}
}

// drainLists empties every list, handing each node to fn.
func (b *base[V]) drainLists(fn func(i int32, n *node[V])) {
	for id := range b.lists {
		if b.lists[id].head != 0 {
			b.drainList(id, fn)
		}
	}
}
