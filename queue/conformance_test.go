package queue_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/queue"
)

// This file is the conformance suite: every test runs over [structures], so
// the four structures a [queue.Queue] runs are held to one contract. The
// reference model that random operations are checked against is in
// model_test.go.

const ms = uint64(time.Millisecond)

// structure is one Queue implementation under test.
type structure struct {
	name string
	// tick is how late the structure may fire: the tick a wheel rounds
	// deadlines up to, or 0 for the exact heap and sorted list.
	tick uint64
	// ordered is whether one Advance fires in deadline order (to the tick).
	// The hashed wheel fires in slot order, which after a jump of more
	// than one turn is not deadline order.
	ordered bool
	new     func() *Q
	// maxSteps bounds the number of Advance(Next()) calls that fire n
	// entries, all due by the time last, starting at time 0.
	maxSteps func(q *Q, n int, last uint64) uint64
}

// structures returns the table the conformance suite runs over: one of each
// structure, the hashed wheel with 8 slots so that entries rounds away are
// common.
func structures() []structure {
	return []structure{
		hierarchicalWheel(time.Millisecond),
		hashedWheel(time.Millisecond, 8),
		{
			name: "Heap", ordered: true,
			new:      func() *Q { return newQ(queue.Heap()) },
			maxSteps: exactSteps,
		},
		{
			name: "SortedList", ordered: true,
			new:      func() *Q { return newQ(queue.SortedList()) },
			maxSteps: exactSteps,
		},
	}
}

func hierarchicalWheel(tick time.Duration) structure {
	return structure{
		name: fmt.Sprintf("HierarchicalWheel/tick=%v", tick), tick: uint64(tick), ordered: true,
		new: func() *Q { return newQ(queue.HierarchicalWheel(tick)) },
		// Each step fires something or cascades some entry one level down,
		// which happens at most once per level.
		maxSteps: func(_ *Q, n int, _ uint64) uint64 {
			return uint64(queue.Levels(tick)*n + n + 1)
		},
	}
}

func hashedWheel(tick time.Duration, slots int) structure {
	return structure{
		name: fmt.Sprintf("HashedWheel/tick=%v/slots=%d", tick, slots), tick: uint64(tick),
		new: func() *Q { return newQ(queue.HashedWheel(tick, slots)) },
		// Next is every tick while anything is queued.
		maxSteps: func(_ *Q, _ int, last uint64) uint64 {
			return fireAt(last, uint64(tick))/uint64(tick) + 2
		},
	}
}

// exactSteps bounds Advance(Next()) calls for the heap and the list, where
// every step fires at least one entry.
func exactSteps(_ *Q, n int, _ uint64) uint64 { return uint64(n + 1) }

// forEach runs test as a subtest for every structure.
func forEach(t *testing.T, test func(t *testing.T, s structure)) {
	for _, s := range structures() {
		t.Run(s.name, func(t *testing.T) { test(t, s) })
	}
}

// check fails the test if q breaks an invariant or does not hold n entries.
func check(t testing.TB, q *Q, n int) {
	t.Helper()
	if err := verify(q); err != nil {
		t.Fatal(err)
	}
	if got := q.Len(); got != n {
		t.Fatalf("Len = %d, want %d", got, n)
	}
}

// advance calls q.Advance(now) and returns the values of the entries it
// fired, in order, verifying q inside every fire callback and after.
func advance(t testing.TB, q *Q, now uint64) []int {
	t.Helper()
	var fired []int
	q.Advance(now, func(e *Entry) {
		if e.Queued() {
			t.Errorf("entry %d is still queued when fired", e.Value)
		}
		if err := verify(q); err != nil {
			t.Errorf("inside fire: %v", err)
		}
		fired = append(fired, e.Value)
	})
	if err := verify(q); err != nil {
		t.Fatal(err)
	}
	return fired
}

