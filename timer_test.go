package hourglass_test

// Timer's conformance tests; their harness is in harness_test.go.

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hourglass-go/hourglass"
)

// TestTimer_FiresOnTime checks that a timeout never runs before its
// deadline and at most one tick after it, and that the heap and the list
// are exact, whether the deadlines count from a tick boundary or not.
func TestTimer_FiresOnTime(t *testing.T) {
	forEachSetup(t, executorSetups, func(t *testing.T, s structure, opts []hourglass.Option) {
		tm := s.newTimer(t, opts...)
		for _, offset := range []time.Duration{0, 300*µs + 7} {
			advance(offset)
			r := newRecorder()
			var last time.Duration
			for i, d := range deadlines {
				if d <= s.horizon {
					must(t)(tm.AfterFunc(d, r.fn(i)))
					last = d
				}
			}
			advance(last + s.tolerance)
			for i, d := range deadlines {
				if d <= s.horizon {
					r.checkRanOnce(t, s, i, d)
				}
			}
			if n := tm.Pending(); n != 0 {
				t.Errorf("Pending() = %d after every timeout ran, want 0", n)
			}
		}
		tm.Stop()
	})
}

// TestTimer_AtFuncFiresOnTime checks AtFunc against the same deadlines.
func TestTimer_AtFuncFiresOnTime(t *testing.T) {
	forEachSetup(t, []setup{goroutinesShards}, func(t *testing.T, s structure, opts []hourglass.Option) {
		tm := s.newTimer(t, opts...)
		advance(1234567 * time.Nanosecond)
		r := newRecorder()
		var last time.Duration
		for i, d := range deadlines {
			if d <= s.horizon {
				to := must(t)(tm.AtFunc(r.start.Add(d), r.fn(i)))
				if got := to.Deadline(); !got.Equal(r.start.Add(d)) {
					t.Errorf("Deadline() = %v, want %v", got, r.start.Add(d))
				}
				last = d
			}
		}
		advance(last + s.tolerance)
		for i, d := range deadlines {
			if d <= s.horizon {
				r.checkRanOnce(t, s, i, d)
			}
		}
		tm.Stop()
	})
}

// TestTimer_OneShardOrder checks that on one shard timeouts fire in
// deadline order and, where the structure keeps it, timeouts with equal
// deadlines in the order they were scheduled, also after cascading down a
// hierarchical wheel or waiting rounds in a hashed one.
func TestTimer_OneShardOrder(t *testing.T) {
	forEachSetup(t, []setup{inlineOneShard}, func(t *testing.T, s structure, opts []hourglass.Option) {
		tm := s.newTimer(t, opts...)
		var order []int // appended on the one driver goroutine
		add := func(d time.Duration, key int) {
			must(t)(tm.AfterFunc(d, func() { order = append(order, key) }))
		}
		// Keys 0-9 share a deadline, and so do keys 20-29; keys 10-19 are
		// scheduled latest first.
		for i := range 10 {
			add(50*ms, i)
			add(5*time.Second+500*µs, 20+i)
		}
		for i := 19; i >= 10; i-- {
			add(time.Duration(i)*10*ms, i)
		}
		advance(6 * time.Second)
		tm.Stop()
		if len(order) != 30 {
			t.Fatalf("%d timeouts ran, want 30: %v", len(order), order)
		}
		for _, group := range [][]int{order[:10], order[20:]} {
			got := slices.Clone(group)
			if !s.fifo {
				slices.Sort(got)
			}
			if want := slices.Sorted(slices.Values(got)); !slices.Equal(got, want) || want[9]-want[0] != 9 {
				t.Errorf("equal deadlines ran in order %v, want the order they were scheduled", group)
			}
		}
		if rest := order[10:20]; !slices.IsSorted(rest) || rest[0] != 10 {
			t.Errorf("distinct deadlines ran in order %v, want 10 to 19", rest)
		}
	})
}

