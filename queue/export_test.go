package queue

import (
	"fmt"
	"time"
)

// Verify runs the invariant checker of q, which must be one of the package's
// structures (of any element type), and returns the first violation found.
// It lets the tests in package queue_test call verify after every step.
func Verify(q any) error {
	v, ok := q.(interface{ verify() error })
	if !ok {
		panic(fmt.Sprintf("queue: Verify of %T, which has no invariant checker", q))
	}
	return v.verify()
}

// IndexQueue adapts an IndexWheel to the Queue interface over entries
// whose Value is their index, so that the conformance suite, the model
// test and the fuzz target run over it as over the other structures.
type IndexQueue struct {
	W       *IndexWheel[*Entry[int]]
	entries []*Entry[int]
}

// NewIndexQueue returns an IndexQueue over a new IndexWheel of tick.
func NewIndexQueue(tick time.Duration) *IndexQueue {
	return &IndexQueue{W: NewIndexWheel[*Entry[int]](tick)}
}

func (q *IndexQueue) Add(e *Entry[int], when uint64) {
	if e.pos != 0 {
		panic("queue: Add of an entry that is already queued")
	}
	i := int32(e.Value)
	for int(i) >= len(q.entries) {
		q.entries = append(q.entries, nil)
	}
	q.entries[i] = e
	e.when, e.pos = when, posListed
	q.W.Add(i, when, e)
}

func (q *IndexQueue) Remove(e *Entry[int]) bool {
	if e.pos == 0 || !q.W.Remove(int32(e.Value)) {
		return false
	}
	e.pos = 0
	return true
}

func (q *IndexQueue) Advance(now uint64, fire func(*Entry[int])) {
	q.W.Advance(now, func(i int32, e *Entry[int]) {
		if e != q.entries[i] {
			panic(fmt.Sprintf("index wheel: entry %d fired with another's value", i))
		}
		e.pos = 0
		fire(e)
	})
}

func (q *IndexQueue) Next() (uint64, bool) { return q.W.Next() }
func (q *IndexQueue) Len() int             { return q.W.Len() }
func (q *IndexQueue) Levels() int          { return len(q.W.occupied) }

func (q *IndexQueue) verify() error {
	for i, e := range q.entries {
		if e != nil && e.Queued() != q.W.Queued(int32(i)) {
			return fmt.Errorf("index wheel: entry %d queued %v, adapter says %v", i, q.W.Queued(int32(i)), e.Queued())
		}
	}
	return q.W.verify()
}

// NewKeyWheelBits returns a KeyWheel whose tables hold at most 2^bits
// slots, so that tests reach table splits and directory doubling with
// few keys.
func NewKeyWheelBits[K comparable](tick time.Duration, bits uint) *KeyWheel[K] {
	return newKeyWheel[K](tick, bits)
}

// Tables reports how many hash tables w has and its directory's depth.
func (w *KeyWheel[K]) Tables() (tables int, depth uint) { return len(w.tables), w.depth }