// wantFired fails the test unless got holds exactly the values in want, in
// any order.
func wantFired(t testing.TB, now uint64, got []int, want ...int) {
	t.Helper()
	got, want = slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		t.Fatalf("Advance(%d) fired %v, want %v", now, got, want)
	}
}

// newEntries returns n entries whose values are their indexes.
func newEntries(n int) []Entry {
	es := make([]Entry, n)
	for i := range es {
		es[i].Value = i
	}
	return es
}

// mustPanic fails the test unless f panics.
func mustPanic(t testing.TB, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s did not panic", what)
		}
	}()
	f()
}

func TestEmpty(t *testing.T) {
	forEach(t, func(t *testing.T, s structure) {
		q := s.new()
		check(t, q, 0)
		for _, now := range []uint64{0, 1, uint64(time.Hour), math.MaxUint64 - 1, math.MaxUint64} {
			if at, ok := q.Next(); ok {
				t.Fatalf("Next = %d, true on an empty queue", at)
			}
			wantFired(t, now, advance(t, q, now))
			check(t, q, 0)
		}
	})
}

func TestFireAtDeadline(t *testing.T) {
	deadlines := []uint64{1, ms - 1, ms, ms + 1, 2*ms + ms/2, 7 * ms, 64*ms + 3, 4096*ms + 1, 123456789, uint64(time.Second)}
	forEach(t, func(t *testing.T, s structure) {
		for _, when := range deadlines {
			q := s.new()
			var e Entry
			q.Add(&e, when)
			check(t, q, 1)
			due := fireAt(when, s.tick)
			// The contract: exact, or never early and less than a tick late.
			if s.tick == 0 && due != when || due-when >= max(s.tick, 1) {
				t.Fatalf("fireAt(%d) = %d", when, due)
			}
			// Not a nanosecond early, even at the deadline itself when
			// a wheel rounds it up.
			for _, now := range []uint64{0, when - 1, when, due - 1} {
				if now >= due {
					continue
				}
				if at, ok := q.Next(); !ok || at > due {
					t.Fatalf("deadline %d: Next = %d, %v, want at most %d", when, at, ok, due)
				}
				wantFired(t, now, advance(t, q, now))
				check(t, q, 1)
			}
			wantFired(t, due, advance(t, q, due), 0)
			check(t, q, 0)
			if e.When() != when {
				t.Fatalf("When = %d after firing, want %d", e.When(), when)
			}
		}
	})
}

// TestFireTime steps time in uneven strides through many deadlines: each
// entry must fire on the first Advance that reaches its deadline (rounded up
// to a tick for the wheels), not before and not after.
func TestFireTime(t *testing.T) {
	forEach(t, func(t *testing.T, s structure) {
		q := s.new()
		rng := rand.New(rand.NewPCG(1, 2))
		es := newEntries(500)
		for i := range es {
			q.Add(&es[i], rng.Uint64N(50*ms))
		}
		var prev uint64
		for now := uint64(0); q.Len() > 0; now += 137 * uint64(time.Microsecond) {
			for _, v := range advance(t, q, now) {
				due := fireAt(es[v].When(), s.tick)
				if due > now || (now > 0 && due <= prev) {
					t.Fatalf("entry due at %d (deadline %d) fired by Advance(%d) after Advance(%d)", due, es[v].When(), now, prev)
				}
			}
			for i := range es {
				if es[i].Queued() && fireAt(es[i].When(), s.tick) <= now {
					t.Fatalf("entry %d due at %d still queued at %d", i, es[i].When(), now)
				}
			}
			prev = now
		}
	})
}

