package hourglass_test

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass"
)

// checkStopped fails unless every way to schedule on tm returns
// ErrStopped, Pending is 0 and a further Stop returns nil.
func checkStopped(t *testing.T, tm *hourglass.Timer) {
	t.Helper()
	f := func() {}
	for _, c := range []struct {
		name string
		call func() (*hourglass.Timeout, error)
	}{
		{"AfterFunc", func() (*hourglass.Timeout, error) { return tm.AfterFunc(ms, f) }},
		{"AtFunc", func() (*hourglass.Timeout, error) { return tm.AtFunc(time.Now().Add(ms), f) }},
		{"ScheduleAtFixedRate", func() (*hourglass.Timeout, error) { return tm.ScheduleAtFixedRate(ms, ms, f) }},
		{"ScheduleWithFixedDelay", func() (*hourglass.Timeout, error) { return tm.ScheduleWithFixedDelay(ms, ms, f) }},
		{"Schedule", func() (*hourglass.Timeout, error) { return tm.Schedule(every(ms), f) }},
	} {
		if to, err := c.call(); !errors.Is(err, hourglass.ErrStopped) || to != nil {
			t.Errorf("%s after Stop = %v, %v; want nil, ErrStopped", c.name, to, err)
		}
	}
	if n := tm.Pending(); n != 0 {
		t.Errorf("Pending() = %d after Stop, want 0", n)
	}
	if out := tm.Stop(); out != nil {
		t.Errorf("second Stop returned %d timeouts, want nil", len(out))
	}
}

// TestStop_ReturnsPending checks that Stop cancels and returns exactly the
// timeouts that have not run, that nothing runs after it, and that the
// Timer refuses new work.
func TestStop_ReturnsPending(t *testing.T) {
	forEachSetup(t, executorSetups, func(t *testing.T, s structure, opts []hourglass.Option) {
		tm := s.newTimer(t, opts...)
		r := newRecorder()
		const n = 100
		var tos []*hourglass.Timeout
		for i := range n {
			tos = append(tos, must(t)(tm.AfterFunc(time.Duration(i+1)*10*ms, r.fn(i))))
		}
		cancelled := must(t)(tm.AfterFunc(time.Second, func() {}))
		cancelled.Cancel()
		var runs atomic.Int32
		periodic := must(t)(tm.ScheduleAtFixedRate(time.Hour, time.Hour, func() { runs.Add(1) }))
		advance(505 * ms) // 50 have run, 50 are pending

		out := tm.Stop()
		want := append(slices.Clone(tos[n/2:]), periodic)
		if !sameTimeouts(out, want) {
			t.Errorf("Stop returned %d timeouts, want the %d pending ones", len(out), len(want))
		}
		for _, to := range out {
			if !to.Cancelled() || to.Expired() {
				t.Errorf("timeout returned by Stop: Cancelled() = %v, Expired() = %v, want true, false", to.Cancelled(), to.Expired())
			}
			if to.Cancel() || to.Reset(ms) {
				t.Error("Cancel or Reset of a timeout returned by Stop = true, want false")
			}
		}
		for i, to := range tos[:n/2] {
			r.checkRanOnce(t, s, i, time.Duration(i+1)*10*ms)
			if !to.Expired() || to.Cancelled() {
				t.Errorf("timeout %d ran: Expired() = %v, Cancelled() = %v, want true, false", i, to.Expired(), to.Cancelled())
			}
		}
		checkStopped(t, tm)

		// The drivers are gone: nothing wakes and nothing runs, even the
		// timeouts Reset just tried to re-arm.
		wakeups := hourglass.DriverWakeups(tm)
		advance(1000 * time.Hour)
		if got := r.total(); got != n/2 {
			t.Errorf("%d timeouts ran after Stop", got-n/2)
		}
		if runs.Load() != 0 {
			t.Errorf("periodic timeout returned by Stop ran %d times", runs.Load())
		}
		if got := hourglass.DriverWakeups(tm); got != wakeups {
			t.Errorf("%d driver wake-ups after Stop, want none", got-wakeups)
		}
	})
}