// TestTimer_ResetMovesTimeout checks that the old deadline never fires,
// the new one does, and Reset reports whether the timeout was pending.
func TestTimer_ResetMovesTimeout(t *testing.T) {
	forEachSetup(t, executorSetups, func(t *testing.T, s structure, opts []hourglass.Option) {
		tm := s.newTimer(t, opts...)
		r := newRecorder()

		// Later: 10 ms moved at 5 ms to 5+20 ms.
		later := must(t)(tm.AfterFunc(10*ms, r.fn(0)))
		advance(5 * ms)
		if !later.Reset(20 * ms) {
			t.Error("Reset of a pending timeout = false, want true")
		}
		if got, want := later.Deadline(), r.start.Add(25*ms); !got.Equal(want) {
			t.Errorf("Deadline() after Reset = %v, want %v", got, want)
		}
		advance(15 * ms) // now 20 ms: past the old deadline and its tick
		r.checkNotRun(t, 0)
		advance(5*ms + s.tolerance)
		r.checkRanOnce(t, s, 0, 25*ms)

		// Reset after the run returns false and runs it again.
		if later.Reset(10 * ms) {
			t.Error("Reset after the run = true, want false")
		}
		if later.Expired() || later.Cancelled() {
			t.Errorf("re-armed timeout: Expired() = %v, Cancelled() = %v, want false, false", later.Expired(), later.Cancelled())
		}
		now := time.Since(r.start)
		advance(10*ms + s.tolerance)
		if at := r.at(0); len(at) != 2 {
			t.Errorf("re-armed timeout ran %d times in all, want 2", len(at))
		} else {
			s.checkOnTime(t, "re-armed timeout", at[1], now+10*ms)
		}

		// Reset after Cancel re-arms it too.
		cancelled := must(t)(tm.AfterFunc(10*ms, r.fn(1)))
		if !cancelled.Cancel() {
			t.Error("Cancel of a pending timeout = false, want true")
		}
		now = time.Since(r.start)
		if cancelled.Reset(3 * ms) {
			t.Error("Reset after Cancel = true, want false")
		}
		advance(10*ms + s.tolerance)
		r.checkRanOnce(t, s, 1, now+3*ms)

		// Earlier: a driver asleep until 1 h must wake for 1 ms.
		now = time.Since(r.start)
		earlier := must(t)(tm.AfterFunc(time.Hour, r.fn(2)))
		advance(10 * ms)
		if !earlier.Reset(ms) {
			t.Error("Reset of a pending timeout = false, want true")
		}
		advance(ms + s.tolerance)
		r.checkRanOnce(t, s, 2, now+11*ms)
		tm.Stop()
	})
}

// TestTimer_NewTimeoutsInBursts cancels, resets and re-arms timeouts
// while no time passes, so that none has reached the structure yet (a
// shard files new timeouts in batches: see batchSize in driver.go), across
// several full batches, and checks that each runs once at its last
// deadline, that Pending counts what is pending, and that Stop returns
// exactly the pending rest.
func TestTimer_NewTimeoutsInBursts(t *testing.T) {
	forEachStructure(t, func(t *testing.T, s structure) {
		tm := s.newTimer(t, hourglass.WithExecutor(hourglass.Inline))
		r := newRecorder()
		const n = 700 // more than two batches
		tos := make([]*hourglass.Timeout, n)
		want := make(map[int]time.Duration)
		for i := range n {
			tos[i] = must(t)(tm.AfterFunc(time.Duration(i%5+1)*ms, r.fn(i)))
			want[i] = time.Duration(i%5+1) * ms
		}
		for i := range n {
			switch i % 4 {
			case 0: // cancelled
				if !tos[i].Cancel() {
					t.Fatalf("Cancel of new timeout %d = false", i)
				}
				delete(want, i)
			case 1: // cancelled and scheduled again, twice
				tos[i].Cancel()
				tos[i].Reset(9 * ms)
				tos[i].Cancel()
				if tos[i].Reset(7 * ms) {
					t.Fatalf("Reset after Cancel of timeout %d = true", i)
				}
				want[i] = 7 * ms
			case 2: // moved later
				if !tos[i].Reset(30 * ms) {
					t.Fatalf("Reset of new timeout %d = false", i)
				}
				want[i] = 30 * ms
			}
		}
		if got := tm.Pending(); got != len(want) {
			t.Fatalf("Pending() = %d, want %d", got, len(want))
		}
		advance(10*ms + s.tolerance)
		for i := range n {
			if d, ok := want[i]; !ok {
				r.checkNotRun(t, i)
			} else if d < 10*ms {
				r.checkRanOnce(t, s, i, d)
				delete(want, i)
			}
		}
		out := tm.Stop()
		if len(out) != len(want) {
			t.Fatalf("Stop returned %d timeouts, want the %d moved to 30 ms", len(out), len(want))
		}
		for _, to := range out {
			if !to.Cancelled() || to.Expired() {
				t.Fatalf("Stop returned a timeout with Cancelled() = %v, Expired() = %v", to.Cancelled(), to.Expired())
			}
		}
	})
}