func TestRemove(t *testing.T) {
	forEach(t, func(t *testing.T, s structure) {
		q := s.new()
		var zero Entry
		if q.Remove(&zero) {
			t.Fatal("Remove of a never-queued entry = true")
		}
		es := newEntries(10)
		for i := range es {
			q.Add(&es[i], uint64(i+1)*ms)
		}
		check(t, q, 10)
		for _, i := range []int{0, 5, 9} {
			if !q.Remove(&es[i]) {
				t.Fatalf("Remove of queued entry %d = false", i)
			}
			if es[i].Queued() {
				t.Fatalf("entry %d still Queued after Remove", i)
			}
			if q.Remove(&es[i]) {
				t.Fatalf("second Remove of entry %d = true", i)
			}
		}
		check(t, q, 7)
		// An entry already due when added waits in the due list; Remove
		// takes it from there too.
		advance(t, q, 2*ms)
		check(t, q, 6)
		q.Add(&es[0], ms)
		check(t, q, 7)
		if !q.Remove(&es[0]) || q.Remove(&es[0]) {
			t.Fatal("Remove of an entry added already due did not report true, then false")
		}
		check(t, q, 6)
		wantFired(t, math.MaxUint64, advance(t, q, math.MaxUint64), 2, 3, 4, 6, 7, 8)
		check(t, q, 0)
		// A removed entry can be added again.
		q.Add(&es[5], math.MaxUint64)
		wantFired(t, math.MaxUint64, advance(t, q, math.MaxUint64), 5)
	})
}

func TestPastDeadlines(t *testing.T) {
	forEach(t, func(t *testing.T, s structure) {
		q := s.new()
		now := uint64(10 * time.Second)
		advance(t, q, now)
		es := newEntries(5)
		for i, when := range []uint64{0, 1, now / 2, now - 1, now} {
			q.Add(&es[i], when)
		}
		check(t, q, 5)
		if at, ok := q.Next(); !ok || at != now {
			t.Fatalf("Next = %d, %v with entries already due, want %d, true", at, ok, now)
		}
		wantFired(t, now, advance(t, q, now), 0, 1, 2, 3, 4)
		check(t, q, 0)

		// Mid-tick, a deadline that has passed but whose tick has not
		// fires on the wheels at the tick boundary: never before it.
		now += ms / 2
		advance(t, q, now)
		when := now - ms/4
		q.Add(&es[0], when)
		due := fireAt(when, s.tick)
		if due <= now {
			wantFired(t, now, advance(t, q, now), 0)
		} else {
			wantFired(t, now, advance(t, q, now))
			wantFired(t, due, advance(t, q, due), 0)
		}
		check(t, q, 0)
	})
}

func TestFarDeadlines(t *testing.T) {
	const (
		hour = uint64(time.Hour)
		year = 365 * 24 * hour
	)
	deadlines := []uint64{ms, hour, hour + 1, year, 100 * year, 500 * year, math.MaxUint64 - ms, math.MaxUint64 - 1, math.MaxUint64}
	times := []uint64{0, ms - 1, ms, hour - 1, hour, hour + ms, year - 1, year, 100*year + 1, 500 * year,
		math.MaxUint64 - 2*ms, math.MaxUint64 - ms, math.MaxUint64 - 2, math.MaxUint64 - 1, math.MaxUint64}
	forEach(t, func(t *testing.T, s structure) {
		c := newChecked(t, s)
		es := newEntries(len(deadlines))
		for i, when := range deadlines {
			c.Add(&es[i], when) // checks Next against the earliest deadline
		}
		for _, now := range times {
			c.Advance(now, nil) // checks nothing fires early or stays late
		}
		check(t, c.q, 0)
	})
}

func TestAdvanceBackwards(t *testing.T) {
	forEach(t, func(t *testing.T, s structure) {
		q := s.new()
		es := newEntries(2)
		q.Add(&es[0], 15*ms)
		wantFired(t, 10*ms, advance(t, q, 10*ms))
		wantFired(t, 5*ms, advance(t, q, 5*ms))
		wantFired(t, 14*ms, advance(t, q, 14*ms))
		// Time is 14ms, however far back the Advance: 9ms is past.
		advance(t, q, 0)
		q.Add(&es[1], 9*ms)
		if at, ok := q.Next(); !ok || at != 14*ms {
			t.Fatalf("Next = %d, %v, want 14ms, true", at, ok)
		}
		wantFired(t, ms, advance(t, q, ms), 1)
		wantFired(t, 14*ms, advance(t, q, 14*ms))
		wantFired(t, 15*ms, advance(t, q, 15*ms), 0)
		check(t, q, 0)
	})
}

