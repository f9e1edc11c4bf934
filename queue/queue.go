package queue

// This file is what every structure shares: the Queue that names entries
// by id, then the node table the entries live in and the lists the
// structures link them into (node, table, base), and the wheels' rounding
// of a deadline to a tick (tickSize).

import (
	"math"
	"math/bits"
)

// Queue is a set of deadlines driven by its caller, each named by an int32
// id that Add hands out, with a value of type V. It runs the structure a
// [Structure] chooses; the algorithms are explained in their files
// (wheel.go, hashedwheel.go, heap.go, sortedlist.go). A Queue never reads
// the clock, starts goroutines or locks: time is the now passed to
// [Queue.Advance], an unsigned count of nanoseconds on a clock of the
// caller's choosing (a monotonic offset from a start instant, typically).
// Unsigned time lets now + any non-negative time.Duration be stored
// without overflow for the next 292 years of uptime.
//
// Entries live in a table the Queue owns, 16 bytes plus V each, linked by
// index rather than pointer: however many it holds, the garbage collector
// has no chains to follow, and for a V without pointers it does not scan
// the table at all. Ids are reused once their entry fires or is removed,
// the last released first and lowest-numbered last, so the table stays as
// large as the most entries ever queued at once; a released id waits in
// a stack of 4 bytes an id (see freeNode). hourglass's Timer keeps its timeouts in one, with V
// a handle pointer (24 bytes an entry).
//
// A Queue is not safe for concurrent use. The concurrent timer in the
// parent package guards each one with a mutex.
type Queue[V any] struct {
	s    structure[V]
	t    *table[V]
	lazy bool // s records a later Move without relinking
	// wheel is s when s is the hierarchical wheel, nil otherwise: Add and
	// Remove call it directly, a call the compiler can inline, rather
	// than through the interface: a Batch's schedule and cancel cost
	// little more than these two (BenchmarkBatch_AfterFuncCancel_Pending
	// in the parent package).
	wheel *wheel[V]
	// free holds the ids released, the last on top (see freeNode).
	free []int32
	top  int32 // ids below top have been handed out
	// reserved holds the ids Reserve handed out and no call has filed
	// yet, in order, -1 for one removed since (reserve.go); filedMin is
	// the earliest deadline filed from it since FileReserved last said.
	reserved []int32
	filedMin uint64
	// fire is Advance's, while it runs, and release calls it: made once,
	// so that Advance allocates nothing.
	fire    func(id int32, v V)
	release func(i int32, n *node[V])
}

// pageBits sets the page size of a Queue's table: 2^10 entries, 32 KiB
// for an 8-byte V, so a table is never more than 1,023 entries larger than
// its highest id needs.
const pageBits = 10

// New returns an empty Queue running the structure s chooses.
func New[V any](s Structure) *Queue[V] {
	t := newTable[V](pageBits)
	q := &Queue[V]{s: newStructure(s, t), t: t, lazy: s.lazy(), filedMin: math.MaxUint64}
	q.wheel, _ = q.s.(*wheel[V])
	if q.wheel != nil {
		q.wheel.fixed = true // a Queue's nodes never move (see take)
	}
	q.release = q.fireNode
	return q
}

// node returns entry id's node, which must lie in the table: the
// table's own node with the page size a constant, which the compiler
// folds into a shift and a mask.
func (q *Queue[V]) node(id int32) *node[V] {
	return &q.t.nodes[id>>pageBits][id&(1<<pageBits-1)]
}

// take returns an id for a new entry: the last one released, or the
// next one never handed out, adding a page to the table if it takes one.
// The id's node is not queued (its next is 0). It reads nothing of the
// node: see freeNode.
func (q *Queue[V]) take() int32 {
	if n := len(q.free); n > 0 {
		i := q.free[n-1]
		q.free = q.free[:n-1]
		return i
	}
	if q.top == math.MaxInt32 {
		panic("queue: more than 2^31-1 entries")
	}
	if int(q.top>>pageBits) == len(q.t.nodes) {
		q.t.nodes = append(q.t.nodes, make([]node[V], 1<<pageBits))
	}
	q.top++
	return q.top - 1
}