// TestTimer_PastDeadlines checks that zero, negative and past deadlines
// run at once, at the current virtual time, not at the next tick boundary
// (TestTimer_DueAtOnceOnCoarseTick does the same with a long tick).
func TestTimer_PastDeadlines(t *testing.T) {
	forEachSetup(t, executorSetups, func(t *testing.T, s structure, opts []hourglass.Option) {
		tm := s.newTimer(t, opts...)
		if s.sleeps() {
			// The driver sleeps until this, so a past deadline must wake it.
			must(t)(tm.AfterFunc(2*time.Hour, func() {}))
		}
		advance(time.Hour - 300*µs) // off the tick grid
		if !s.sleeps() {
			must(t)(tm.AfterFunc(10*ms, func() {})) // keep the driver ticking
		}
		r := newRecorder()
		must(t)(tm.AfterFunc(0, r.fn(0)))
		must(t)(tm.AfterFunc(-time.Hour, r.fn(1)))
		must(t)(tm.AfterFunc(math.MinInt64, r.fn(2)))
		must(t)(tm.AtFunc(time.Now().Add(-time.Hour), r.fn(3)))
		must(t)(tm.AtFunc(time.Time{}, r.fn(4)))
		must(t)(tm.AtFunc(time.Now(), r.fn(5)))
		must(t)(tm.AtFunc(time.Unix(0, 0), r.fn(6)))
		synctest.Wait()
		for key := range 7 {
			if at := r.at(key); len(at) != 1 || at[0] != 0 {
				t.Errorf("timeout %d ran at %v, want once at 0", key, at)
			}
		}
		tm.Stop()
	})
}

// TestTimer_FarDeadlines checks that the longest durations are held
// exactly, relative to the time they were scheduled, and never fire.
func TestTimer_FarDeadlines(t *testing.T) {
	forEachStructure(t, func(t *testing.T, s structure) {
		tm := s.newTimer(t, hourglass.WithShards(1))
		advance(time.Hour) // a clamp relative to the Timer's start would show
		r := newRecorder()
		var tos []*hourglass.Timeout
		for i, d := range []time.Duration{math.MaxInt64, math.MaxInt64 - 1, math.MaxInt64 / 2} {
			to := must(t)(tm.AfterFunc(d, r.fn(i)))
			if got, want := to.Deadline(), time.Now().Add(d); !got.Equal(want) {
				t.Errorf("AfterFunc(%v): Deadline() = %v, want %v", d, got, want)
			}
			tos = append(tos, to)
		}
		when := time.Now().Add(math.MaxInt64)
		to := must(t)(tm.AtFunc(when, r.fn(3)))
		if got := to.Deadline(); !got.Equal(when) {
			t.Errorf("AtFunc(%v): Deadline() = %v, want %v", when, got, when)
		}
		tos = append(tos, to)

		advance(min(1000*time.Hour, s.horizon))
		if n := r.total(); n != 0 {
			t.Errorf("%d far timeouts ran, want none", n)
		}
		if n := tm.Pending(); n != len(tos) {
			t.Errorf("Pending() = %d, want %d", n, len(tos))
		}
		for _, to := range tos {
			if !to.Cancel() {
				t.Errorf("Cancel of the timeout due %v = false, want true", to.Deadline())
			}
		}
		if n := tm.Pending(); n != 0 {
			t.Errorf("Pending() = %d after Cancel, want 0", n)
		}
		tm.Stop()
	})
}

