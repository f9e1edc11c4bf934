package hourglass_test

import (
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hourglass-go/hourglass"
)

// coarse are the four structures with a tick of 100 ms where they have one.
var coarse = []struct {
	name string
	opt  hourglass.Option
}{
	{"HierarchicalWheel", hourglass.WithHierarchicalWheel(100 * ms)},
	{"HashedWheel", hourglass.WithHashedWheel(100*ms, 8)},
	{"Heap", hourglass.WithHeap()},
	{"SortedList", hourglass.WithSortedList()},
}

// TestTimer_DueAtOnceOnCoarseTick checks that a timeout whose deadline has
// already come when it is scheduled runs at once, with no virtual time
// passing, however long the tick: AfterFunc with d ≤ 0, AtFunc in the
// past, Reset with d ≤ 0 of a pending and of an expired timeout, and the
// first run of a periodic timeout with no initial delay. A wheel rounds a
// deadline up to its next tick so as never to fire early, which must not
// hold back one that has already come (AfterFunc(0) must not wait up to
// a whole 100 ms tick while AtFunc in the past runs at once). Deadline
// reports the instant of the call, not a rounded one.
func TestTimer_DueAtOnceOnCoarseTick(t *testing.T) {
	for _, s := range coarse {
		t.Run(s.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tm := hourglass.New(s.opt, hourglass.WithShards(1))
				defer tm.Stop()
				// Off the tick grid, with the driver asleep until an hour
				// from now.
				must(t)(tm.AfterFunc(time.Hour, func() {}))
				advance(30*ms + 7*µs)

				r := newRecorder()
				zero := must(t)(tm.AfterFunc(0, r.fn(0)))
				must(t)(tm.AfterFunc(-time.Hour, r.fn(1)))
				must(t)(tm.AfterFunc(math.MinInt64, r.fn(2)))
				must(t)(tm.AtFunc(time.Now().Add(-time.Hour), r.fn(3)))
				moved := must(t)(tm.AfterFunc(time.Hour, r.fn(4)))
				moved.Reset(0)
				rate := must(t)(tm.ScheduleAtFixedRate(0, time.Hour, r.fn(5)))
				delay := must(t)(tm.ScheduleWithFixedDelay(-time.Second, time.Hour, r.fn(6)))
				if got, want := zero.Deadline(), time.Now(); !got.Equal(want) {
					t.Errorf("AfterFunc(0): Deadline() = %v, want the time of the call, %v", got, want)
				}
				synctest.Wait()
				for key := range 7 {
					if at := r.at(key); len(at) != 1 || at[0] != 0 {
						t.Errorf("timeout %d, due at once, ran at %v, want once at 0 (no virtual time passing)", key, at)
					}
				}

				// Once more after the driver has gone back to sleep: a
				// Reset(0) of an expired timeout, and a pending one filed
				// in the structure before it is moved to now.
				advance(30 * ms)
				r = newRecorder()
				filed := must(t)(tm.AfterFunc(time.Hour, r.fn(1)))
				tm.Pending() // files it
				filed.Reset(-ms)
				zero.Reset(0)
				must(t)(tm.AfterFunc(0, r.fn(2)))
				synctest.Wait()
				if at := r.at(1); len(at) != 1 || at[0] != 0 {
					t.Errorf("filed timeout Reset(-1ms) ran at %v, want once at 0", at)
				}
				if at := r.at(2); len(at) != 1 || at[0] != 0 {
					t.Errorf("AfterFunc(0) ran at %v, want once at 0", at)
				}
				if !zero.Expired() {
					t.Error("expired timeout Reset(0): not run at once")
				}
				rate.Cancel()
				delay.Cancel()
			})
		})
	}
}

// TestKeyed_DueAtOnceOnCoarseTick checks the same for a Keyed: a key set
// with d ≤ 0, new or pending, expires at once on a 100 ms tick.
func TestKeyed_DueAtOnceOnCoarseTick(t *testing.T) {
	for _, s := range coarse {
		t.Run(s.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var r *recorder
				k := hourglass.NewKeyed(func(key int) { r.record(key) }, s.opt)
				defer k.Stop()
				must0(t, k.Set(100, time.Hour))
				advance(30*ms + 7*µs)
				r = newRecorder()

				must0(t, k.Set(0, 0))
				must0(t, k.Set(1, -time.Hour))
				if _, err := k.SetMany([]int{2, 3}, 0); err != nil {
					t.Fatal(err)
				}
				must0(t, k.Set(4, time.Hour))
				k.Len() // applies the Sets
				must0(t, k.Set(4, 0))
				synctest.Wait()
				for key := range 5 {
					if at := r.at(key); len(at) != 1 || at[0] != 0 {
						t.Errorf("key %d, due at once, expired at %v, want once at 0 (no virtual time passing)", key, at)
					}
				}
			})
		})
	}
}

func must0(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestTimeout_DeadlineSaturates checks what the doc of Timeout.Deadline
// says of far deadlines: a Timer holds deadlines up to 2·math.MaxInt64 ns
// (about 584 years) after New exactly, and a later one, such as AtFunc in
// the year 9999, saturates there: it runs then, and Deadline reports that
// instant, not one it will not keep.
func TestTimeout_DeadlineSaturates(t *testing.T) {
	forEachStructure(t, func(t *testing.T, s structure) {
		start := time.Now()
		tm := s.newTimer(t)
		horizon := start.Add(math.MaxInt64).Add(math.MaxInt64)
		for _, c := range []struct{ when, want time.Time }{
			{horizon.Add(-1), horizon.Add(-1)},
			{horizon, horizon},
			{horizon.Add(1), horizon},
			{time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC), horizon},
		} {
			to := must(t)(tm.AtFunc(c.when, func() {}))
			if got := to.Deadline(); !got.Equal(c.want) {
				t.Errorf("AtFunc(%v): Deadline() = %v, want %v", c.when, got, c.want)
			}
		}
		// The latest reading there is, reached by a periodic timeout whose
		// next run saturates, is one nanosecond later: not before start.
		if got, want := hourglass.TimeOfReading(tm, math.MaxUint64), horizon.Add(1); !got.Equal(want) {
			t.Errorf("the time of reading 2^64-1 = %v, want %v", got, want)
		}
		tm.Stop()
	})
}
