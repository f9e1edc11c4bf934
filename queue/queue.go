package queue

import "math"

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
// lowest-numbered last, so the table stays as large as the most entries
// ever queued at once. hourglass's Timer keeps its timeouts in one, with V
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
	free  []int32 // released ids
	top   int32   // ids below top have been handed out
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
	q := &Queue[V]{s: newStructure(s, t), t: t, lazy: s.lazy()}
	q.wheel, _ = q.s.(*wheel[V])
	q.release = q.fireNode
	return q
}

// alloc returns a free id, growing the table to hold it.
func (q *Queue[V]) alloc() int32 {
	if n := len(q.free); n > 0 {
		id := q.free[n-1]
		q.free = q.free[:n-1]
		return id
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

// Add queues a new entry with value v to fire at when and returns its id.
// An entry that is already due (for a wheel: whose tick has been reached)
// fires on the next Advance. It is O(1) for the wheels, O(log n) for the
// heap and O(n) for the sorted list, and allocates only to grow the
// table, a page of 1,024 entries at a time, or the heap's array.
func (q *Queue[V]) Add(when uint64, v V) int32 {
	i := q.alloc()
	n := q.t.node(i)
	n.when, n.value = when, v
	if q.wheel != nil {
		q.wheel.add(i, n)
	} else {
		q.s.add(i, n)
	}
	return i
}

// Queued reports whether id names a queued entry.
func (q *Queue[V]) Queued(id int32) bool {
	return id >= 0 && id < q.top && q.t.node(id).queued()
}

// When reports entry id's deadline, the last one it was added or moved
// to. It stays readable once the entry has fired or been removed, until
// Add reuses the id.
func (q *Queue[V]) When(id int32) uint64 { return q.t.node(id).when }

// Value returns queued entry id's value.
func (q *Queue[V]) Value(id int32) V { return q.t.node(id).value }

// Lookup returns entry id's value and true if id names a queued entry,
// and false otherwise: Queued and Value in one look at the entry.
func (q *Queue[V]) Lookup(id int32) (V, bool) {
	if id >= 0 && id < q.top {
		if n := q.t.node(id); n.queued() {
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
	n := q.t.node(id)
	if q.lazy && when >= n.when {
		n.when = when
		return
	}
	q.s.move(id, n, when)
}

// Remove takes entry id out and reports whether it was queued. Its id is
// free for reuse. It is O(1), or O(log n) for the heap.
func (q *Queue[V]) Remove(id int32) bool {
	if !q.Queued(id) {
		return false
	}
	n := q.t.node(id)
	if q.wheel != nil {
		q.wheel.remove(id, n)
	} else {
		q.s.remove(id, n)
	}
	var zero V
	n.value = zero
	q.free = append(q.free, id)
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
	q.s.advance(now, q.release)
}

// fireNode hands node i, out of the structure, to Advance's fire.
func (q *Queue[V]) fireNode(i int32, n *node[V]) {
	v := n.value
	var zero V
	n.value = zero
	q.free = append(q.free, i)
	q.fire(i, v)
}

// Next reports the earliest time at which Advance has work to do, and
// false if the queue is empty. For the wheels that is a tick boundary, and
// for the hierarchical wheel it may be a cascade, or a slot whose entries
// have moved later, that fires nothing yet; for the heap and the list it
// is the earliest deadline. A driver sleeps until Next and then calls
// Advance. It is O(L) for the hierarchical wheel's L levels, O(slots/64)
// for the hashed wheel and O(1) for the others.
func (q *Queue[V]) Next() (uint64, bool) { return q.s.next() }

// Len reports the number of queued entries.
func (q *Queue[V]) Len() int { return q.s.size() }

// Drain takes every entry out and hands each to fn, in no particular
// order, freeing its id. For the hierarchical wheel it is O(n + L·64),
// with no cascading: the way to empty a queue of millions of entries at
// shutdown. fn must not call back into the queue.
func (q *Queue[V]) Drain(fn func(id int32, v V)) {
	q.s.drain(func(i int32, n *node[V]) {
		v := n.value
		var zero V
		n.value = zero
		q.free = append(q.free, i)
		fn(i, v)
	})
}