// TestTimeout_States checks Expired, Cancelled and Deadline in each state
// of a one-shot timeout.
func TestTimeout_States(t *testing.T) {
	forEachStructure(t, func(t *testing.T, s structure) {
		tm := s.newTimer(t)
		start := time.Now()
		check := func(what string, to *hourglass.Timeout, expired, cancelled bool, deadline time.Duration) {
			t.Helper()
			if to.Expired() != expired || to.Cancelled() != cancelled {
				t.Errorf("%s: Expired() = %v, Cancelled() = %v, want %v, %v", what, to.Expired(), to.Cancelled(), expired, cancelled)
			}
			if got, want := to.Deadline(), start.Add(deadline); !got.Equal(want) {
				t.Errorf("%s: Deadline() = %v, want %v", what, got, want)
			}
		}
		ran := must(t)(tm.AfterFunc(10*ms, func() {}))
		cancelled := must(t)(tm.AfterFunc(20*ms, func() {}))
		stopped := must(t)(tm.AfterFunc(30*ms, func() {}))
		check("pending", ran, false, false, 10*ms)

		advance(10*ms + s.tolerance)
		check("run", ran, true, false, 10*ms)
		if ran.Cancel() {
			t.Error("Cancel after the run = true, want false")
		}
		check("run, then Cancel", ran, true, false, 10*ms)

		if !cancelled.Cancel() {
			t.Error("Cancel of a pending timeout = false, want true")
		}
		check("cancelled", cancelled, false, true, 20*ms)
		if cancelled.Cancel() {
			t.Error("second Cancel = true, want false")
		}

		if out := tm.Stop(); len(out) != 1 || out[0] != stopped {
			t.Errorf("Stop() returned %d timeouts, want the one pending", len(out))
		}
		check("stopped", stopped, false, true, 30*ms)
		if stopped.Reset(ms) || stopped.Cancel() {
			t.Error("Reset or Cancel after Stop = true, want false")
		}
		check("stopped, then Reset", stopped, false, true, 30*ms)
	})
}

// TestTimeout_Zero checks that the zero Timeout does nothing.
func TestTimeout_Zero(t *testing.T) {
	var to hourglass.Timeout
	if to.Cancel() || to.Reset(ms) || to.Expired() || to.Cancelled() || !to.Deadline().IsZero() {
		t.Errorf("zero Timeout: Cancel, Reset, Expired, Cancelled = %v, %v, %v, %v, Deadline() = %v; want false and the zero time",
			to.Cancel(), to.Reset(ms), to.Expired(), to.Cancelled(), to.Deadline())
	}
}

// TestTimer_MaxPending checks the pending limit: the one over it is
// refused, and a place comes back when a timeout fires or is cancelled.
// A periodic timeout holds its place until it is cancelled.
func TestTimer_MaxPending(t *testing.T) {
	forEachStructure(t, func(t *testing.T, s structure) {
		tm := s.newTimer(t, hourglass.WithMaxPending(3))
		refused := func(what string, _ *hourglass.Timeout, err error) {
			t.Helper()
			if !errors.Is(err, hourglass.ErrTooManyPending) {
				t.Errorf("%s at the limit: error %v, want ErrTooManyPending", what, err)
			}
		}
		atLimit := func() {
			t.Helper()
			f := func() {}
			to, err := tm.AfterFunc(ms, f)
			refused("AfterFunc", to, err)
			to, err = tm.AtFunc(time.Now(), f)
			refused("AtFunc", to, err)
			to, err = tm.ScheduleAtFixedRate(ms, ms, f)
			refused("ScheduleAtFixedRate", to, err)
			to, err = tm.ScheduleWithFixedDelay(ms, ms, f)
			refused("ScheduleWithFixedDelay", to, err)
			to, err = tm.Schedule(every(ms), f)
			refused("Schedule", to, err)
		}

		fires := must(t)(tm.AfterFunc(10*ms, func() {}))
		held := must(t)(tm.AfterFunc(time.Minute, func() {}))
		var runs atomic.Int32
		periodic := must(t)(tm.ScheduleAtFixedRate(ms, ms, func() { runs.Add(1) }))
		atLimit()

		advance(10*ms + s.tolerance) // fires ran: one place back
		if !fires.Expired() {
			t.Fatal("timeout due at 10 ms has not run")
		}
		again := must(t)(tm.AfterFunc(time.Hour, func() {}))
		atLimit()
		// Reset of a timeout that ran needs a place too.
		if fires.Reset(ms) {
			t.Error("Reset at the limit = true, want false")
		}
		advance(ms + s.tolerance)
		if fires.Cancelled() || !fires.Expired() {
			t.Error("Reset at the limit re-armed the timeout")
		}

		if !held.Cancel() { // one place back
			t.Error("Cancel of a pending timeout = false, want true")
		}
		must(t)(tm.AfterFunc(time.Hour, func() {}))
		atLimit()

		if runs.Load() < 10 {
			t.Errorf("periodic timeout ran %d times, want at least 10", runs.Load())
		}
		if !periodic.Cancel() { // its place back
			t.Error("Cancel of a periodic timeout = false, want true")
		}
		must(t)(tm.AfterFunc(time.Hour, func() {}))
		atLimit()

		again.Cancel()
		if n := tm.Pending(); n != 2 {
			t.Errorf("Pending() = %d, want 2", n)
		}
		tm.Stop()
		if _, err := tm.AfterFunc(ms, func() {}); !errors.Is(err, hourglass.ErrStopped) {
			t.Errorf("AfterFunc after Stop: error %v, want ErrStopped", err)
		}
	})
}