// TestReAddInFire re-adds each fired entry with a deadline already reached:
// it must fire on the next Advance, so one Advance fires it once and ends.
func TestReAddInFire(t *testing.T) {
	forEach(t, func(t *testing.T, s structure) {
		q := s.new()
		es := newEntries(2)
		q.Add(&es[0], ms)
		q.Add(&es[1], 3*ms)
		now := 2 * ms
		for round := range 3 {
			n := 0
			q.Advance(now, func(e *Entry) {
				n++
				check(t, q, 1)
				q.Add(e, now-uint64(round)) // at or before now
				check(t, q, 2)
			})
			check(t, q, 2)
			if n != 1 {
				t.Fatalf("round %d: Advance fired %d times, want 1", round, n)
			}
			if !es[0].Queued() || es[1].When() != 3*ms {
				t.Fatalf("round %d: wrong entry fired", round)
			}
			if at, ok := q.Next(); !ok || at != now {
				t.Fatalf("round %d: Next = %d, %v, want %d, true", round, at, ok, now)
			}
		}
		// Re-added into the future instead, it fires there.
		q.Advance(now, func(e *Entry) { q.Add(e, 3*ms) })
		check(t, q, 2)
		wantFired(t, 3*ms, advance(t, q, 3*ms), 0, 1)
	})
}

// TestRemoveInFire removes, from the fire callback, an entry that is due in
// the same Advance: it must not fire.
func TestRemoveInFire(t *testing.T) {
	forEach(t, func(t *testing.T, s structure) {
		q := s.new()
		es := newEntries(4)
		for i := range 3 {
			q.Add(&es[i], ms) // all due at once
		}
		q.Add(&es[3], 0) // and one in the due list
		var fired []int
		q.Advance(ms, func(e *Entry) {
			fired = append(fired, e.Value)
			if len(fired) > 1 {
				return
			}
			check(t, q, 3)
			if q.Remove(e) {
				t.Error("Remove of the entry being fired = true")
			}
			// Every other entry is staged to fire: Remove stops it.
			for i := range es {
				if &es[i] != e && !q.Remove(&es[i]) {
					t.Errorf("Remove of due entry %d = false", i)
				}
			}
			check(t, q, 0)
		})
		if len(fired) != 1 {
			t.Fatalf("fired %v, want one entry", fired)
		}
		check(t, q, 0)
		wantFired(t, math.MaxUint64, advance(t, q, math.MaxUint64))
	})
}

func TestAdvanceInFirePanics(t *testing.T) {
	forEach(t, func(t *testing.T, s structure) {
		q := s.new()
		es := newEntries(3)
		for i := range es {
			q.Add(&es[i], ms)
		}
		n := 0
		q.Advance(ms, func(*Entry) {
			n++
			mustPanic(t, "Advance from fire", func() { q.Advance(2*ms, func(*Entry) {}) })
		})
		if n != 3 {
			t.Fatalf("fired %d entries, want 3", n)
		}
		check(t, q, 0)

		// A panic that escapes Advance leaves the rest of what was due
		// queued, counted, reported by Next, and fired by the next Advance.
		for i := range es {
			q.Add(&es[i], 2*ms)
		}
		mustPanic(t, "fire callback", func() {
			q.Advance(2*ms, func(*Entry) { panic("callback") })
		})
		check(t, q, 2)
		if at, ok := q.Next(); !ok || at != 2*ms {
			t.Fatalf("after a panicking fire, Next = %d, %v, want %d, true", at, ok, 2*ms)
		}
		if got := advance(t, q, 2*ms); len(got) != 2 {
			t.Fatalf("after a panicking fire, Advance fired %v, want the other two", got)
		}
		check(t, q, 0)
	})
}

