package queue_test

import (
	"fmt"

	"github.com/hourglass-go/hourglass/queue"
)

// Entry is a test's handle on one entry of a [Q]: the conformance suite,
// the model test and the fuzz target hold entries by handle, as a timer
// holds its timeouts, and check what the queue says of each id against
// what the handle remembers.
type Entry struct {
	Value int
	q     *Q     // the queue it is in, nil if none
	id    int32  // its id in q
	when  uint64 // the deadline it was last added with
}

// Queued reports whether e is in a queue.
func (e *Entry) Queued() bool { return e.q != nil }

// When reports the deadline e was last added with.
func (e *Entry) When() uint64 { return e.when }

// Q runs a queue.Queue for the tests, with entries' handles as values.
type Q struct {
	q    *queue.Queue[*Entry]
	byID []*Entry // the queued entries by id
}

func newQ(s queue.Structure) *Q { return &Q{q: queue.New[*Entry](s)} }

// Add queues e at when. It panics if e is queued.
func (a *Q) Add(e *Entry, when uint64) {
	if e.q != nil {
		panic("queue: Add of an entry that is already queued")
	}
	e.id, e.q, e.when = a.q.Add(when, e), a, when
	for int(e.id) >= len(a.byID) {
		a.byID = append(a.byID, nil)
	}
	a.byID[e.id] = e
}

// Remove takes e out of a and reports whether it was queued there.
func (a *Q) Remove(e *Entry) bool {
	if e.q != a {
		return false
	}
	if !a.q.Remove(e.id) {
		panic(fmt.Sprintf("queue: Remove of queued entry %d (id %d) = false", e.Value, e.id))
	}
	a.forget(e)
	return true
}

func (a *Q) forget(e *Entry) {
	a.byID[e.id] = nil
	e.q = nil
}

// Advance advances the queue, handing each fired entry to fire.
func (a *Q) Advance(now uint64, fire func(*Entry)) {
	a.q.Advance(now, func(id int32, e *Entry) {
		if e.q != a || e.id != id {
			panic(fmt.Sprintf("queue: id %d fired with entry %d, whose id is %d", id, e.Value, e.id))
		}
		a.forget(e)
		fire(e)
	})
}

func (a *Q) Next() (uint64, bool) { return a.q.Next() }
func (a *Q) Len() int             { return a.q.Len() }

// verify runs the queue's invariant checker, then checks every queued
// entry's id, deadline and value against its handle.
func verify(a *Q) error {
	if err := queue.Verify(a.q); err != nil {
		return err
	}
	n := 0
	for _, id := range []int32{-1, int32(len(a.byID)), 1 << 30} {
		if _, ok := a.q.Lookup(id); ok || a.q.Queued(id) {
			return fmt.Errorf("id %d, never handed out, is queued", id)
		}
	}
	for id, e := range a.byID {
		i := int32(id)
		if v, ok := a.q.Lookup(i); ok != (e != nil) || v != e {
			return fmt.Errorf("id %d: Lookup = %v, %v; want the entry queued there", id, v, ok)
		}
		if e == nil {
			continue
		}
		n++
		if !a.q.Queued(i) || a.q.When(i) != e.when || a.q.Value(i) != e {
			return fmt.Errorf("entry %d: id %d queued %v at %d with another value, want at %d", e.Value, id, a.q.Queued(i), a.q.When(i), e.when)
		}
	}
	if n != a.q.Len() {
		return fmt.Errorf("%d entries queued, Len %d", n, a.q.Len())
	}
	return nil
}