// freeNode releases node i, just taken out of the structure (both its
// links 0), for Add to reuse, and returns its value, which it clears.
// The free ids wait in a stack of their own, not linked through their
// nodes: a node released in a burst's firing is cold by the time an Add
// reuses its id, and popping a stack linked through the nodes would read
// each of them in turn, a cache miss that the next cannot start before
// (the driver's share of a burst, in queue's Burst benchmarks). Taken
// from the slice, an id's node is only written until it is linked, and
// the writes of many overlap. The stack costs 4 bytes an id released,
// up to the most entries ever queued at once, as the table does.
func (q *Queue[V]) freeNode(i int32, n *node[V]) V {
	v := n.value
	var zero V
	n.value = zero
	q.free = append(q.free, i)
	return v
}

// Add queues a new entry with value v to fire at when and returns its id.
// An entry that is already due (for a wheel: whose tick has been reached)
// fires on the next Advance. It is O(1) for the wheels, O(log n) for the
// heap and O(n) for the sorted list, and allocates only to grow the
// table, a page of 1,024 entries at a time, or the heap's array.
func (q *Queue[V]) Add(when uint64, v V) int32 {
	i := q.take()
	n := q.node(i)
	n.when, n.value = when, v
	if q.wheel != nil {
		q.wheel.add(i, n)
	} else {
		q.s.add(i, n)
	}
	return i
}

// Alloc takes a new id and leaves it out of the structure, naming no
// entry (Queued, Lookup and RemoveIf see none), until [Queue.AddAt]
// files an entry under it or [Queue.Free] gives it back: so that an id
// can be handed out before its entry is filed, by a caller that holds no
// lock on q (the parent package's Timer.Arm, while its driver is
// awake). It is O(1), and allocates only to grow the table.
func (q *Queue[V]) Alloc() int32 { return q.take() }

// AddAt is [Queue.Add] for an id from [Queue.Alloc], which must not be
// filed or freed already.
func (q *Queue[V]) AddAt(id int32, when uint64, v V) {
	n := q.node(id)
	n.when, n.value = when, v
	if q.wheel != nil {
		q.wheel.add(id, n)
	} else {
		q.s.add(id, n)
	}
}

// Free gives back an id from [Queue.Alloc] that AddAt has not filed. It
// is O(1).
func (q *Queue[V]) Free(id int32) { q.freeNode(id, q.node(id)) }

// Queued reports whether id names a queued entry.
func (q *Queue[V]) Queued(id int32) bool {
	return id >= 0 && id < q.top && q.node(id).queued()
}

// When reports entry id's deadline, the last one it was added or moved
// to. It stays readable once the entry has fired or been removed, until
// Add reuses the id.
func (q *Queue[V]) When(id int32) uint64 { return q.node(id).when }

// Value returns queued entry id's value.
func (q *Queue[V]) Value(id int32) V { return q.node(id).value }

// Lookup returns entry id's value and true if id names a queued entry,
// and false otherwise: Queued and Value in one look at the entry.
func (q *Queue[V]) Lookup(id int32) (V, bool) {
	if id >= 0 && id < q.top {
		if n := q.node(id); n.queued() {
			return n.value, true
		}
	}
	var zero V
	return zero, false
}

// Move changes queued entry id's deadline to when. On the hierarchical
// wheel a later deadline is recorded in place and the entry is re-filed
// when its old slot comes due, and an earlier one relinks it: O(1). The
// other structures take it out and add it again. It panics if id is not
// queued.
func (q *Queue[V]) Move(id int32, when uint64) {
	if !q.Queued(id) {
		panic("queue: Move of an entry that is not queued")
	}
	n := q.node(id)
	if n.next == reservedLink || q.lazy && when >= n.when {
		n.when = when
		return
	}
	q.s.move(id, n, when)
}