// TestTimer_Panics checks that a panic in a callback goes to the panic
// handler with its value, and that the Timer, later timeouts and the
// later runs of a periodic timeout that panics all carry on.
func TestTimer_Panics(t *testing.T) {
	setups := []setup{inlineOneShard, goroutinesOneShard, poolOneShard, goroutinesShards}
	forEachSetup(t, setups, func(t *testing.T, s structure, opts []hourglass.Option) {
		var log panicLog
		tm := s.newTimer(t, append(opts, hourglass.WithPanicHandler(log.handle))...)
		r := newRecorder()
		must(t)(tm.AfterFunc(ms, func() { panic("boom") }))
		must(t)(tm.AfterFunc(ms, func() { panic(nil) }))
		must(t)(tm.AfterFunc(ms, func() { panic(fmt.Errorf("wrapped: %w", errBoom)) }))
		must(t)(tm.AfterFunc(ms, r.fn(0))) // same batch, after the panics
		must(t)(tm.AfterFunc(2*ms, r.fn(1)))
		var runs atomic.Int32
		periodic := must(t)(tm.ScheduleAtFixedRate(5*ms, 10*ms, func() {
			panic(fmt.Sprintf("run %d", runs.Add(1)))
		}))
		advance(35*ms + s.tolerance)
		r.checkRanOnce(t, s, 0, ms)
		r.checkRanOnce(t, s, 1, 2*ms)
		if n := runs.Load(); n != 4 {
			t.Errorf("periodic timeout that panics ran %d times by 35 ms, want 4", n)
		}
		if !periodic.Cancel() {
			t.Error("Cancel of a periodic timeout that panics = false, want true")
		}
		// The Timer still works.
		must(t)(tm.AfterFunc(ms, r.fn(2)))
		advance(ms + s.tolerance)
		if len(r.at(2)) != 1 {
			t.Error("timeout scheduled after the panics did not run")
		}
		tm.Stop()

		panics, strs, sawNil, sawErr := log.sorted()
		if want := []string{"boom", "run 1", "run 2", "run 3", "run 4"}; !slices.Equal(strs, want) || !sawNil || !sawErr || len(panics) != 7 {
			t.Errorf("panic handler got %v, want %q, a *runtime.PanicNilError and errBoom", panics, want)
		}
	})
}

var errBoom = errors.New("boom")

// panicLog records what a panic handler receives.
type panicLog struct {
	mu     sync.Mutex
	panics []any
}

// handle is the panic handler.
func (l *panicLog) handle(v any) {
	l.mu.Lock()
	l.panics = append(l.panics, v)
	l.mu.Unlock()
}

// sorted returns the values received, the strings among them in order,
// and whether a *runtime.PanicNilError and errBoom were among them.
func (l *panicLog) sorted() (panics []any, strs []string, sawNil, sawErr bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var nilPanic *runtime.PanicNilError
	for _, v := range l.panics {
		switch v := v.(type) {
		case string:
			strs = append(strs, v)
		case error:
			sawNil = sawNil || errors.As(v, &nilPanic)
			sawErr = sawErr || errors.Is(v, errBoom)
		}
	}
	slices.Sort(strs)
	return slices.Clone(l.panics), strs, sawNil, sawErr
}