// sameTimeouts reports whether a and b hold the same timeouts, each once,
// in any order.
func sameTimeouts(a, b []*hourglass.Timeout) bool {
	if len(a) != len(b) {
		return false
	}
	set := make(map[*hourglass.Timeout]int)
	for _, to := range a {
		set[to]++
	}
	for _, to := range b {
		if set[to] != 1 {
			return false
		}
		set[to]--
	}
	return true
}

// TestStop_Unused checks Stop on a Timer that never had a timeout.
func TestStop_Unused(t *testing.T) {
	forEachStructure(t, func(t *testing.T, s structure) {
		tm := s.newTimer(t)
		if out := tm.Stop(); out != nil {
			t.Errorf("Stop of an unused Timer returned %d timeouts", len(out))
		}
		checkStopped(t, tm)
		if n := hourglass.StartedDrivers(tm); n != 0 {
			t.Errorf("%d drivers started, want none", n)
		}
		select {
		case <-tm.Done():
		default:
			t.Error("Done not closed after Stop of a Timer with no driver")
		}
	})
}

// TestStop_DoesNotWait checks that Stop returns at once, without waiting
// for an Inline callback running on a driver, and that Done is closed
// only once that callback has returned and the drivers have exited. (Stop
// cannot wait for the drivers itself: called from a callback on one, it
// does not know which goroutine it runs on.)
func TestStop_DoesNotWait(t *testing.T) {
	forEachSetup(t, []setup{inlineOneShard, inlineShards}, func(t *testing.T, s structure, opts []hourglass.Option) {
		tm := s.newTimer(t, opts...)
		var ended atomic.Bool
		must(t)(tm.AfterFunc(10*ms, func() {
			time.Sleep(5 * ms)
			ended.Store(true)
		}))
		advance(12 * ms) // the callback sleeps until 15 ms
		start := time.Now()
		tm.Stop()
		if d := time.Since(start); d != 0 {
			t.Errorf("Stop took %v, want no time: it waits for nothing", d)
		}
		select {
		case <-tm.Done():
			t.Fatal("Done closed while an Inline callback was still running on a driver")
		default:
		}
		<-tm.Done()
		if !ended.Load() {
			t.Error("Done closed before the Inline callback running on a driver ended")
		}
		s.checkOnTime(t, "Done", time.Since(start), 3*ms)
	})
}

// TestKeyed_StopDoesNotWait checks the same for a Keyed: Stop returns at
// once while expire runs on the driver, and Done closes once it returned.
func TestKeyed_StopDoesNotWait(t *testing.T) {
	forEachStructure(t, func(t *testing.T, s structure) {
		var ended atomic.Bool
		k := newKeyed(t, s, func(int) {
			time.Sleep(5 * ms)
			ended.Store(true)
		}, hourglass.WithExecutor(hourglass.Inline))
		set(t, k, 1, 10*ms)
		advance(12 * ms)
		start := time.Now()
		k.Stop()
		if d := time.Since(start); d != 0 {
			t.Errorf("Stop took %v, want no time", d)
		}
		<-k.Done()
		if !ended.Load() {
			t.Error("Done closed before expire running on the driver returned")
		}
		s.checkOnTime(t, "Done", time.Since(start), 3*ms)
	})
}

// stopSetups are the executors a callback can call Stop from: the driver
// itself, a goroutine of its own, a Pool worker, and a Pool with no room
// that runs callbacks on the driver.
var stopSetups = []setup{
	inlineOneShard, goroutinesOneShard, inlineShards, goroutinesShards, poolOneShard,
	{"PoolCallerRuns/DefaultShards", func(t *testing.T) []hourglass.Option {
		p := hourglass.NewPool(1, 0)
		t.Cleanup(p.Close)
		return []hourglass.Option{hourglass.WithExecutor(p)}
	}},
}

