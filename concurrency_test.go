package hourglass_test

// These tests use real goroutines and the real clock, outside synctest, so
// that the race detector sees schedules, cancels, resets, stops and firings
// truly interleave. They assert no timing, only how each timeout ends, and
// wait for callbacks by counting them, with a generous guard against a
// hang.

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass"
)

// concurrentExecutors are the executors the concurrent tests run over.
// Each returns the options and a function to call after Stop, before
// waiting for the callbacks.
var concurrentExecutors = []struct {
	name string
	make func() (opts []hourglass.Option, closeAfterStop func())
}{
	{"Inline", func() ([]hourglass.Option, func()) {
		return []hourglass.Option{hourglass.WithExecutor(hourglass.Inline)}, func() {}
	}},
	{"Goroutines", func() ([]hourglass.Option, func()) { return nil, func() {} }},
	{"Pool", func() ([]hourglass.Option, func()) {
		p := hourglass.NewPool(4, 64)
		return []hourglass.Option{hourglass.WithExecutor(p)}, p.Close
	}},
}

// forEachConcurrent runs test for every structure and executor, as
// subtests outside any bubble.
func forEachConcurrent(t *testing.T, test func(t *testing.T, s structure, opts []hourglass.Option, closeAfterStop func())) {
	for _, s := range structures {
		t.Run(s.name, func(t *testing.T) {
			for _, e := range concurrentExecutors {
				t.Run(e.name, func(t *testing.T) {
					opts, closeAfterStop := e.make()
					test(t, s, opts, closeAfterStop)
				})
			}
		})
	}
}

// runCounter counts callback runs and lets a test wait for a number of
// them.
type runCounter struct {
	n    atomic.Int64
	tick chan struct{} // buffered 1: a run happened
}

func newRunCounter() *runCounter { return &runCounter{tick: make(chan struct{}, 1)} }

func (c *runCounter) ran() {
	c.n.Add(1)
	select {
	case c.tick <- struct{}{}:
	default:
	}
}

// waitFor waits until at least want runs have happened, failing the test
// after ten seconds: a guard against a hang, not a timing assertion.
func (c *runCounter) waitFor(t *testing.T, want int64) {
	t.Helper()
	guard := time.After(10 * time.Second)
	for c.n.Load() < want {
		select {
		case <-c.tick:
		case <-guard:
			t.Fatalf("%d callbacks ran within 10 s, want %d", c.n.Load(), want)
		}
	}
}

// life tracks one timeout through a concurrent test: how many times it
// was armed (scheduled, or re-armed by a Reset that returned false), and
// how each arming ended.
type life struct {
	to      atomic.Pointer[hourglass.Timeout]
	armed   atomic.Int32
	runs    atomic.Int32
	cancels atomic.Int32 // Cancel calls that returned true
	stopped atomic.Int32 // times Stop returned it
}

// TestConcurrent_EachTimeoutEndsOnce checks, under schedules, cancels and
// resets from many goroutines racing with firings and with Stop, that each
// arming of a timeout ends exactly one way: it runs once, one Cancel
// returns true, or Stop returns it.
func TestConcurrent_EachTimeoutEndsOnce(t *testing.T) {
	const workers, ops = 8, 2000
	forEachConcurrent(t, func(t *testing.T, s structure, opts []hourglass.Option, closeAfterStop func()) {
		tm := hourglass.New(append([]hourglass.Option{s.opt}, opts...)...)
		var (
			lives   [workers * ops]atomic.Pointer[life]
			created atomic.Int64
			runs    = newRunCounter()
			// resets holds off Stop while a Reset runs: a Reset racing Stop
			// may or may not re-arm, and the count of armings must be exact.
			resets  sync.RWMutex
			stopped bool // guarded by resets
			out     []*hourglass.Timeout
			done    atomic.Int64          // operations done, to call Stop half way
			stopper = make(chan struct{}) // closed once Stop has returned
		)
		delay := func() time.Duration { return time.Duration(rand.Int64N(int64(2 * ms))) }
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
							resets.Lock()
							defer resets.Unlock()
							out, stopped = tm.Stop(), true
						}()
					}
					switch op := rand.IntN(10); {
					case op < 5:
						l := &life{}
						to, err := tm.AfterFunc(delay(), func() { l.runs.Add(1); runs.ran() })
						if err != nil {
							continue // ErrStopped
						}
						l.armed.Store(1)
						l.to.Store(to)
						lives[created.Add(1)-1].Store(l)
					case op < 7:
						if l := pick(); l != nil && l.to.Load().Cancel() {
							l.cancels.Add(1)
						}
					case op < 9:
						resets.RLock()
						if l := pick(); l != nil && !stopped && !l.to.Load().Reset(delay()) {
							l.armed.Add(1) // it had ended: Reset armed it again
						}
						resets.RUnlock()
					default:
						if l := pick(); l != nil {
							to := l.to.Load()
							_, _, _ = to.Expired(), to.Cancelled(), to.Deadline()
						}
						_ = tm.Pending()
					}
				}
			})
		}
		wg.Wait()
		<-stopper
		closeAfterStop()

		n := int(created.Load())
		index := make(map[*hourglass.Timeout]*life, n)
		var armed, ended int64
		for i := range n {
			l := lives[i].Load()
			index[l.to.Load()] = l
			armed += int64(l.armed.Load())
			ended += int64(l.cancels.Load())
		}
		for _, to := range out {
			l := index[to]
			if l == nil {
				t.Fatal("Stop returned a timeout that was never scheduled")
			}
			l.stopped.Add(1)
			ended++
		}
		runs.waitFor(t, armed-ended)
		for i := range n {
			l := lives[i].Load()
			if got := l.runs.Load() + l.cancels.Load() + l.stopped.Load(); got != l.armed.Load() {
				t.Errorf("timeout armed %d times ran %d times, was cancelled %d times and returned by Stop %d times",
					l.armed.Load(), l.runs.Load(), l.cancels.Load(), l.stopped.Load())
			}
		}
		if t.Failed() {
			return
		}
		t.Logf("%d timeouts armed %d times: %d runs, %d cancels, %d returned by Stop",
			n, armed, runs.n.Load(), ended-int64(len(out)), len(out))
	})
}