// TestTimer_Goexit checks that a callback calling runtime.Goexit, as
// t.FailNow does, on the driver goroutine or on a Pool's only worker does
// not stop the Timer: the rest of its batch and later timeouts still run.
func TestTimer_Goexit(t *testing.T) {
	poolOneWorker := setup{"PoolOneWorker/OneShard", func(t *testing.T) []hourglass.Option {
		p := hourglass.NewPool(1, 4)
		t.Cleanup(p.Close)
		return []hourglass.Option{hourglass.WithExecutor(p), hourglass.WithShards(1)}
	}}
	forEachSetup(t, []setup{inlineOneShard, goroutinesOneShard, poolOneWorker}, func(t *testing.T, s structure, opts []hourglass.Option) {
		tm := s.newTimer(t, opts...)
		r := newRecorder()
		must(t)(tm.AfterFunc(ms, runtime.Goexit))
		must(t)(tm.AfterFunc(ms, r.fn(0)))
		must(t)(tm.AfterFunc(5*ms, r.fn(1)))
		advance(5*ms + s.tolerance)
		r.checkRanOnce(t, s, 0, ms)
		r.checkRanOnce(t, s, 1, 5*ms)
		tm.Stop()
	})
}

// TestTimer_Errors checks that nil callbacks, non-positive periods and
// invalid options are errors that start with "hourglass: ", never a hang or
// a Timer that silently does something else.
func TestTimer_Errors(t *testing.T) {
	f := func() {}
	forEachStructure(t, func(t *testing.T, s structure) {
		tm := s.newTimer(t, hourglass.WithMaxPending(1))
		for _, c := range []struct {
			name string
			call func() (*hourglass.Timeout, error)
		}{
			{"AfterFunc(nil)", func() (*hourglass.Timeout, error) { return tm.AfterFunc(ms, nil) }},
			{"AtFunc(nil)", func() (*hourglass.Timeout, error) { return tm.AtFunc(time.Now(), nil) }},
			{"ScheduleAtFixedRate(nil)", func() (*hourglass.Timeout, error) { return tm.ScheduleAtFixedRate(ms, ms, nil) }},
			{"ScheduleWithFixedDelay(nil)", func() (*hourglass.Timeout, error) { return tm.ScheduleWithFixedDelay(ms, ms, nil) }},
			{"Schedule(s, nil)", func() (*hourglass.Timeout, error) { return tm.Schedule(every(ms), nil) }},
			{"Schedule(nil, f)", func() (*hourglass.Timeout, error) { return tm.Schedule(nil, f) }},
			{"ScheduleAtFixedRate(period 0)", func() (*hourglass.Timeout, error) { return tm.ScheduleAtFixedRate(ms, 0, f) }},
			{"ScheduleAtFixedRate(period -1)", func() (*hourglass.Timeout, error) { return tm.ScheduleAtFixedRate(ms, -1, f) }},
			{"ScheduleWithFixedDelay(delay 0)", func() (*hourglass.Timeout, error) { return tm.ScheduleWithFixedDelay(ms, 0, f) }},
			{"ScheduleWithFixedDelay(delay -1h)", func() (*hourglass.Timeout, error) { return tm.ScheduleWithFixedDelay(ms, -time.Hour, f) }},
			{"Schedule(no first time)", func() (*hourglass.Timeout, error) { return tm.Schedule(&countdown{every: ms}, f) }},
		} {
			checkError(t, c.name, c.call)
		}
		// None of them took the one place under the limit.
		must(t)(tm.AfterFunc(ms, f))
		if n := tm.Pending(); n != 1 {
			t.Errorf("Pending() = %d, want 1", n)
		}
		tm.Stop()
	})
}

