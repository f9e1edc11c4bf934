package queue_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/queue"
)

// moveStructures are the structures TestQueue_Move runs over, with the
// tick each rounds deadlines up to (0 for the exact ones).
var moveStructures = []struct {
	name string
	s    queue.Structure
	tick uint64
}{
	{"HierarchicalWheel/tick=1ns", queue.HierarchicalWheel(time.Nanosecond), 1},
	{"HierarchicalWheel/tick=1ms", queue.HierarchicalWheel(time.Millisecond), uint64(time.Millisecond)},
	{"HierarchicalWheel/tick=100ms", queue.HierarchicalWheel(100 * time.Millisecond), uint64(100 * time.Millisecond)},
	{"HashedWheel/tick=1ms/slots=64", queue.HashedWheel(time.Millisecond, 64), uint64(time.Millisecond)},
	{"Heap", queue.Heap(), 0},
	{"SortedList", queue.SortedList(), 0},
}

// TestQueue_Move runs random streams of Add, Move, Remove and Advance
// against a map of deadlines: each Advance must fire exactly the entries
// whose deadline's tick has been reached, moved ones at their new
// deadline, and never one early.
func TestQueue_Move(t *testing.T) {
	for _, ms := range moveStructures {
		for seed := range uint64(3) {
			t.Run(fmt.Sprintf("%s/seed=%d", ms.name, seed), func(t *testing.T) {
				t.Parallel()
				rng := rand.New(rand.NewPCG(seed, 7))
				q := queue.New[int32](ms.s)
				deadlines := map[int32]uint64{} // by entry
				ids := map[int32]int32{}        // entry to id
				var now uint64
				span := func() uint64 {
					return uint64(rng.Int64N(int64([]time.Duration{time.Millisecond, time.Second, time.Minute, 100 * time.Hour}[rng.IntN(4)])))
				}
				for step := range 3000 {
					e := int32(rng.IntN(300))
					_, queued := deadlines[e]
					switch op := rng.IntN(10); {
					case op < 3 && !queued:
						when := now + span()
						ids[e] = q.Add(when, e)
						deadlines[e] = when
					case op < 6 && queued:
						when := now + span() // earlier or later than before
						q.Move(ids[e], when)
						deadlines[e] = when
					case op < 7:
						if queued != (queued && q.Remove(ids[e])) {
							t.Fatalf("step %d: Remove(%d) = false, want true", step, e)
						}
						delete(deadlines, e)
						delete(ids, e)
					default:
						now += span() / 8
						var fired []int32
						q.Advance(now, func(id, e int32) {
							if ids[e] != id {
								t.Fatalf("step %d: id %d fired with entry %d, whose id is %d", step, id, e, ids[e])
							}
							fired = append(fired, e)
						})
						var want []int32
						for e, when := range deadlines {
							if due(when, ms.tick) <= now {
								want = append(want, e)
								delete(deadlines, e)
								delete(ids, e)
							}
						}
						slices.Sort(fired)
						slices.Sort(want)
						if !slices.Equal(fired, want) {
							t.Fatalf("step %d: Advance(%d) fired %v, want %v", step, now, fired, want)
						}
					}
					if q.Len() != len(deadlines) {
						t.Fatalf("step %d: Len = %d, want %d", step, q.Len(), len(deadlines))
					}
					for e, when := range deadlines {
						if id := ids[e]; !q.Queued(id) || q.When(id) != when || q.Value(id) != e {
							t.Fatalf("step %d: entry %d: Queued %v When %d Value %d, want true %d %d", step, e, q.Queued(id), q.When(id), q.Value(id), when, e)
						}
					}
					if err := queue.Verify(q); err != nil {
						t.Fatalf("step %d: %v", step, err)
					}
				}
				// Drain hands over exactly what is queued and leaves an
				// empty queue that works as before.
				var drained, want []int32
				q.Drain(func(_, e int32) { drained = append(drained, e) })
				for e := range deadlines {
					want = append(want, e)
				}
				slices.Sort(drained)
				slices.Sort(want)
				if !slices.Equal(drained, want) || q.Len() != 0 {
					t.Fatalf("Drain gave %v (Len %d after), want %v", drained, q.Len(), want)
				}
				if _, ok := q.Next(); ok {
					t.Fatal("Next reports work after Drain")
				}
				id := q.Add(now+1, 0)
				if err := queue.Verify(q); err != nil || !q.Queued(id) {
					t.Fatalf("after Drain and Add: Queued %v, %v", q.Queued(id), err)
				}
			})
		}
	}
}

// due returns the first time at which a structure of the given tick (0
// for an exact one) fires a deadline of when.
func due(when, tick uint64) uint64 {
	if tick == 0 {
		return when
	}
	return ceil(when, tick) * tick
}

func ceil(when, tick uint64) uint64 { return (when + tick - 1) / tick }

// TestQueue_MoveDueLater moves an entry that is already due (in the due
// list) to a later deadline: it must fire then, not at the old one. Left
// lazy, as a later move in a wheel slot is, it fired at once.
func TestQueue_MoveDueLater(t *testing.T) {
	ms := uint64(time.Millisecond)
	for _, m := range moveStructures {
		q := queue.New[int32](m.s)
		q.Advance(10*ms, func(int32, int32) {})
		id := q.Add(10*ms, 1) // due: its tick has been reached
		q.Move(id, 20*ms)
		var fired []int32
		fire := func(_, e int32) { fired = append(fired, e) }
		q.Advance(10*ms, fire)
		if len(fired) != 0 {
			t.Fatalf("%s: fired %v at the old deadline", m.name, fired)
		}
		q.Advance(due(20*ms, m.tick), fire)
		if !slices.Equal(fired, []int32{1}) {
			t.Fatalf("%s: fired %v at the new deadline, want [1]", m.name, fired)
		}
		if err := queue.Verify(q); err != nil {
			t.Fatal(err)
		}
	}
}
