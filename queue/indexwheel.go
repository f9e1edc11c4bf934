package queue

import (
	"time"
)

// IndexWheel is a [HierarchicalWheel] whose entries are small integers
// instead of pointers: entry i lives in a table the wheel owns, with a
// value of type V, linked to its slot neighbours by index. The links are
// not pointers, so however many entries it holds the garbage collector has
// no chains to follow, and for a V without pointers (a key, an index) it
// does not scan the table at all. A table entry is 16 bytes plus V. It is
// the structure for keeping millions of deadlines: hourglass's Timer keeps
// its timeouts in one with V a handle pointer (24 bytes an entry). The
// caller chooses the indices, typically from a free list; [KeyWheel] is
// the same wheel with the indices chosen by a hash table of keys.
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
	idWheel[V]
}

// nodeBits sets the page size of an IndexWheel's table: 2^10 entries,
// 32 KiB for an 8-byte V, so a table is never more than 1,023 entries
// larger than its highest index needs.
const (
	nodeBits  = 10
	nodeBlock = 1 << nodeBits
)

// NewIndexWheel returns an empty wheel with the given tick. It panics if
// tick is not positive.
func NewIndexWheel[V any](tick time.Duration) *IndexWheel[V] {
	if tick <= 0 {
		panic("queue: NewIndexWheel with non-positive tick")
	}
	return &IndexWheel[V]{newIDWheel[V](uint64(tick), nodeBits)}
}

// grow makes the table hold entry i.
func (w *IndexWheel[V]) grow(i int32) {
	for int(i>>nodeBits) >= len(w.nodes) {
		w.nodes = append(w.nodes, make([]node[V], nodeBlock))
	}
}

// Queued reports whether entry i is queued.
func (w *IndexWheel[V]) Queued(i int32) bool {
	return i >= 0 && int(i>>nodeBits) < len(w.nodes) && w.node(i).next != 0
}

// When reports entry i's deadline, the last one it was added or moved to.
func (w *IndexWheel[V]) When(i int32) uint64 { return w.node(i).when }

// Add queues entry i, which must be non-negative and not queued, to fire
// at when, with value v. It is O(1); it allocates only to grow the table,
// one page of 1024 entries at a time.
func (w *IndexWheel[V]) Add(i int32, when uint64, v V) {
	if i < 0 {
		panic("queue: IndexWheel.Add of a negative index")
	}
	w.grow(i)
	n := w.node(i)
	if n.next != 0 {
		panic("queue: Add of an entry that is already queued")
	}
	n.when, n.value = when, v
	w.len++
	w.file(i, n)
}

// Value returns queued entry i's value.
func (w *IndexWheel[V]) Value(i int32) V { return w.node(i).value }

// Drain takes every entry out of the wheel and hands each to fn, in no
// particular order. It is O(n + L·64), with no cascading: the way to empty
// a wheel of millions of entries at shutdown. fn must not call back into
// the wheel.
func (w *IndexWheel[V]) Drain(fn func(i int32, v V)) {
	var zero V
	w.drain(func(i int32, n *node[V]) {
		v := n.value
		n.value = zero
		fn(i, v)
	})
}

// Remove takes entry i out of the wheel and reports whether it was queued.
// It is O(1).
func (w *IndexWheel[V]) Remove(i int32) bool {
	if !w.Queued(i) {
		return false
	}
	n := w.node(i)
	w.unlink(i, n)
	var zero V
	n.value = zero
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
	w.move(i, w.node(i), when)
}

// Advance moves time to now and hands every entry whose deadline's tick
// has been reached to fire, after taking it out of the wheel: first those
// added already due, then the rest in deadline order up to a tick. Entries
// moved to a later deadline are re-filed instead. As with the other
// structures, entries are handed over only once time has moved, so fire
// may call Add, Remove and Move: an entry it adds that is already due
// fires on the next Advance. Advance to math.MaxUint64 fires everything.
func (w *IndexWheel[V]) Advance(now uint64, fire func(i int32, v V)) {
	var zero V
	w.advance(now, func(i int32, n *node[V]) {
		v := n.value
		n.value = zero
		fire(i, v)
	})
}