// TestNew_InvalidOptions checks that every scheduling call on a Timer made
// with an invalid option returns the option's error.
func TestNew_InvalidOptions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, c := range []struct {
			name string
			opt  hourglass.Option
		}{
			{"WithHierarchicalWheel(500ns)", hourglass.WithHierarchicalWheel(500 * time.Nanosecond)},
			{"WithHierarchicalWheel(0)", hourglass.WithHierarchicalWheel(0)},
			{"WithHashedWheel(1ms, 0)", hourglass.WithHashedWheel(ms, 0)},
			{"WithHashedWheel(1ms, -1)", hourglass.WithHashedWheel(ms, -1)},
			{"WithHashedWheel(1ms, 2^30+1)", hourglass.WithHashedWheel(ms, 1<<30+1)},
			{"WithHashedWheel(0, 8)", hourglass.WithHashedWheel(0, 8)},
			{"WithMaxPending(-1)", hourglass.WithMaxPending(-1)},
			{"WithExecutor(nil)", hourglass.WithExecutor(nil)},
			{"WithPanicHandler(nil)", hourglass.WithPanicHandler(nil)},
			{"WithShards(0)", hourglass.WithShards(0)},
			{"WithShards(-1)", hourglass.WithShards(-1)},
		} {
			// The invalid option first and last, so a later valid one does
			// not hide it.
			for _, opts := range [][]hourglass.Option{{c.opt, hourglass.WithHeap()}, {hourglass.WithHeap(), c.opt}} {
				tm := hourglass.New(opts...)
				f := func() {}
				checkError(t, c.name+": AfterFunc", func() (*hourglass.Timeout, error) { return tm.AfterFunc(ms, f) })
				checkError(t, c.name+": AtFunc", func() (*hourglass.Timeout, error) { return tm.AtFunc(time.Now(), f) })
				checkError(t, c.name+": ScheduleAtFixedRate", func() (*hourglass.Timeout, error) { return tm.ScheduleAtFixedRate(ms, ms, f) })
				checkError(t, c.name+": ScheduleWithFixedDelay", func() (*hourglass.Timeout, error) { return tm.ScheduleWithFixedDelay(ms, ms, f) })
				checkError(t, c.name+": Schedule", func() (*hourglass.Timeout, error) { return tm.Schedule(every(ms), f) })
				if n := tm.Pending(); n != 0 {
					t.Errorf("%s: Pending() = %d, want 0", c.name, n)
				}
				if out := tm.Stop(); out != nil {
					t.Errorf("%s: Stop() = %v, want nil", c.name, out)
				}
			}
		}
	})
}

// checkError fails unless call returns a nil Timeout and an error whose
// text starts "hourglass: ".
func checkError(t *testing.T, name string, call func() (*hourglass.Timeout, error)) {
	t.Helper()
	to, err := call()
	if err == nil || !strings.HasPrefix(err.Error(), "hourglass: ") || to != nil {
		t.Errorf("%s = %v, %v; want nil and an error starting \"hourglass: \"", name, to, err)
	}
}

// TestTimer_IdleDriverSleeps checks that a Timer with nothing pending
// costs nothing: no driver before the first timeout, and no wake-up once
// every timeout has run or been cancelled.
func TestTimer_IdleDriverSleeps(t *testing.T) {
	forEachStructure(t, func(t *testing.T, s structure) {
		tm := s.newTimer(t)
		advance(1000 * time.Hour)
		if n, d := hourglass.DriverWakeups(tm), hourglass.StartedDrivers(tm); n != 0 || d != 0 {
			t.Errorf("empty Timer: %d wake-ups of %d drivers, want none", n, d)
		}

		for range 10 {
			must(t)(tm.AfterFunc(ms, func() {}))
		}
		advance(ms + s.tolerance)
		if n := tm.Pending(); n != 0 {
			t.Fatalf("Pending() = %d, want 0", n)
		}
		before := hourglass.DriverWakeups(tm)
		advance(1000 * time.Hour)
		if n := hourglass.DriverWakeups(tm) - before; n != 0 {
			t.Errorf("%d wake-ups in 1000 h after every timeout ran, want none", n)
		}

		// Cancelled timeouts cost at most the wake-up that scheduling the
		// first took and the one the driver had planned for them, and
		// nothing after that.
		before = hourglass.DriverWakeups(tm)
		var tos []*hourglass.Timeout
		for range 10 {
			tos = append(tos, must(t)(tm.AfterFunc(time.Hour, func() {})))
		}
		for _, to := range tos {
			to.Cancel()
		}
		advance(1000 * time.Hour)
		if n, d := hourglass.DriverWakeups(tm)-before, hourglass.StartedDrivers(tm); n > 2*uint64(d) {
			t.Errorf("%d wake-ups of %d drivers for timeouts cancelled at once, want at most 2 each", n, d)
		}
		before = hourglass.DriverWakeups(tm)
		advance(1000 * time.Hour)
		if n := hourglass.DriverWakeups(tm) - before; n != 0 {
			t.Errorf("%d wake-ups in 1000 h with every timeout cancelled, want none", n)
		}
		tm.Stop()
	})
}