// TestStop_FromCallback checks that Stop called from a callback neither
// deadlocks nor runs anything twice: every timeout either runs once or is
// returned by Stop, the later ones are returned, and with the Inline
// executor on one shard the rest of the caller's batch is returned
// unrun.
func TestStop_FromCallback(t *testing.T) {
	forEachSetup(t, stopSetups, func(t *testing.T, s structure, opts []hourglass.Option) {
		tm := s.newTimer(t, opts...)
		var (
			first atomic.Bool
			mu    sync.Mutex
			out   []*hourglass.Timeout
		)
		r := newRecorder()
		const batch, later = 10, 5
		var tos []*hourglass.Timeout
		for i := range batch {
			tos = append(tos, must(t)(tm.AfterFunc(10*ms, func() {
				r.record(i)
				if first.CompareAndSwap(false, true) {
					o := tm.Stop()
					mu.Lock()
					out = o
					mu.Unlock()
				}
			})))
		}
		for i := range later {
			tos = append(tos, must(t)(tm.AfterFunc(20*ms, r.fn(batch+i))))
		}
		advance(1000 * time.Hour)
		checkStopped(t, tm)

		mu.Lock()
		defer mu.Unlock()
		returned := make(map[*hourglass.Timeout]int)
		for _, to := range out {
			returned[to]++
		}
		ran := 0
		for i, to := range tos {
			runs := len(r.at(i))
			ran += runs
			if runs+returned[to] != 1 {
				t.Errorf("timeout %d ran %d times and was returned by Stop %d times, want one of them once", i, runs, returned[to])
			}
			if returned[to] > 0 && !to.Cancelled() {
				t.Errorf("timeout %d returned by Stop: Cancelled() = false", i)
			}
			if i >= batch && returned[to] != 1 {
				t.Errorf("timeout %d due after Stop was not returned by it", i)
			}
		}
		// The deterministic case: on one shard, the whole batch is taken
		// before Stop, and Inline runs none of it after the caller. (With
		// goroutines, Stop takes whatever part of the batch the driver has
		// not yet handed over, which depends on the scheduler: Stop no
		// longer waits for the driver to hand over the whole batch.)
		if strings.HasSuffix(t.Name(), "/"+inlineOneShard.name) && ran != 1 {
			t.Errorf("%d timeouts ran, want only the one that called Stop", ran)
		}
	})
}

// spread schedules n timeouts due d from now, running f, round robin over
// the shards of tm, which has shards shards: a Timer puts a timeout on the
// shard of its caller's P, so the timeouts of one goroutine would
// otherwise share a shard.
func spread(t *testing.T, tm *hourglass.Timer, shards, n int, d time.Duration, f func()) []*hourglass.Timeout {
	t.Helper()
	tos := make([]*hourglass.Timeout, n)
	for i := range tos {
		tos[i] = must(t)(hourglass.AfterFuncOnShard(tm, i%shards, d, f))
	}
	if got := hourglass.StartedDrivers(tm); got != min(shards, n) {
		t.Fatalf("%d drivers started, want %d", got, min(shards, n))
	}
	return tos
}

