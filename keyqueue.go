package hourglass

import (
	"math"

	"github.com/hourglass-go/hourglass/queue"
)

// keyQueue is the deadline structure behind a Timer shard or a Keyed:
// deadlines by int32 id, each with a value. [queue.IndexWheel] is one;
// entryQueue adapts the other structures.
type keyQueue[V any] interface {
	Add(id int32, when uint64, v V)
	Move(id int32, when uint64)
	Remove(id int32) bool
	When(id int32) uint64
	Advance(now uint64, fire func(id int32, v V))
	Next() (uint64, bool)
	Len() int
	// Drain takes every id out, handing each to fn in no particular order.
	Drain(fn func(id int32, v V))
}

var _ keyQueue[int] = (*queue.IndexWheel[int])(nil)

// entryQueue runs a Timer or a Keyed over one of the entry-based
// structures (hashed wheel, heap, sorted list), keeping their entries in
// pages by id. Unlike an IndexWheel it links entries by pointer, which the
// garbage collector follows, and a Move relinks.
type entryQueue[V any] struct {
	q     queue.Queue[idValue[V]]
	pages [][]queue.Entry[idValue[V]]
	fire  func(id int32, v V)              // Advance's, while it runs
	each  func(e *queue.Entry[idValue[V]]) // a.fireEntry, made once
}

// idValue is an entry's payload: its id and the caller's value.
type idValue[V any] struct {
	id int32
	v  V
}

const entryPage = 1 << 12

func newEntryQueue[V any](q queue.Queue[idValue[V]]) *entryQueue[V] {
	a := &entryQueue[V]{q: q}
	a.each = a.fireEntry
	return a
}

// entry returns id's entry, growing the pages to hold it.
func (a *entryQueue[V]) entry(id int32) *queue.Entry[idValue[V]] {
	p := int(id / entryPage)
	for p >= len(a.pages) {
		a.pages = append(a.pages, make([]queue.Entry[idValue[V]], entryPage))
	}
	return &a.pages[p][id%entryPage]
}

func (a *entryQueue[V]) Add(id int32, when uint64, v V) {
	e := a.entry(id)
	e.Value = idValue[V]{id, v}
	a.q.Add(e, when)
}

func (a *entryQueue[V]) Remove(id int32) bool {
	e := a.entry(id)
	if !a.q.Remove(e) {
		return false
	}
	e.Value = idValue[V]{} // let the value's referents go
	return true
}

func (a *entryQueue[V]) When(id int32) uint64 { return a.entry(id).When() }
func (a *entryQueue[V]) Next() (uint64, bool) { return a.q.Next() }
func (a *entryQueue[V]) Len() int             { return a.q.Len() }

func (a *entryQueue[V]) Move(id int32, when uint64) {
	e := a.entry(id)
	a.q.Remove(e)
	a.q.Add(e, when)
}

func (a *entryQueue[V]) Advance(now uint64, fire func(id int32, v V)) {
	a.fire = fire
	a.q.Advance(now, a.each)
	a.fire = nil
}

func (a *entryQueue[V]) fireEntry(e *queue.Entry[idValue[V]]) {
	iv := e.Value
	e.Value = idValue[V]{}
	a.fire(iv.id, iv.v)
}

// Drain empties the structure through Advance to the end of time.
func (a *entryQueue[V]) Drain(fn func(id int32, v V)) { a.Advance(math.MaxUint64, fn) }