// TestTimer_DriverSleepsUntilDeadline checks that a driver with timeouts
// pending wakes O(1) times per deadline, not once per tick, except the
// hashed wheel's, which wakes every tick while it holds anything.
func TestTimer_DriverSleepsUntilDeadline(t *testing.T) {
	forEachStructure(t, func(t *testing.T, s structure) {
		tm := s.newTimer(t, hourglass.WithShards(1))
		if !s.sleeps() {
			// The hashed wheel wakes each time its cursor reaches the
			// timeout's slot, once per turn of 8 ticks, plus once to start
			// and once after handing the timeout over.
			must(t)(tm.AfterFunc(100*ms, func() {}))
			advance(100*ms + s.tolerance)
			if got, limit := hourglass.DriverWakeups(tm), uint64(100/8+1+2); got > limit {
				t.Errorf("%d wake-ups for a timeout 100 ticks away, want at most %d", got, limit)
			}
			tm.Stop()
			return
		}

		// One timeout an hour away. The heap and the list wake to start,
		// at the deadline and after handing it over; the hierarchical wheel
		// also wakes once per level it cascades down, at most three for an
		// hour of 1 ms ticks (a level-3 slot covers 4.4 minutes).
		cascades := uint64(0)
		if s.tolerance > 0 {
			cascades = 3
		}
		r := newRecorder()
		must(t)(tm.AfterFunc(time.Hour, r.fn(0)))
		advance(time.Hour + s.tolerance)
		r.checkRanOnce(t, s, 0, time.Hour)
		if got, limit := hourglass.DriverWakeups(tm), 3+cascades; got > limit {
			t.Errorf("%d wake-ups for one timeout an hour away, want at most %d", got, limit)
		}

		// A hundred timeouts spread over an hour, each in a slot of its
		// own: two wake-ups each, at its deadline and after handing it
		// over, plus the cascades.
		before := hourglass.DriverWakeups(tm)
		r = newRecorder()
		const n = 100
		for i := range n {
			must(t)(tm.AfterFunc(time.Duration(i+1)*36*time.Second+time.Duration(i)*777*µs, r.fn(i)))
		}
		advance(time.Hour + 100*ms)
		if r.total() != n {
			t.Errorf("%d of %d timeouts ran", r.total(), n)
		}
		if got, limit := hourglass.DriverWakeups(tm)-before, (2+cascades)*n+1; got > limit {
			t.Errorf("%d wake-ups for %d timeouts over an hour, want at most %d", got, n, limit)
		}
		tm.Stop()
	})
}

// TestDefault checks the package-level functions on the Default Timer,
// outside any bubble: the Default Timer lives for the whole process.
func TestDefault(t *testing.T) {
	ran := make(chan struct{})
	to, err := hourglass.AfterFunc(ms, func() { close(ran) })
	if err != nil {
		t.Fatal(err)
	}
	periodic := make(chan struct{}, 1)
	p, err := hourglass.ScheduleAtFixedRate(0, ms, func() {
		select {
		case periodic <- struct{}{}:
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	d, err := hourglass.ScheduleWithFixedDelay(time.Hour, ms, func() {})
	if err != nil {
		t.Fatal(err)
	}
	at, err := hourglass.AtFunc(time.Now().Add(time.Hour), func() {})
	if err != nil {
		t.Fatal(err)
	}
	guard := time.After(10 * time.Second) // a failure guard, not a timing check
	for _, c := range []chan struct{}{ran, periodic} {
		select {
		case <-c:
		case <-guard:
			t.Fatal("package-level timeouts did not run within 10 s")
		}
	}
	if !to.Expired() {
		t.Error("Expired() = false after the callback ran")
	}
	if !p.Cancel() || !d.Cancel() || !at.Cancel() {
		t.Error("Cancel of a pending package-level timeout = false, want true")
	}
	if a, b := hourglass.Default(), hourglass.Default(); a != b {
		t.Error("Default() returned two Timers")
	}
}
