package queue

import (
	"time"
)

// Structure chooses one of the four deadline structures and its
// parameters, for [New] and [NewKeyQueue]. Make one with
// [HierarchicalWheel], [HashedWheel], [Heap] or [SortedList].
type Structure struct {
	kind  kind
	tick  uint64
	slots int
}

type kind uint8

const (
	kindHierarchical kind = iota
	kindHashed
	kindHeap
	kindList
)

// HierarchicalWheel chooses the hierarchical timing wheel with the given
// tick (see wheel.go): Add, Remove and Move O(1), and a later Move only
// records the new deadline. It panics if tick is not positive: a parent
// package validates user input and returns an error instead.
func HierarchicalWheel(tick time.Duration) Structure {
	if tick <= 0 {
		panic("queue: HierarchicalWheel with non-positive tick")
	}
	return Structure{kind: kindHierarchical, tick: uint64(tick)}
}

// HashedWheel chooses Netty's hashed wheel with rounds, with the given
// tick and slots rounded up to a power of two (see hashedwheel.go). It
// panics if tick or slots is not positive or slots is over 2^30.
func HashedWheel(tick time.Duration, slots int) Structure {
	if tick <= 0 {
		panic("queue: HashedWheel with non-positive tick")
	}
	if slots <= 0 || slots > 1<<30 {
		panic("queue: HashedWheel with slots outside 1 to 2^30")
	}
	n := 1
	for n < slots {
		n <<= 1
	}
	return Structure{kind: kindHashed, tick: uint64(tick), slots: n}
}

// Heap chooses the 4-ary min-heap of Go's runtime timers (see heap.go):
// exact deadlines, O(log n) to add, move and remove.
func Heap() Structure { return Structure{kind: kindHeap} }

// SortedList chooses the sorted list, the baseline (see sortedlist.go):
// exact deadlines, O(n) to add.
func SortedList() Structure { return Structure{kind: kindList} }

// Slots reports a hashed wheel's number of slots, a power of two, and 0
// for the other structures.
func (s Structure) Slots() int { return s.slots }

// Levels reports a hierarchical wheel's number of levels, and 0 for the
// other structures.
func (s Structure) Levels() int {
	if s.kind != kindHierarchical {
		return 0
	}
	return levelCount(newLevels(s.tick).maxTick)
}

// structure is the contract every structure implements, over nodes named
// by int32 indices in a [table] that the structure does not own: [Queue]
// and [KeyQueue] choose the indices and call these methods. Neither reads
// the clock, locks or starts goroutines: time is the now passed to
// advance.
type structure[V any] interface {
	// add queues node i, not queued, at n.when.
	add(i int32, n *node[V])
	// remove takes queued node i out.
	remove(i int32, n *node[V])
	// move changes queued node i's deadline to when. A hierarchical wheel
	// only records a later one (see [structure.lazy]).
	move(i int32, n *node[V], when uint64)
	// relocate tells the structure that queued node n has been copied
	// to index to (a hash table's removal shifting its neighbours).
	relocate(to int32, n *node[V])
	// rehome is relocate for every node of a rebuilt table in turn:
	// moved maps the old link of a node that moved with n to its new one.
	rehome(i int32, n *node[V], moved func(link int32) (int32, bool))
	// next reports the earliest time advance has work to do.
	next() (uint64, bool)
	// advance moves time to now and hands each due node to release,
	// unlinked and uncounted, first those added already due. release may
	// call add, remove and move; a node it adds already due waits for the
	// next advance.
	advance(now uint64, release func(i int32, n *node[V]))
	// drain takes every node out, handing each to fn in no particular
	// order. fn must not call back.
	drain(fn func(i int32, n *node[V]))
	// size reports the number of queued nodes.
	size() int
}

// newStructure makes the structure s chooses, over t.
func newStructure[V any](s Structure, t *table[V]) structure[V] {
	switch s.kind {
	case kindHashed:
		return newHashedWheel(t, s.tick, s.slots)
	case kindHeap:
		return newHeap(t)
	case kindList:
		return newSortedList(t)
	}
	return newWheel(t, s.tick)
}

// lazy reports whether s records a later deadline without relinking: a
// Move later is then a store of the deadline (see wheel.go).
func (s Structure) lazy() bool { return s.kind == kindHierarchical }
