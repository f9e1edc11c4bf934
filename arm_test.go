package hourglass_test

// Timer.Arm's conformance tests, over the harness of harness_test.go
// (every structure, in virtual time), and its race test in
// concurrency_test.go's manner, with real goroutines.

import (
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hourglass-go/hourglass"
)

// arm schedules f with tm.Arm, failing the test on an error.
func arm(t *testing.T, tm *hourglass.Timer, d time.Duration, f func()) hourglass.Handle {
	t.Helper()
	h, err := tm.Arm(d, f)
	if err != nil {
		t.Fatalf("Arm(%v): %v", d, err)
	}
	return h
}

// TestArm_FiresOnTime checks that a timeout scheduled by Arm runs once,
// never before its deadline and at most the structure's tolerance after
// it, whether the deadlines count from a tick boundary or not, with a
// driver that has not started yet and with one asleep for a later
// deadline, which Arm must wake.
func TestArm_FiresOnTime(t *testing.T) {
	forEachSetup(t, executorSetups, func(t *testing.T, s structure, opts []hourglass.Option) {
		tm := s.newTimer(t, opts...)
		for _, offset := range []time.Duration{0, 300*µs + 7} {
			advance(offset)
			r := newRecorder()
			var last time.Duration
			for i, d := range deadlines {
				if d <= s.horizon {
					arm(t, tm, d, r.fn(i))
					last = d
				}
			}
			if n := tm.Pending(); n == 0 {
				t.Error("Pending() = 0 with armed timeouts")
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

		// The driver sleeps for a timeout 50 ms away; Arm files one due in
		// 5 ms, and ones due at once.
		r := newRecorder()
		arm(t, tm, 50*ms, r.fn(0))
		advance(ms)
		arm(t, tm, 5*ms, r.fn(1))
		arm(t, tm, 0, r.fn(2))
		arm(t, tm, -time.Hour, r.fn(3))
		advance(50*ms + s.tolerance)
		r.checkRanOnce(t, s, 0, 50*ms)
		r.checkRanOnce(t, s, 1, 6*ms)
		r.checkRanOnce(t, s, 2, ms)
		r.checkRanOnce(t, s, 3, ms)
		tm.Stop()
	})
}

// TestArm_Cancel checks Timer.Cancel of an armed timeout, on its own and
// through a Batch: true once for a pending timeout, which then never
// runs; false for one that has run and for a second Cancel; and a stale
// Handle, whose id a new timeout reuses, leaves that timeout alone.
func TestArm_Cancel(t *testing.T) {
	forEachSetup(t, []setup{inlineOneShard, goroutinesShards}, func(t *testing.T, s structure, opts []hourglass.Option) {
		tm := s.newTimer(t, opts...)
		r := newRecorder()
		var hs [4]hourglass.Handle
		for i := range hs {
			hs[i] = arm(t, tm, time.Duration(i+1)*10*ms, r.fn(i))
		}
		if !tm.Cancel(hs[1]) {
			t.Error("Cancel of a pending armed timeout = false, want true")
		}
		if tm.Cancel(hs[1]) {
			t.Error("second Cancel = true, want false")
		}
		again := arm(t, tm, 10*ms, r.fn(4)) // may reuse hs[1]'s id
		if again == hs[1] {
			t.Fatal("a new timeout got the Handle of a cancelled one")
		}
		if tm.Cancel(hs[1]) {
			t.Error("Cancel of a cancelled Handle, its id perhaps reused = true, want false")
		}
		tm.Batch(func(b *hourglass.Batch) {
			if !b.Cancel(hs[2]) {
				t.Error("Batch.Cancel of a pending armed timeout = false, want true")
			}
		})
		advance(40*ms + s.tolerance)
		r.checkRanOnce(t, s, 0, 10*ms)
		r.checkNotRun(t, 1)
		r.checkNotRun(t, 2)
		r.checkRanOnce(t, s, 3, 40*ms)
		r.checkRanOnce(t, s, 4, 10*ms)
		if tm.Cancel(hs[0]) || tm.Cancel(hs[3]) || tm.Cancel(again) {
			t.Error("Cancel of a timeout that ran = true, want false")
		}
		if n := tm.Pending(); n != 0 {
			t.Errorf("Pending() = %d, want 0", n)
		}
		tm.Stop()
	})
}

// TestArm_Stop checks that Stop returns the armed timeouts that never
// ran, cancelled and with their deadlines, alongside the others; that
// none runs after it; and that Arm then returns ErrStopped.
func TestArm_Stop(t *testing.T) {
	forEachSetup(t, executorSetups, func(t *testing.T, s structure, opts []hourglass.Option) {
		tm := s.newTimer(t, opts...)
		start := time.Now()
		r := newRecorder()
		const n = 100
		var hs []hourglass.Handle
		for i := range n {
			hs = append(hs, arm(t, tm, time.Duration(i+1)*10*ms, r.fn(i)))
		}
		to := must(t)(tm.AfterFunc(time.Hour, func() {}))
		advance(505 * ms) // 50 have run, 50 are pending

		out := tm.Stop()
		if len(out) != n/2+1 {
			t.Fatalf("Stop returned %d timeouts, want %d", len(out), n/2+1)
		}
		due := make(map[time.Duration]bool)
		for _, o := range out {
			if !o.Cancelled() || o.Expired() || o.Cancel() {
				t.Errorf("timeout returned by Stop: Cancelled, Expired, Cancel = %v, %v, %v; want true, false, false",
					o.Cancelled(), o.Expired(), o.Cancel())
			}
			if o != to {
				due[o.Deadline().Sub(start)] = true
			}
		}
		for i := n / 2; i < n; i++ {
			if d := time.Duration(i+1) * 10 * ms; !due[d] {
				t.Errorf("Stop did not return the armed timeout due at %v", d)
			}
		}
		for i := range n / 2 {
			r.checkRanOnce(t, s, i, time.Duration(i+1)*10*ms)
		}
		for _, h := range hs {
			if tm.Cancel(h) {
				t.Error("Cancel after Stop = true, want false")
			}
		}
		if h, err := tm.Arm(ms, func() {}); !errors.Is(err, hourglass.ErrStopped) || h != (hourglass.Handle{}) {
			t.Errorf("Arm after Stop = %v, %v; want the zero Handle, ErrStopped", h, err)
		}
		checkStopped(t, tm)
		advance(time.Hour)
		if got := r.total(); got != n/2 {
			t.Errorf("%d armed timeouts ran after Stop", got-n/2)
		}
	})
}

// TestArm_MaxPending checks that armed timeouts take places under the
// pending limit, shared with the others, and give them back when they
// run or are cancelled.
func TestArm_MaxPending(t *testing.T) {
	forEachStructure(t, func(t *testing.T, s structure) {
		tm := s.newTimer(t, hourglass.WithMaxPending(3))
		f := func() {}
		must(t)(tm.AfterFunc(time.Hour, f))
		fires := arm(t, tm, 10*ms, f)
		held := arm(t, tm, time.Hour, f)
		if _, err := tm.Arm(ms, f); !errors.Is(err, hourglass.ErrTooManyPending) {
			t.Errorf("Arm at the limit: error %v, want ErrTooManyPending", err)
		}
		advance(10*ms + s.tolerance) // fires ran: one place back
		if tm.Cancel(fires) {
			t.Error("Cancel of a timeout that ran = true")
		}
		arm(t, tm, time.Hour, f)
		if _, err := tm.Arm(ms, f); !errors.Is(err, hourglass.ErrTooManyPending) {
			t.Errorf("Arm at the limit: error %v, want ErrTooManyPending", err)
		}
		if !tm.Cancel(held) { // one place back
			t.Error("Cancel of a pending timeout = false")
		}
		arm(t, tm, time.Hour, f)
		if n := tm.Pending(); n != 3 {
			t.Errorf("Pending() = %d, want 3", n)
		}
		tm.Stop()
	})
}

// TestArm_Errors checks Arm's errors and panic: a nil callback and an
// invalid option, both starting "hourglass: " and neither taking a place,
// and a zero Timer, which panics.
func TestArm_Errors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tm := hourglass.New(hourglass.WithMaxPending(1))
		if h, err := tm.Arm(ms, nil); err == nil || !strings.HasPrefix(err.Error(), "hourglass: ") || h != (hourglass.Handle{}) {
			t.Errorf("Arm(nil) = %v, %v; want the zero Handle and an error starting \"hourglass: \"", h, err)
		}
		arm(t, tm, ms, func() {}) // the nil func took no place
		tm.Stop()

		bad := hourglass.New(hourglass.WithShards(0))
		if _, err := bad.Arm(ms, func() {}); err == nil || !strings.HasPrefix(err.Error(), "hourglass: ") {
			t.Errorf("Arm with an invalid option: error %v, want one starting \"hourglass: \"", err)
		}
		checkPanics(t, "Arm on a zero Timer", func() { new(hourglass.Timer).Arm(ms, func() {}) })
	})
}