// Remove takes entry id out and reports whether it was queued. Its id is
// free for reuse. It is O(1), or O(log n) for the heap.
func (q *Queue[V]) Remove(id int32) bool { return q.RemoveIf(id, nil) }

// RemoveIf is Remove of an entry whose value match accepts: it takes
// entry id out if it is queued and match, if not nil, reports true for a
// pointer to its value, and reports whether it did. A caller that reuses
// ids' meaning, as a generation in the value, checks and removes with one
// look at the entry. match must not call back into the queue.
func (q *Queue[V]) RemoveIf(id int32, match func(v *V) bool) bool {
	if id < 0 || id >= q.top {
		return false
	}
	n := q.node(id)
	if !n.queued() || match != nil && !match(&n.value) {
		return false
	}
	if n.next == reservedLink {
		q.unreserve(n)
	} else if q.wheel != nil {
		q.wheel.remove(id, n)
	} else {
		q.s.remove(id, n)
	}
	q.freeNode(id, n)
	return true
}

// Advance moves time to now and hands every entry that is due to fire,
// with its value, after taking it out of the structure and freeing its
// id: first those added already due, then the rest in deadline order (up
// to a tick for the wheels; the hashed wheel goes in slot order). fire may
// call Add, Remove and Move: an entry it adds that is already due fires on
// the next Advance, not this one. A now earlier than an earlier Advance's
// is treated as that earlier time; Advance to math.MaxUint64 fires
// everything. Advance panics if called from fire.
func (q *Queue[V]) Advance(now uint64, fire func(id int32, v V)) {
	outer := q.fire // set if fire calls Advance, which then panics
	q.fire = fire
	defer func() { q.fire = outer }()
	q.fileFirst()
	// What Advance files, its caller sees through Next: FileReserved
	// reports only what was filed after it (see there).
	q.filedMin = math.MaxUint64
	q.s.advance(now, q.release)
}

// fireNode hands node i, out of the structure, to Advance's fire.
func (q *Queue[V]) fireNode(i int32, n *node[V]) {
	q.fire(i, q.freeNode(i, n))
}

// Next reports the earliest time at which Advance has work to do, and
// false if the queue is empty. For the wheels that is a tick boundary, and
// for the hierarchical wheel it may be a cascade, or a slot whose entries
// have moved later, that fires nothing yet; for the heap and the list it
// is the earliest deadline. A driver sleeps until Next and then calls
// Advance. It is O(L) for the hierarchical wheel's L levels, O(slots/64)
// for the hashed wheel and O(1) for the others.
func (q *Queue[V]) Next() (uint64, bool) {
	q.fileFirst()
	return q.s.next()
}

// Len reports the number of queued entries.
func (q *Queue[V]) Len() int {
	q.fileFirst()
	return q.s.size()
}

// Drain takes every entry out and hands each to fn, in no particular
// order, freeing its id. For the hierarchical wheel it is O(n + L·64),
// with no cascading: the way to empty a queue of millions of entries at
// shutdown. fn must not call back into the queue.
func (q *Queue[V]) Drain(fn func(id int32, v V)) {
	q.fileFirst()
	q.s.drain(func(i int32, n *node[V]) {
		fn(i, q.freeNode(i, n))
	})
}

// The node table and its lists.

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
// a stack of released ones and grows the table in fixed pages; [KeyQueue] takes them
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
	return &t.nodes[i>>(t.shift&31)][i&t.mask]
}

// ilist is a list of nodes, by index+1, in the order they were linked: 0
// for none.
type ilist struct{ head, tail int32 }

// listRef is the link that names list id.
func listRef(id int32) int32 { return -(id + 1) }

