package hourglass_test

// The conformance tests of value timeouts, those named by a Handle, run
// over their two entry points (entryPoints): Timer.Arm with Timer.Cancel,
// one call each, and a Batch's AfterFunc and Cancel. Over the harness of
// harness_test.go (every structure, in virtual time), and a race test in
// concurrency_test.go's manner, with real goroutines. What only one entry
// point has is tested in arm_test.go and batch_test.go.

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

// handleOps schedules and cancels value timeouts through one entry point.
type handleOps struct {
	schedule func(d time.Duration, f func()) (hourglass.Handle, error)
	cancel   func(h hourglass.Handle) bool
}

// entryPoint is a way in for value timeouts: session calls fn with the
// entry point's operations on tm, for Arm the Timer's own methods, for a
// Batch those of one Batch, held while fn runs.
type entryPoint struct {
	name    string
	session func(tm *hourglass.Timer, fn func(o handleOps))
}

var entryPoints = []entryPoint{
	{name: "Arm", session: func(tm *hourglass.Timer, fn func(o handleOps)) {
		fn(handleOps{schedule: tm.Arm, cancel: tm.Cancel})
	}},
	{name: "Batch", session: func(tm *hourglass.Timer, fn func(o handleOps)) {
		tm.Batch(func(b *hourglass.Batch) { fn(handleOps{schedule: b.AfterFunc, cancel: b.Cancel}) })
	}},
}

// forEachEntryPoint runs test as a subtest for each entry point.
func forEachEntryPoint(t *testing.T, test func(t *testing.T, e entryPoint)) {
	for _, e := range entryPoints {
		t.Run(e.name, func(t *testing.T) { test(t, e) })
	}
}

// mustSchedule schedules f through o, failing the test on an error.
func mustSchedule(t *testing.T, e entryPoint, o handleOps, d time.Duration, f func()) hourglass.Handle {
	t.Helper()
	h, err := o.schedule(d, f)
	if err != nil {
		t.Fatalf("%s (%v): %v", e.name, d, err)
	}
	return h
}

