package hourglass_test

import (
	"math"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass"
)

// The tests of the yield that ends a scheduling call while the timer is
// behind (driver.settle): firing comes before scheduling.

// TestSettle_YieldsWhileCallbacksWait checks that a scheduling call gives
// up its P while more than WaitingMax callbacks wait to start, and returns
// once they have: on one P, the goroutine that starts them (here, one
// that counts 100 down each time it runs) runs only when the caller
// yields.
func TestSettle_YieldsWhileCallbacksWait(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var waiting atomic.Int64
	waiting.Store(1000)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for waiting.Load() > 0 {
			waiting.Add(-100)
			runtime.Gosched()
		}
	}()
	hourglass.Settle(&waiting)
	if n := waiting.Load(); n > hourglass.WaitingMax {
		t.Errorf("%d callbacks wait to start after the call; want at most %d", n, hourglass.WaitingMax)
	}
	<-done
}

// TestSettle_BoundedWait checks that a scheduling call does not wait for
// ever for callbacks that cannot start: with the count stuck above
// WaitingMax, it returns after a bounded number of yields.
func TestSettle_BoundedWait(t *testing.T) {
	var waiting atomic.Int64
	waiting.Store(hourglass.WaitingMax + 1)
	start := time.Now()
	hourglass.Settle(&waiting)
	if d := time.Since(start); d > time.Second {
		t.Errorf("the call took %v with the count stuck; want it bounded", d)
	}
}

// TestOverslept checks when a scheduling call finds the driver late: only
// when it sleeps until a time more than a millisecond before now, and
// then it counts the driver as woken, so that the next call does not.
func TestOverslept(t *testing.T) {
	const ms = uint64(time.Millisecond)
	for _, c := range []struct {
		name            string
		sleepUntil, now uint64
		late            bool
	}{
		{"awake", 0, 10 * ms, false},
		{"idle", math.MaxUint64, 10 * ms, false},
		{"asleep, not yet due", 20 * ms, 10 * ms, false},
		{"asleep, due within a millisecond", 10 * ms, 11 * ms, false},
		{"asleep, a millisecond and more late", 10 * ms, 11*ms + 1, true},
	} {
		late, after := hourglass.Overslept(c.sleepUntil, c.now)
		if late != c.late {
			t.Errorf("%s: overslept = %v; want %v", c.name, late, c.late)
		}
		if want := c.sleepUntil; late && after != 0 || !late && after != want {
			t.Errorf("%s: sleeps until %d afterwards; want %d", c.name, after, map[bool]uint64{true: 0, false: want}[late])
		}
	}
}

// TestGoroutines_WaitingCountsBack checks that every callback started on
// a goroutine of its own is counted out when it begins, in bursts (groups)
// and alone, for a Timer and a Keyed: a count left behind would make every
// later scheduling call yield.
func TestGoroutines_WaitingCountsBack(t *testing.T) {
	forEachStructure(t, func(t *testing.T, s structure) {
		tm := s.newTimer(t)
		k := hourglass.NewKeyed(func(int) {}, s.opt)
		t.Cleanup(func() {
			k.Stop()
			<-k.Done()
		})
		for i := range burst {
			must(t)(tm.AfterFunc(10*ms, func() {}))
			if err := k.Set(i, 10*ms); err != nil {
				t.Fatal(err)
			}
		}
		must(t)(tm.AfterFunc(time.Second, func() {}))
		if err := k.Set(-1, time.Second); err != nil {
			t.Fatal(err)
		}
		for _, d := range []time.Duration{10 * ms, time.Second} {
			advance(d + s.tolerance)
			if n := hourglass.Waiting(tm); n != 0 {
				t.Errorf("Timer: %d callbacks counted as waiting after all began; want 0", n)
			}
			if n := hourglass.KeyedWaiting(k); n != 0 {
				t.Errorf("Keyed: %d callbacks counted as waiting after all began; want 0", n)
			}
		}
	})
}