// TestConcurrent_CancelRacesFiring checks that when several goroutines
// Cancel the same timeout while it fires, at most one Cancel returns true,
// and exactly one if the timeout is periodic, which would otherwise run for
// ever; and that Pending, Expired, Cancelled and Deadline may be read all
// the while.
func TestConcurrent_CancelRacesFiring(t *testing.T) {
	const n, cancellers = 300, 4
	forEachConcurrent(t, func(t *testing.T, s structure, opts []hourglass.Option, closeAfterStop func()) {
		tm := hourglass.New(append([]hourglass.Option{s.opt}, opts...)...)
		runs := newRunCounter()
		type tracked struct {
			to       *hourglass.Timeout
			periodic bool
			runs     atomic.Int32
			cancels  atomic.Int32
		}
		all := make([]*tracked, n)
		for i := range all {
			tr := &tracked{periodic: i%3 == 0}
			d := time.Duration(rand.Int64N(int64(2 * ms)))
			var err error
			if tr.periodic {
				tr.to, err = tm.ScheduleAtFixedRate(d, 100*µs, func() { tr.runs.Add(1) })
			} else {
				tr.to, err = tm.AfterFunc(d, func() { tr.runs.Add(1); runs.ran() })
			}
			if err != nil {
				t.Fatal(err)
			}
			all[i] = tr
		}

		stopReading := make(chan struct{})
		var readers sync.WaitGroup
		for range 2 {
			readers.Go(func() {
				for {
					select {
					case <-stopReading:
						return
					default:
					}
					to := all[rand.IntN(n)].to
					_, _, _, _ = tm.Pending(), to.Expired(), to.Cancelled(), to.Deadline()
				}
			})
		}
		var wg sync.WaitGroup
		for _, tr := range all {
			for range cancellers {
				wg.Go(func() {
					for range rand.IntN(100) {
						_ = tr.to.Expired() // a few steps of spin, so cancels straddle the firing
					}
					if tr.to.Cancel() {
						tr.cancels.Add(1)
					}
				})
			}
		}
		wg.Wait()
		close(stopReading)
		readers.Wait()
		if out := tm.Stop(); len(out) != 0 {
			t.Errorf("Stop returned %d timeouts after every one was cancelled", len(out))
		}
		closeAfterStop()

		var oneShotRuns int64
		for i, tr := range all {
			c := tr.cancels.Load()
			switch {
			case tr.periodic && c != 1:
				t.Errorf("periodic timeout %d: %d Cancels returned true, want 1", i, c)
			case !tr.periodic && c > 1:
				t.Errorf("timeout %d: %d Cancels returned true, want at most 1", i, c)
			case !tr.periodic && c == 0:
				oneShotRuns++
			}
			if !tr.periodic && c == 1 && !tr.to.Cancelled() {
				t.Errorf("timeout %d: Cancel returned true but Cancelled() = false", i)
			}
		}
		// Wait for every one-shot that was not cancelled to run, then
		// check that each ran exactly once and no cancelled one ran.
		runs.waitFor(t, oneShotRuns)
		for i, tr := range all {
			if !tr.periodic {
				if got := tr.runs.Load() + tr.cancels.Load(); got != 1 {
					t.Errorf("timeout %d ran %d times and was cancelled %d times, want one of them once", i, tr.runs.Load(), tr.cancels.Load())
				}
			}
		}
	})
}