// TestHandle_FiresOnTime checks that a value timeout runs once, never
// before its deadline and at most the structure's tolerance after it,
// whether the deadlines count from a tick boundary or not, with a driver
// that has not started yet and with one asleep for a later deadline (a
// *Timeout's or a value timeout's), which the entry point must wake.
func TestHandle_FiresOnTime(t *testing.T) {
	forEachEntryPoint(t, func(t *testing.T, e entryPoint) {
		forEachSetup(t, executorSetups, func(t *testing.T, s structure, opts []hourglass.Option) {
			tm := s.newTimer(t, opts...)
			for _, offset := range []time.Duration{0, 300*µs + 7} {
				advance(offset)
				r := newRecorder()
				var last time.Duration
				e.session(tm, func(o handleOps) {
					for i, d := range deadlines {
						if d <= s.horizon {
							mustSchedule(t, e, o, d, r.fn(i))
							last = d
						}
					}
				})
				if n := tm.Pending(); n == 0 {
					t.Error("Pending() = 0 with value timeouts scheduled")
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

			// The driver sleeps for a timeout 50 ms away, made by
			// AfterFunc or by the entry point; the entry point files one
			// due in 5 ms, and ones due at once.
			for _, first := range []string{"AfterFunc", e.name} {
				r := newRecorder()
				if first == "AfterFunc" {
					must(t)(tm.AfterFunc(50*ms, r.fn(0)))
				} else {
					e.session(tm, func(o handleOps) { mustSchedule(t, e, o, 50*ms, r.fn(0)) })
				}
				advance(ms)
				e.session(tm, func(o handleOps) {
					mustSchedule(t, e, o, 5*ms, r.fn(1))
					mustSchedule(t, e, o, 0, r.fn(2))
					mustSchedule(t, e, o, -time.Hour, r.fn(3))
				})
				advance(50*ms + s.tolerance)
				r.checkRanOnce(t, s, 0, 50*ms)
				r.checkRanOnce(t, s, 1, 6*ms)
				r.checkRanOnce(t, s, 2, ms)
				r.checkRanOnce(t, s, 3, ms)
			}
			tm.Stop()
		})
	})
}

// TestHandle_Stop checks that Stop returns the value timeouts that never
// ran, cancelled and with their deadlines, alongside the others; that
// none runs after it; and that the entry point then schedules nothing.
func TestHandle_Stop(t *testing.T) {
	forEachEntryPoint(t, func(t *testing.T, e entryPoint) {
		forEachSetup(t, executorSetups, func(t *testing.T, s structure, opts []hourglass.Option) {
			tm := s.newTimer(t, opts...)
			start := time.Now()
			r := newRecorder()
			const n = 100
			var hs []hourglass.Handle
			e.session(tm, func(o handleOps) {
				for i := range n {
					hs = append(hs, mustSchedule(t, e, o, time.Duration(i+1)*10*ms, r.fn(i)))
				}
			})
			to := must(t)(tm.AfterFunc(time.Hour, func() {}))
			advance(505 * ms) // 50 have run, 50 are pending

			out := tm.Stop()
			if len(out) != n/2+1 {
				t.Fatalf("Stop returned %d timeouts, want %d", len(out), n/2+1)
			}
			due := make(map[time.Duration]bool)
			for _, o := range out {
				if !o.Cancelled() || o.Expired() || o.Cancel() || o.Reset(ms) {
					t.Errorf("timeout returned by Stop: Cancelled, Expired, Cancel, Reset = %v, %v, %v, %v; want true, false, false, false",
						o.Cancelled(), o.Expired(), o.Cancel(), o.Reset(ms))
				}
				if o != to {
					due[o.Deadline().Sub(start)] = true
				}
			}
			for i := n / 2; i < n; i++ {
				if d := time.Duration(i+1) * 10 * ms; !due[d] {
					t.Errorf("Stop did not return the value timeout due at %v", d)
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
			e.session(tm, func(o handleOps) {
				if h, err := o.schedule(ms, func() {}); !errors.Is(err, hourglass.ErrStopped) || h != (hourglass.Handle{}) {
					t.Errorf("%s after Stop = %v, %v; want the zero Handle, ErrStopped", e.name, h, err)
				}
			})
			checkStopped(t, tm)
			advance(time.Hour)
			if got := r.total(); got != n/2 {
				t.Errorf("%d value timeouts ran after Stop", got-n/2)
			}
		})
	})
}

// TestHandle_MaxPending checks that value timeouts take places under the
// pending limit, shared with the others, and give them back when they
// run or are cancelled.
func TestHandle_MaxPending(t *testing.T) {
	forEachEntryPoint(t, func(t *testing.T, e entryPoint) {
		forEachStructure(t, func(t *testing.T, s structure) {
			tm := s.newTimer(t, hourglass.WithMaxPending(3))
			f := func() {}
			must(t)(tm.AfterFunc(time.Hour, f))
			var fires, held hourglass.Handle
			e.session(tm, func(o handleOps) {
				fires = mustSchedule(t, e, o, 10*ms, f)
				held = mustSchedule(t, e, o, time.Hour, f)
				if _, err := o.schedule(ms, f); !errors.Is(err, hourglass.ErrTooManyPending) {
					t.Errorf("%s at the limit: error %v, want ErrTooManyPending", e.name, err)
				}
			})
			if _, err := tm.AfterFunc(ms, f); !errors.Is(err, hourglass.ErrTooManyPending) {
				t.Errorf("AfterFunc at the limit: error %v, want ErrTooManyPending", err)
			}
			advance(10*ms + s.tolerance) // fires ran: one place back
			if tm.Cancel(fires) {
				t.Error("Cancel of a timeout that ran = true")
			}
			e.session(tm, func(o handleOps) {
				mustSchedule(t, e, o, time.Hour, f)
				if _, err := o.schedule(ms, f); !errors.Is(err, hourglass.ErrTooManyPending) {
					t.Errorf("%s at the limit: error %v, want ErrTooManyPending", e.name, err)
				}
				if !o.cancel(held) { // one place back
					t.Error("Cancel of a pending timeout = false")
				}
				mustSchedule(t, e, o, time.Hour, f)
			})
			if n := tm.Pending(); n != 3 {
				t.Errorf("Pending() = %d, want 3", n)
			}
			tm.Stop()
		})
	})
}

// TestHandle_Errors checks the entry point's errors: a nil callback and
// an invalid option, both starting "hourglass: " and neither taking a
// place or holding a lock, with the zero Handle; a Cancel of the zero
// Handle on a Timer with an invalid option; and the panic of a zero
// Timer.
func TestHandle_Errors(t *testing.T) {
	forEachEntryPoint(t, func(t *testing.T, e entryPoint) {
		synctest.Test(t, func(t *testing.T) {
			tm := hourglass.New(hourglass.WithMaxPending(1))
			e.session(tm, func(o handleOps) {
				if h, err := o.schedule(ms, nil); err == nil || !strings.HasPrefix(err.Error(), "hourglass: ") || h != (hourglass.Handle{}) {
					t.Errorf("%s(nil) = %v, %v; want the zero Handle and an error starting \"hourglass: \"", e.name, h, err)
				}
			})
			e.session(tm, func(o handleOps) { mustSchedule(t, e, o, ms, func() {}) }) // the nil func took no place
			tm.Stop()

			bad := hourglass.New(hourglass.WithShards(0))
			e.session(bad, func(o handleOps) {
				if _, err := o.schedule(ms, func() {}); err == nil || !strings.HasPrefix(err.Error(), "hourglass: ") {
					t.Errorf("%s with an invalid option: error %v, want one starting \"hourglass: \"", e.name, err)
				}
				if o.cancel(hourglass.Handle{}) {
					t.Errorf("%s's Cancel on a Timer with an invalid option = true", e.name)
				}
			})
			if bad.Cancel(hourglass.Handle{}) {
				t.Error("Timer.Cancel on a Timer with an invalid option = true")
			}
			checkPanics(t, e.name+" on a zero Timer", func() {
				e.session(new(hourglass.Timer), func(o handleOps) { o.schedule(ms, func() {}) })
			})
		})
	})
}

// TestConcurrent_HandleEachTimeoutEndsOnce checks, with real goroutines
// scheduling and cancelling through the entry point and through
// Timer.Cancel, racing with firings, with each other across shards and
// with Stop, that each value timeout ends exactly one way: it runs once,
// one Cancel returns true, or Stop returns it.
func TestConcurrent_HandleEachTimeoutEndsOnce(t *testing.T) {
	const workers, rounds, perRound = 8, 200, 16
	forEachEntryPoint(t, func(t *testing.T, e entryPoint) {
		forEachConcurrent(t, func(t *testing.T, s structure, opts []hourglass.Option, closeAfterStop func()) {
			tm := hourglass.New(append([]hourglass.Option{s.opt}, opts...)...)
			type life struct {
				h             hourglass.Handle
				runs, cancels atomic.Int32
			}
			var (
				lives   [workers * rounds * perRound]atomic.Pointer[life]
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
					for range rounds {
						if done.Add(1) == workers*rounds/2 {
							go func() { // Stop halfway, racing the workers
								defer close(stopper)
								out = tm.Stop()
							}()
						}
						e.session(tm, func(o handleOps) {
							for range perRound {
								if rand.IntN(10) < 6 {
									l := &life{}
									h, err := o.schedule(time.Duration(rand.Int64N(int64(2*ms))), func() { l.runs.Add(1); runs.ran() })
									if err != nil {
										continue // ErrStopped
									}
									l.h = h
									lives[created.Add(1)-1].Store(l)
								} else if l := pick(); l != nil && o.cancel(l.h) {
									l.cancels.Add(1)
								}
							}
						})
						if l := pick(); l != nil && tm.Cancel(l.h) {
							l.cancels.Add(1)
						}
						_ = tm.Pending()
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
				t.Errorf("%d timeouts scheduled; %d runs, %d cancels and %d returned by Stop make %d",
					n, runs.n.Load(), cancels, len(out), got)
			}
			for _, to := range out {
				if !to.Cancelled() {
					t.Error("a timeout returned by Stop is not cancelled")
				}
			}
			if t.Failed() {
				return
			}
			t.Logf("%d timeouts: %d runs, %d cancels, %d returned by Stop", n, runs.n.Load(), cancels, len(out))
		})
	})
}