// TestStop_FromCallbacksOnEveryShard checks that Stop called at once from
// callbacks on several drivers does not deadlock: the first Stop waits
// for the other drivers, which must not wait for it in turn.
func TestStop_FromCallbacksOnEveryShard(t *testing.T) {
	const shards = 8
	inline := setup{"Inline/8Shards", options(hourglass.WithExecutor(hourglass.Inline), hourglass.WithShards(shards))}
	callerRuns := setup{"PoolCallerRuns/8Shards", func(t *testing.T) []hourglass.Option {
		p := hourglass.NewPool(1, 0)
		t.Cleanup(p.Close)
		return []hourglass.Option{hourglass.WithExecutor(p), hourglass.WithShards(shards)}
	}}
	forEachSetup(t, []setup{inline, callerRuns}, func(t *testing.T, s structure, opts []hourglass.Option) {
		for range 50 {
			tm := hourglass.New(append([]hourglass.Option{s.opt}, opts...)...)
			var runs atomic.Int32
			var mu sync.Mutex
			var out []*hourglass.Timeout
			const n = 8 * shards
			spread(t, tm, shards, n, ms, func() {
				runs.Add(1)
				if o := tm.Stop(); o != nil {
					mu.Lock()
					out = o
					mu.Unlock()
				}
			})
			advance(time.Hour)
			tm.Stop()
			mu.Lock()
			if got := int(runs.Load()) + len(out); got != n {
				t.Errorf("%d ran and %d were returned by Stop, want %d in all", runs.Load(), len(out), n)
			}
			mu.Unlock()
		}
	})
}

// TestStop_Concurrent checks Stop called from many goroutines at once:
// one returns the pending timeouts of every shard, the others nil, and
// none deadlocks.
func TestStop_Concurrent(t *testing.T) {
	const shards = 4
	setups := []setup{
		{"Inline/4Shards", options(hourglass.WithExecutor(hourglass.Inline), hourglass.WithShards(shards))},
		{"Goroutines/4Shards", options(hourglass.WithShards(shards))},
	}
	forEachSetup(t, setups, func(t *testing.T, s structure, opts []hourglass.Option) {
		tm := s.newTimer(t, opts...)
		tos := spread(t, tm, shards, 100, time.Second, func() {})
		advance(ms)
		var mu sync.Mutex
		var all []*hourglass.Timeout
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				out := tm.Stop()
				mu.Lock()
				all = append(all, out...)
				mu.Unlock()
			})
		}
		wg.Wait()
		if !sameTimeouts(all, tos) {
			t.Errorf("concurrent Stops returned %d timeouts in all, want each of the %d pending once", len(all), len(tos))
		}
		checkStopped(t, tm)
	})
}

// TestStop_PeriodicRunning checks that a periodic timeout in the middle of
// a run when Stop is called finishes that run, is not returned, and is not
// filed again; and that a periodic callback may stop its own Timer.
func TestStop_PeriodicRunning(t *testing.T) {
	forEachSetup(t, []setup{goroutinesOneShard, goroutinesShards, poolOneShard}, func(t *testing.T, s structure, opts []hourglass.Option) {
		tm := s.newTimer(t, opts...)
		l := newRunLog(t)
		to := must(t)(tm.ScheduleAtFixedRate(10*ms, 10*ms, l.fn(func(int) time.Duration { return 5 * ms })))
		pending := must(t)(tm.AfterFunc(time.Hour, func() {}))
		advance(12 * ms) // the first run lasts until 15 ms
		if out := tm.Stop(); !sameTimeouts(out, []*hourglass.Timeout{pending}) {
			t.Errorf("Stop returned %d timeouts, want only the pending one-shot", len(out))
		}
		if !to.Cancelled() {
			t.Error("periodic timeout running during Stop: Cancelled() = false, want true")
		}
		advance(time.Hour)
		starts, ends := l.runs()
		if len(starts) != 1 || len(ends) != 1 {
			t.Errorf("%d runs started and %d ended, want the one in progress", len(starts), len(ends))
		}
		checkStopped(t, tm)
	})
	forEachSetup(t, stopSetups, func(t *testing.T, s structure, opts []hourglass.Option) {
		tm := s.newTimer(t, opts...)
		var runs atomic.Int32
		must(t)(tm.ScheduleAtFixedRate(ms, ms, func() {
			if runs.Add(1) == 3 {
				tm.Stop()
			}
		}))
		advance(time.Hour)
		if n := runs.Load(); n != 3 {
			t.Errorf("periodic timeout that stopped its Timer in run 3 ran %d times", n)
		}
		checkStopped(t, tm)
	})
}