func TestEqualDeadlines(t *testing.T) {
	forEach(t, func(t *testing.T, s structure) {
		q := s.new()
		es := newEntries(300)
		var want []int
		for i := range es {
			q.Add(&es[i], 5*ms+uint64(i%3)*uint64(time.Hour))
			if i%3 == 0 {
				want = append(want, i)
			}
		}
		check(t, q, 300)
		got := advance(t, q, 5*ms)
		wantFired(t, 5*ms, got, want...)
		if s.name == "SortedList" && !slices.IsSorted(got) {
			t.Fatalf("equal deadlines fired out of the order added: %v", got)
		}
		check(t, q, 200)
	})
}

func TestDrain(t *testing.T) {
	forEach(t, func(t *testing.T, s structure) {
		q := s.new()
		rng := rand.New(rand.NewPCG(3, 4))
		es := newEntries(1000)
		q.Add(&es[0], math.MaxUint64)
		for i := 1; i < len(es); i++ {
			// Spread over every order of magnitude of the uint64 range.
			q.Add(&es[i], rng.Uint64()>>rng.UintN(64))
		}
		check(t, q, 1000)
		if got := advance(t, q, math.MaxUint64); len(got) != 1000 {
			t.Fatalf("Advance(MaxUint64) fired %d of 1000", len(got))
		}
		check(t, q, 0)
		if _, ok := q.Next(); ok {
			t.Fatal("Next reports work after a drain")
		}
		// At the end of time every deadline is due.
		q.Add(&es[1], 0)
		q.Add(&es[2], math.MaxUint64)
		wantFired(t, math.MaxUint64, advance(t, q, 0), 1, 2)
	})
}

// TestNextContract drives each structure the way a timer driver does, by
// sleeping until Next and advancing to it. Every step must make progress:
// fire something or, for the hierarchical wheel's cascades and the hashed
// wheel's empty ticks, move Next later. Entries fire in deadline order (to
// the tick for wheels), and the number of steps is bounded.
func TestNextContract(t *testing.T) {
	shapes := []struct {
		name      string
		deadlines func(*rand.Rand) uint64
	}{
		{"near", func(r *rand.Rand) uint64 { return r.Uint64N(300) * ms / 3 }},
		{"spread", func(r *rand.Rand) uint64 { return r.Uint64N(uint64(10 * time.Minute)) }},
		{"far", func(r *rand.Rand) uint64 { return r.Uint64() >> r.UintN(64) }},
	}
	forEach(t, func(t *testing.T, s structure) {
		for _, shape := range shapes {
			t.Run(shape.name, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(5, 6))
				c := newChecked(t, s)
				es := newEntries(400)
				var last uint64
				for i := range es {
					when := shape.deadlines(rng)
					c.Add(&es[i], when)
					last = max(last, when)
				}
				bound := s.maxSteps(c.q, len(es), last)
				if bound > 1e5 {
					t.Skipf("draining takes %d steps", bound)
				}
				var steps, prevDue uint64
				for c.q.Len() > 0 {
					if steps++; steps > bound {
						t.Fatalf("not drained after %d steps", bound)
					}
					at, _ := c.q.Next()
					fired := c.Advance(at, nil)
					for _, e := range fired {
						due := fireAt(e.When(), s.tick)
						if due < prevDue {
							t.Fatalf("entry due at %d fired after one due at %d", due, prevDue)
						}
						prevDue = due
					}
					if next, ok := c.q.Next(); len(fired) == 0 && ok && next <= at {
						t.Fatalf("Advance(Next() = %d) fired nothing and Next stays %d", at, next)
					}
				}
			})
		}
	})
}

