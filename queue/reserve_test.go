package queue_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/hourglass-go/hourglass/queue"
)

// TestReserve_Model runs random streams of Reserve, Add, RemoveIf, Move,
// FileReserved and Advance on every structure against a map of what is
// queued: a reserved entry is queued for Queued, When, Value, RemoveIf
// and Move until filed, and Reserved counts it; FileReserved reports
// the earliest deadline filed since it last said or the last Advance;
// every entry fires once, never before its deadline (to the tick) and
// by the first Advance at or after it, whether it was filed by
// FileReserved, by Reserve's bound, or by Advance, Next or Len first.
func TestReserve_Model(t *testing.T) {
	for seed := range uint64(4) {
		for _, s := range structures() {
			t.Run(fmt.Sprintf("seed=%d/%s", seed, s.name), func(t *testing.T) {
				runReserveOps(t, s, rand.New(rand.NewPCG(seed, 1)), 3000)
			})
		}
	}
}

func runReserveOps(t *testing.T, s structure, rng *rand.Rand, steps int) {
	q := s.new().q // a Queue[*Entry], the entries made here
	type want struct {
		when     uint64
		reserved bool
	}
	queued := map[int32]want{} // by id; the value is the id's serial
	serial := map[int32]int{}
	next := 0
	now := uint64(0)
	filedMin := uint64(math.MaxUint64) // the earliest filed since FileReserved said
	file := func() {
		for id, w := range queued {
			if w.reserved {
				filedMin = min(filedMin, w.when)
				queued[id] = want{when: w.when}
			}
		}
	}
	verify := func(step int, what string) {
		t.Helper()
		if err := queue.Verify(q); err != nil {
			t.Fatalf("step %d, after %s: %v", step, what, err)
		}
	}
	pick := func() int32 { // a queued id, or -1
		for id := range queued {
			return id
		}
		return -1
	}
	for step := range steps {
		switch r := rng.IntN(100); {
		case r < 35: // Reserve
			when := now + rng.Uint64N(64*64)*ms/8
			if len(queued) >= 2000 {
				continue
			}
			reservedBefore := 0
			for _, w := range queued {
				if w.reserved {
					reservedBefore++
				}
			}
			id := q.Reserve(when, &Entry{Value: next})
			if _, ok := queued[id]; ok {
				t.Fatalf("step %d: Reserve handed out queued id %d", step, id)
			}
			if reservedBefore == 1024 { // the bound: Reserve filed them
				file()
			}
			queued[id], serial[id] = want{when: when, reserved: true}, next
			next++
			verify(step, "Reserve")
		case r < 45: // Add
			when := now + rng.Uint64N(64*64)*ms/8
			id := q.Add(when, &Entry{Value: next})
			queued[id], serial[id] = want{when: when}, next
			next++
		case r < 65: // RemoveIf, with match refusing now and then
			id := pick()
			if id < 0 {
				continue
			}
			refuse := rng.IntN(4) == 0
			got := q.RemoveIf(id, func(v **Entry) bool {
				if (*v).Value != serial[id] {
					t.Fatalf("step %d: RemoveIf(%d) saw value %d, want %d", step, id, (*v).Value, serial[id])
				}
				return !refuse
			})
			if got == refuse {
				t.Fatalf("step %d: RemoveIf(%d) = %v with match refusing %v", step, id, got, refuse)
			}
			if got {
				delete(queued, id)
				if q.Queued(id) || q.RemoveIf(id, nil) {
					t.Fatalf("step %d: id %d still queued after RemoveIf", step, id)
				}
			}
			verify(step, "RemoveIf")
		case r < 72: // Move, earlier or later
			id := pick()
			if id < 0 {
				continue
			}
			w := queued[id]
			w.when = now + rng.Uint64N(64*64)*ms/8
			q.Move(id, w.when)
			queued[id] = w
			verify(step, "Move")
		case r < 80: // FileReserved
			file()
			if got := q.FileReserved(); got != filedMin {
				t.Fatalf("step %d: FileReserved = %d, want %d", step, got, filedMin)
			}
			filedMin = math.MaxUint64
			verify(step, "FileReserved")
		case r < 83: // Len, which files first
			file()
			if got := q.Len(); got != len(queued) {
				t.Fatalf("step %d: Len = %d, want %d", step, got, len(queued))
			}
		default: // Advance, by Next or by a step of time
			file()
			filedMin = math.MaxUint64 // what Advance files, FileReserved leaves out
			to := now + rng.Uint64N(64)*ms
			if rng.IntN(2) == 0 {
				if at, ok := q.Next(); ok {
					to = max(at, now)
				}
			}
			q.Advance(to, func(id int32, v *Entry) {
				w, ok := queued[id]
				if !ok || v.Value != serial[id] {
					t.Fatalf("step %d: Advance(%d) fired id %d value %d, queued %v", step, to, id, v.Value, ok)
				}
				if fireAt(w.when, s.tick) > to {
					t.Fatalf("step %d: Advance(%d) fired id %d due %d early", step, to, id, w.when)
				}
				delete(queued, id)
			})
			for id, w := range queued {
				if fireAt(w.when, s.tick) <= to {
					t.Fatalf("step %d: Advance(%d) left id %d due %d", step, to, id, w.when)
				}
			}
			now = to
			verify(step, "Advance")
		}
		reserved := 0
		for id, w := range queued {
			if w.reserved {
				reserved++
			}
			if !q.Queued(id) || q.When(id) != w.when || q.Value(id).Value != serial[id] {
				t.Fatalf("step %d: id %d: Queued %v When %d Value %d, want when %d value %d",
					step, id, q.Queued(id), q.When(id), q.Value(id).Value, w.when, serial[id])
			}
		}
		if got := q.Reserved(); got != reserved {
			t.Fatalf("step %d: Reserved = %d, want %d", step, got, reserved)
		}
	}
}

// TestReserve_Bound reserves more entries than wait unfiled at once, so
// that Reserve files the first ones itself, cancels every third, and
// checks that FileReserved reports the earliest of all those filed and
// that every entry left fires once.
func TestReserve_Bound(t *testing.T) {
	forEach(t, func(t *testing.T, s structure) {
		q := s.new().q
		const n = 3000
		ids := make([]int32, n)
		for i := range ids {
			ids[i] = q.Reserve(uint64(n-i)*ms, &Entry{Value: i})
		}
		for i := 0; i < n; i += 3 {
			if !q.RemoveIf(ids[i], nil) {
				t.Fatalf("RemoveIf of reserved entry %d = false", i)
			}
		}
		if err := queue.Verify(q); err != nil {
			t.Fatal(err)
		}
		// The last entry, due at 1 ms, is the earliest; entry n-1 is
		// cancelled if (n-1)%3 == 0, which it is not.
		if got := q.FileReserved(); got != 1*ms {
			t.Fatalf("FileReserved = %d, want %d", got, 1*ms)
		}
		if got := q.FileReserved(); got != math.MaxUint64 {
			t.Fatalf("second FileReserved = %d, want none", got)
		}
		fired := make([]bool, n)
		q.Advance(math.MaxUint64, func(_ int32, e *Entry) {
			if e.Value%3 == 0 || fired[e.Value] {
				t.Fatalf("entry %d fired, cancelled %v, fired before %v", e.Value, e.Value%3 == 0, fired[e.Value])
			}
			fired[e.Value] = true
		})
		for i, f := range fired {
			if !f && i%3 != 0 {
				t.Fatalf("entry %d did not fire", i)
			}
		}
	})
}