// base is what the four structures share: the table they link, their
// lists (each structure's own, then the due list and the firing list),
// which of them hold nodes, the count of queued nodes, and the two phases
// of Advance.
//
// occ has a bit per list for the wheels, which find their next slot from
// it with a few bit operations (wheel.go, hashedwheel.go): a wheel sets a
// slot's bit when it files a node there, and unlink clears a list's bit
// when it takes the list's last node. (Setting it in link would cost
// every link a few instructions and keep link from inlining.) A structure's own lists are
// ids 0 to n-1; the due and firing lists take the first two ids of the
// word after, so that each word of occ below them holds only the
// structure's own lists.
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
	occ    []uint64 // bit id%64 of word id/64: list id holds nodes (wheels)
	len    int      // queued nodes, in any list (or the heap)
	now    uint64   // the greatest now passed to Advance
	active bool     // inside Advance's fire phase: fire must not call Advance
}

// init gives b n lists of its own, besides the due and firing lists.
func (b *base[V]) init(t *table[V], n int) {
	b.table = t
	words := (n + 63) / 64
	b.lists = make([]ilist, words*64+2)
	b.occ = make([]uint64, words+1)
}

func (b *base[V]) size() int { return b.len }

// dueList and firingList return the ids of the due and firing lists.
func (b *base[V]) dueList() int32    { return int32(len(b.lists) - 2) }
func (b *base[V]) firingList() int32 { return int32(len(b.lists) - 1) }

// link appends node i to list id.
func (b *base[V]) link(id int32, i int32, n *node[V]) {
	l := &b.lists[id]
	n.next, n.prev = listRef(id), l.tail
	if l.tail != 0 {
		b.node(l.tail - 1).next = i + 1
	} else {
		n.prev = n.next
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

// unlink takes node i out of its list, clearing the list's bit in occ if
// that empties it (see base).
func (b *base[V]) unlink(i int32, n *node[V]) {
	next, prev := n.next, n.prev
	n.next, n.prev = 0, 0
	if prev > 0 {
		b.node(prev - 1).next = next
	} else {
		b.lists[-prev-1].head = max(next, 0) // 0 if n was the only node
	}
	if next > 0 {
		b.node(next - 1).prev = prev
		return
	}
	id := -next - 1
	b.lists[id].tail = max(prev, 0)
	if prev < 0 { // the list's only node
		b.occ[id>>6] &^= 1 << (id & 63)
	}
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
	b.occ[id/64] &^= 1 << (id % 64)
}

// drainLists empties every list, handing each node to fn.
func (b *base[V]) drainLists(fn func(i int32, n *node[V])) {
	for id := range b.lists {
		if b.lists[id].head != 0 {
			b.drainList(id, fn)
		}
	}
}

// tickSize is a wheel's tick, with what it takes to divide a deadline by
// it without a division instruction: dividing by a number known only at
// run time is a DIV, 20 to 90 cycles on amd64, on every Add of a wheel,
// where multiplying by its reciprocal is a few.
//
// recip is ⌊(2^64−1)/n⌋, and the high word of x·recip is ⌊x/n⌋ or one
// less (recip is at least (2^64−n)/n, so x·recip/2^64 > x/n − 1 for any
// x < 2^64); one comparison of the remainder corrects it. Worked example,
// n = 3, recip = 6148914691236517205: x = 7 gives the high word of
// 7·recip = 2 (⌊7/3⌋), remainder 1; x = 6 gives 1, remainder 3 ≥ n, so
// the quotient is 2 and the remainder 0.
type tickSize struct {
	n     uint64 // nanoseconds, at least 1
	recip uint64
}

func newTickSize(n uint64) tickSize {
	return tickSize{n: n, recip: math.MaxUint64 / n}
}

// div returns ⌊x/n⌋ and x mod n.
func (t tickSize) div(x uint64) (q, r uint64) {
	q, _ = bits.Mul64(x, t.recip)
	r = x - q*t.n
	if r >= t.n {
		q++
		r -= t.n
	}
	return q, r
}

// ceil returns when rounded up to a whole number of ticks: the first tick
// at whose start when has been reached. Rounding up is what makes a wheel
// never fire early.
func (t tickSize) ceil(when uint64) uint64 {
	q, r := t.div(when)
	if r != 0 {
		q++
	}
	return q
}