func TestEntry(t *testing.T) {
	forEach(t, func(t *testing.T, s structure) {
		q := s.new()
		e := Entry{Value: 42}
		if e.Queued() || e.When() != 0 {
			t.Fatal("zero Entry is queued or has a deadline")
		}
		q.Add(&e, 7*ms)
		if !e.Queued() || e.When() != 7*ms {
			t.Fatalf("after Add: Queued = %v, When = %d", e.Queued(), e.When())
		}
		q.Advance(7*ms, func(f *Entry) {
			if f != &e || f.Value != 42 {
				t.Fatalf("fired %v, want the entry added", f)
			}
		})
		if e.Queued() || e.When() != 7*ms {
			t.Fatalf("after firing: Queued = %v, When = %d", e.Queued(), e.When())
		}
		// Fired, it can move to another queue.
		other := s.new()
		other.Add(&e, 8*ms)
		wantFired(t, 8*ms, advance(t, other, 8*ms), 42)
	})
}

func TestConstructors(t *testing.T) {
	mustPanic(t, "HashedWheel(0, 8)", func() { queue.HashedWheel(0, 8) })
	mustPanic(t, "HashedWheel(1ms, 0)", func() { queue.HashedWheel(time.Millisecond, 0) })
	mustPanic(t, "HashedWheel(1ms, 2^30+1)", func() { queue.HashedWheel(time.Millisecond, 1<<30+1) })
	mustPanic(t, "HierarchicalWheel(-1)", func() { queue.HierarchicalWheel(-1) })
	for _, tc := range []struct{ slots, want int }{{1, 1}, {2, 2}, {5, 8}, {512, 512}, {513, 1024}} {
		if got := queue.HashedWheel(time.Millisecond, tc.slots).Slots(); got != tc.want {
			t.Errorf("HashedWheel(1ms, %d).Slots() = %d, want %d", tc.slots, got, tc.want)
		}
	}
	// Level 0 of 10 bits, then levels of 6 bits each until the tick
	// count of math.MaxUint64 fits.
	for _, tc := range []struct {
		tick time.Duration
		want int
	}{{1, 10}, {time.Microsecond, 9}, {time.Millisecond, 7}, {100 * time.Millisecond, 6}} {
		if got := queue.HierarchicalWheel(tc.tick).Levels(); got != tc.want {
			t.Errorf("HierarchicalWheel(%v).Levels() = %d, want %d", tc.tick, got, tc.want)
		}
	}
}

// TestRemoveIf checks that RemoveIf removes only what match accepts, sees
// the entry's own value, and leaves the queue as it was when match
// refuses or the id is not queued.
func TestRemoveIf(t *testing.T) {
	forEach(t, func(t *testing.T, s structure) {
		q := s.new()
		es := newEntries(6)
		for i := range es {
			q.Add(&es[i], uint64(i+1)*ms)
		}
		refuse := func(**Entry) bool { return false }
		for _, id := range []int32{-1, 6, 1 << 30} {
			if q.q.RemoveIf(id, func(**Entry) bool { t.Fatal("match called for an id never handed out"); return true }) {
				t.Fatalf("RemoveIf(%d) of an id never handed out = true", id)
			}
		}
		for i := range es {
			if q.q.RemoveIf(es[i].id, refuse) {
				t.Fatalf("RemoveIf of entry %d refused by match = true", i)
			}
		}
		check(t, q, 6)
		// Remove the odd entries, each seen through its own value.
		for i := range es {
			e := &es[i]
			id := e.id
			got := q.q.RemoveIf(id, func(v **Entry) bool {
				if *v != e {
					t.Fatalf("match of id %d saw entry %d, want %d", id, (*v).Value, e.Value)
				}
				return e.Value%2 == 1
			})
			if got != (e.Value%2 == 1) {
				t.Fatalf("RemoveIf of entry %d = %v", e.Value, got)
			}
			if got {
				q.forget(e)
				if q.q.RemoveIf(id, nil) {
					t.Fatalf("second RemoveIf of entry %d = true", e.Value)
				}
			}
		}
		check(t, q, 3)
		wantFired(t, math.MaxUint64, advance(t, q, math.MaxUint64), 0, 2, 4)
	})
}
