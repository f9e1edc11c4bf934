package queue_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/queue"
)

// TestIndexWheel_Move runs random streams of Add, Move, Remove and Advance
// against a map of deadlines: each Advance must fire exactly the entries
// whose deadline's tick has been reached, moved ones at their new
// deadline, and never one early.
func TestIndexWheel_Move(t *testing.T) {
	for _, tick := range []time.Duration{time.Nanosecond, time.Millisecond, 100 * time.Millisecond} {
		for seed := range uint64(6) {
			t.Run(fmt.Sprintf("tick=%v/seed=%d", tick, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 7))
				w := queue.NewIndexWheel[int32](tick)
				deadlines := map[int32]uint64{}
				var now uint64
				span := func() uint64 {
					return uint64(rng.Int64N(int64([]time.Duration{time.Millisecond, time.Second, time.Minute, 100 * time.Hour}[rng.IntN(4)])))
				}
				for step := range 4000 {
					i := int32(rng.IntN(300))
					_, queued := deadlines[i]
					switch op := rng.IntN(10); {
					case op < 3 && !queued:
						when := now + span()
						w.Add(i, when, i)
						deadlines[i] = when
					case op < 6 && queued:
						when := now + span() // earlier or later than before
						w.Move(i, when)
						deadlines[i] = when
					case op < 7:
						if got := w.Remove(i); got != queued {
							t.Fatalf("step %d: Remove(%d) = %v, want %v", step, i, got, queued)
						}
						delete(deadlines, i)
					default:
						now += span() / 8
						var fired []int32
						w.Advance(now, func(i, v int32) {
							if v != i {
								t.Fatalf("step %d: entry %d fired with value %d", step, i, v)
							}
							fired = append(fired, i)
						})
						var want []int32
						for i, when := range deadlines {
							if ceil(when, uint64(tick)) <= now/uint64(tick) {
								want = append(want, i)
								delete(deadlines, i)
							}
						}
						slices.Sort(fired)
						slices.Sort(want)
						if !slices.Equal(fired, want) {
							t.Fatalf("step %d: Advance(%d) fired %v, want %v", step, now, fired, want)
						}
					}
					if w.Len() != len(deadlines) {
						t.Fatalf("step %d: Len = %d, want %d", step, w.Len(), len(deadlines))
					}
					for i, when := range deadlines {
						if !w.Queued(i) || w.When(i) != when {
							t.Fatalf("step %d: entry %d Queued %v When %d, want true %d", step, i, w.Queued(i), w.When(i), when)
						}
					}
					if err := queue.Verify(w); err != nil {
						t.Fatalf("step %d: %v", step, err)
					}
				}
				// Drain hands over exactly what is queued and leaves an
				// empty wheel that works as before.
				var drained, want []int32
				w.Drain(func(i, _ int32) { drained = append(drained, i) })
				for i := range deadlines {
					want = append(want, i)
				}
				slices.Sort(drained)
				slices.Sort(want)
				if !slices.Equal(drained, want) || w.Len() != 0 {
					t.Fatalf("Drain gave %v (Len %d after), want %v", drained, w.Len(), want)
				}
				if _, ok := w.Next(); ok {
					t.Fatal("Next reports work after Drain")
				}
				w.Add(0, now+1, 0)
				if err := queue.Verify(w); err != nil || !w.Queued(0) {
					t.Fatalf("after Drain and Add: Queued %v, %v", w.Queued(0), err)
				}
			})
		}
	}
}

func ceil(when, tick uint64) uint64 { return (when + tick - 1) / tick }

// filledIndexWheel returns a 1 ms wheel holding entries 0 to n-1 due 1-2 h
// away, its random source, and 2^22 random entries to operate on, all
// drawn before timing (more than there are entries, so that a run reaches
// all of the wheel).
func filledIndexWheel(n int) (*queue.IndexWheel[int32], *rand.Rand, []int32) {
	w := queue.NewIndexWheel[int32](time.Millisecond)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range n {
		w.Add(int32(i), uint64(time.Hour)+rng.Uint64N(uint64(time.Hour)), int32(i))
	}
	idx := make([]int32, 1<<22)
	for k := range idx {
		idx[k] = int32(rng.IntN(n))
	}
	return w, rng, idx
}

// BenchmarkIndexWheel_Move_Later pushes one of n deadlines back, as a
// heartbeat does: the lazy path that touches only the entry.
func BenchmarkIndexWheel_Move_Later(b *testing.B) {
	for _, n := range []int{1_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			w, _, idx := filledIndexWheel(n)
			b.ReportAllocs()
			k := 0
			for b.Loop() {
				i := idx[k&(len(idx)-1)]
				w.Move(i, w.When(i)+uint64(time.Second))
				k++
			}
		})
	}
}

// BenchmarkIndexWheel_AddRemove_Random removes one of n entries and adds it
// back at a new random deadline.
func BenchmarkIndexWheel_AddRemove_Random(b *testing.B) {
	for _, n := range []int{1_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			w, rng, idx := filledIndexWheel(n)
			whens := make([]uint64, len(idx))
			for k := range whens {
				whens[k] = uint64(time.Hour) + rng.Uint64N(uint64(time.Hour))
			}
			b.ReportAllocs()
			k := 0
			for b.Loop() {
				i := idx[k&(len(idx)-1)]
				w.Remove(i)
				w.Add(i, whens[k&(len(whens)-1)], i)
				k++
			}
		})
	}
}

// TestIndexWheel_MoveDueLater moves an entry that is already due (in the
// due list, or handed to fire and added back) to a later deadline: it must
// fire then, not at the old one. Left lazy, as a later move in a wheel
// slot is, it fired at once.
func TestIndexWheel_MoveDueLater(t *testing.T) {
	ms := uint64(time.Millisecond)
	w := queue.NewIndexWheel[int32](time.Millisecond)
	w.Advance(10*ms, func(int32, int32) {})
	w.Add(1, 10*ms, 1) // due: its tick has been reached
	w.Move(1, 20*ms)
	var fired []int32
	fire := func(i, _ int32) { fired = append(fired, i) }
	w.Advance(10*ms, fire)
	if len(fired) != 0 {
		t.Fatalf("fired %v at the old deadline", fired)
	}
	w.Advance(20*ms, fire)
	if !slices.Equal(fired, []int32{1}) {
		t.Fatalf("fired %v at the new deadline, want [1]", fired)
	}
	if err := queue.Verify(w); err != nil {
		t.Fatal(err)
	}
}