// TestArm_AllocatesNothing checks that arming and cancelling a timeout
// allocates nothing once the structure has room.
func TestArm_AllocatesNothing(t *testing.T) {
	tm := hourglass.New(hourglass.WithShards(1))
	defer tm.Stop()
	f := func() {}
	for range 10 { // the value structure and a page of its table
		h, _ := tm.Arm(time.Hour, f)
		tm.Cancel(h)
	}
	if n := testing.AllocsPerRun(1000, func() {
		h, _ := tm.Arm(time.Hour, f)
		tm.Cancel(h)
	}); n != 0 {
		t.Errorf("Arm and Cancel: %v allocations, want 0", n)
	}
}

// TestConcurrent_ArmEachTimeoutEndsOnce checks, with real goroutines
// arming and cancelling, racing with firings, with each other across
// shards and with Stop, that each armed timeout ends exactly one way: it
// runs once, one Cancel returns true, or Stop returns it.
func TestConcurrent_ArmEachTimeoutEndsOnce(t *testing.T) {
	const workers, ops = 8, 2000
	forEachConcurrent(t, func(t *testing.T, s structure, opts []hourglass.Option, closeAfterStop func()) {
		tm := hourglass.New(append([]hourglass.Option{s.opt}, opts...)...)
		type life struct {
			h             hourglass.Handle
			runs, cancels atomic.Int32
		}
		var (
			lives   [workers * ops]atomic.Pointer[life]
			created atomic.Int64
			runs    = newRunCounter()
			out     []*hourglass.Timeout
			done    atomic.Int64
			stopper = make(chan struct{})
		)
		pick := func() *life {
			if n := created.Load(); n > 0 {
				return lives[rand.Int64N(n)].Load() // nil if not yet stored
			}
			return nil
		}
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for range ops {
					if done.Add(1) == workers*ops/2 {
						go func() { // Stop halfway, racing the workers
							defer close(stopper)
							out = tm.Stop()
						}()
					}
					if rand.IntN(10) < 6 {
						l := &life{}
						h, err := tm.Arm(time.Duration(rand.Int64N(int64(2*ms))), func() { l.runs.Add(1); runs.ran() })
						if err != nil {
							continue // ErrStopped
						}
						l.h = h
						lives[created.Add(1)-1].Store(l)
					} else if l := pick(); l != nil && tm.Cancel(l.h) {
						l.cancels.Add(1)
					}
				}
			})
		}
		wg.Wait()
		<-stopper
		closeAfterStop()

		n := created.Load()
		var cancels int64
		for i := range n {
			cancels += int64(lives[i].Load().cancels.Load())
		}
		runs.waitFor(t, n-cancels-int64(len(out)))
		for i := range n {
			l := lives[i].Load()
			if r, c := l.runs.Load(), l.cancels.Load(); r+c > 1 {
				t.Errorf("timeout ran %d times and was cancelled %d times", r, c)
			}
		}
		if got := runs.n.Load() + cancels + int64(len(out)); got != n {
			t.Errorf("%d timeouts armed; %d runs, %d cancels and %d returned by Stop make %d",
				n, runs.n.Load(), cancels, len(out), got)
		}
		for _, to := range out {
			if !to.Cancelled() {
				t.Error("a timeout returned by Stop is not cancelled")
			}
		}
	})
}
