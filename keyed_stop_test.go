package hourglass_test

// Keyed's Stop: what it returns, and Stop from expire and from many
// goroutines at once.

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass"
)

// TestKeyed_Stop checks that Stop returns exactly the keys that have not
// expired, that nothing expires or wakes after it, and that the Keyed
// refuses new work.
func TestKeyed_Stop(t *testing.T) {
	forEachSetup(t, keyedSetups, func(t *testing.T, s structure, opts []hourglass.Option) {
		r := newRecorder()
		k := newKeyed(t, s, r.record, opts...)
		const n = 100
		for i := range n {
			set(t, k, i, time.Duration(i+1)*10*ms)
		}
		set(t, k, 1000, time.Second)
		k.Remove(1000)
		set(t, k, 2000, time.Hour)
		set(t, k, 2000, 700*ms) // filed at 1 h, moved earlier
		set(t, k, 3000, 20*ms)
		set(t, k, 3000, time.Hour) // filed at 20 ms, pushed later
		advance(505 * ms)          // keys 0-49 have expired

		out := k.Stop()
		slices.Sort(out)
		want := []int{2000, 3000}
		for i := n / 2; i < n; i++ {
			want = append(want, i)
		}
		slices.Sort(want)
		if !slices.Equal(out, want) {
			t.Errorf("Stop returned %v, want %v", out, want)
		}
		for i := range n / 2 {
			r.checkRanOnce(t, s, i, time.Duration(i+1)*10*ms)
		}
		checkKeyedStopped(t, k, 0)

		wakeups := k.Stats().Wakeups
		advance(1000 * time.Hour)
		if got := r.total(); got != n/2 {
			t.Errorf("%d expiries after Stop", got-n/2)
		}
		if got := k.Stats().Wakeups; got != wakeups {
			t.Errorf("%d driver wake-ups after Stop, want none", got-wakeups)
		}
	})
}

// TestKeyed_StopUnused checks Stop on a Keyed that never had a key: it
// started no driver, and is stopped like any other.
func TestKeyed_StopUnused(t *testing.T) {
	forEachStructure(t, func(t *testing.T, s structure) {
		k := newKeyed(t, s, func(string) {})
		if out := k.Stop(); out != nil {
			t.Errorf("Stop of an unused Keyed returned %v", out)
		}
		checkKeyedStopped(t, k, "a")
		if w := k.Stats().Wakeups; w != 0 {
			t.Errorf("%d wake-ups of an unused Keyed", w)
		}
	})
}

// TestKeyed_StopFromExpire checks that Stop called from expire neither
// deadlocks nor loses or repeats a key: every key either expires once or
// is returned, the later ones are returned, and with the Inline executor
// the rest of the caller's batch is returned unexpired.
func TestKeyed_StopFromExpire(t *testing.T) {
	setups := append(slices.Clone(keyedSetups), setup{"PoolCallerRuns", func(t *testing.T) []hourglass.Option {
		p := hourglass.NewPool(1, 0)
		t.Cleanup(p.Close)
		return []hourglass.Option{hourglass.WithExecutor(p)}
	}})
	forEachSetup(t, setups, func(t *testing.T, s structure, opts []hourglass.Option) {
		var (
			r     = newRecorder()
			first atomic.Bool
			mu    sync.Mutex
			out   []int
			k     *hourglass.Keyed[int]
		)
		k = newKeyed(t, s, func(key int) {
			r.record(key)
			if first.CompareAndSwap(false, true) {
				o := k.Stop()
				mu.Lock()
				out = o
				mu.Unlock()
			}
		}, opts...)
		const batch, later = 10, 5
		for i := range batch {
			set(t, k, i, 10*ms)
		}
		for i := range later {
			set(t, k, batch+i, 20*ms)
		}
		advance(1000 * time.Hour)
		checkKeyedStopped(t, k, 0)

		mu.Lock()
		defer mu.Unlock()
		returned := make(map[int]int)
		for _, key := range out {
			returned[key]++
		}
		ran := 0
		for key := range batch + later {
			runs := len(r.at(key))
			ran += runs
			if runs+returned[key] != 1 {
				t.Errorf("key %d expired %d times and was returned by Stop %d times, want one of them once", key, runs, returned[key])
			}
			if key >= batch && returned[key] != 1 {
				t.Errorf("key %d, due after Stop, was not returned by it", key)
			}
		}
		// With goroutines, Stop takes whatever part of the batch the driver
		// has not yet handed over, which depends on the scheduler.
		if strings.HasSuffix(t.Name(), "/Inline") && ran != 1 {
			t.Errorf("%d keys expired, want only the one whose expire called Stop", ran)
		}
	})
}

// TestKeyed_StopConcurrent checks Stop called from many goroutines at
// once: one returns every pending key, the others nil.
func TestKeyed_StopConcurrent(t *testing.T) {
	forEachSetup(t, keyedSetups, func(t *testing.T, s structure, opts []hourglass.Option) {
		k := newKeyed(t, s, func(int) {}, opts...)
		const n = 100
		for i := range n {
			set(t, k, i, time.Second)
		}
		advance(ms)
		var mu sync.Mutex
		var all []int
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				out := k.Stop()
				mu.Lock()
				all = append(all, out...)
				mu.Unlock()
			})
		}
		wg.Wait()
		slices.Sort(all)
		if len(all) != n || all[0] != 0 || all[n-1] != n-1 || len(slices.Compact(all)) != n {
			t.Errorf("concurrent Stops returned %d keys in all, want each of the %d pending once", len(all), n)
		}
		checkKeyedStopped(t, k, 0)
	})
}
