package hourglass_test

// Batch's conformance tests, over the harness of harness_test.go: every
// structure, in virtual time. The race test is in concurrency_test.go's
// manner, with real goroutines.

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

// add schedules f through b, failing the test on an error.
func add(t *testing.T, b *hourglass.Batch, d time.Duration, f func()) hourglass.Handle {
	t.Helper()
	h, err := b.AfterFunc(d, f)
	if err != nil {
		t.Fatalf("Batch.AfterFunc(%v): %v", d, err)
	}
	return h
}

// TestBatch_FiresOnTime checks that a timeout scheduled through a Batch
// runs once, never before its deadline and at most the structure's
// tolerance after it, with a driver that has not started yet and with one
// asleep for a later deadline, which the batch must wake.
func TestBatch_FiresOnTime(t *testing.T) {
	forEachSetup(t, executorSetups, func(t *testing.T, s structure, opts []hourglass.Option) {
		tm := s.newTimer(t, opts...)
		for _, offset := range []time.Duration{0, 300*µs + 7} {
			advance(offset)
			r := newRecorder()
			var last time.Duration
			tm.Batch(func(b *hourglass.Batch) {
				for i, d := range deadlines {
					if d <= s.horizon {
						add(t, b, d, r.fn(i))
						last = d
					}
				}
			})
			if n := tm.Pending(); n == 0 {
				t.Error("Pending() = 0 with batch timeouts scheduled")
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

		// The driver sleeps for a timeout 50 ms away; a batch files one due
		// in 5 ms, and one due at once.
		r := newRecorder()
		must(t)(tm.AfterFunc(50*ms, r.fn(0)))
		advance(ms)
		tm.Batch(func(b *hourglass.Batch) {
			add(t, b, 5*ms, r.fn(1))
			add(t, b, 0, r.fn(2))
			add(t, b, -time.Hour, r.fn(3))
		})
		advance(50*ms + s.tolerance)
		r.checkRanOnce(t, s, 0, 50*ms)
		r.checkRanOnce(t, s, 1, 6*ms)
		r.checkRanOnce(t, s, 2, ms)
		r.checkRanOnce(t, s, 3, ms)
		tm.Stop()
	})
}

// TestBatch_DeadlinesCountFromFirstSchedule checks the one clock reading
// of a batch: a timeout scheduled 10 ms into a batch, due in 20 ms, runs
// 20 ms after the batch's first AfterFunc.
func TestBatch_DeadlinesCountFromFirstSchedule(t *testing.T) {
	forEachStructure(t, func(t *testing.T, s structure) {
		tm := s.newTimer(t, hourglass.WithShards(1))
		r := newRecorder()
		tm.Batch(func(b *hourglass.Batch) {
			time.Sleep(5 * ms) // no reading yet: deadlines count from below
			add(t, b, 20*ms, r.fn(0))
			time.Sleep(10 * ms) // the driver has not started: nothing waits for the lock
			add(t, b, 20*ms, r.fn(1))
		})
		advance(30*ms + s.tolerance)
		r.checkRanOnce(t, s, 0, 25*ms)
		r.checkRanOnce(t, s, 1, 25*ms)
		tm.Stop()
	})
}

// TestBatch_Cancel checks Cancel through the Timer and through a batch:
// true once for a pending timeout, which then never runs; false for one
// that has run, for a second Cancel, and for the zero Handle.
func TestBatch_Cancel(t *testing.T) {
	forEachSetup(t, []setup{inlineOneShard, goroutinesShards}, func(t *testing.T, s structure, opts []hourglass.Option) {
		tm := s.newTimer(t, opts...)
		r := newRecorder()
		var hs [4]hourglass.Handle
		tm.Batch(func(b *hourglass.Batch) {
			for i := range hs {
				hs[i] = add(t, b, time.Duration(i+1)*10*ms, r.fn(i))
			}
			if !b.Cancel(hs[1]) {
				t.Error("Batch.Cancel of a pending timeout = false, want true")
			}
			if b.Cancel(hs[1]) {
				t.Error("second Batch.Cancel = true, want false")
			}
		})
		if !tm.Cancel(hs[2]) {
			t.Error("Timer.Cancel of a pending timeout = false, want true")
		}
		if tm.Cancel(hs[2]) {
			t.Error("second Timer.Cancel = true, want false")
		}
		if tm.Cancel(hourglass.Handle{}) {
			t.Error("Cancel of the zero Handle = true, want false")
		}
		advance(40*ms + s.tolerance)
		r.checkRanOnce(t, s, 0, 10*ms)
		r.checkNotRun(t, 1)
		r.checkNotRun(t, 2)
		r.checkRanOnce(t, s, 3, 40*ms)
		if tm.Cancel(hs[0]) || tm.Cancel(hs[3]) {
			t.Error("Cancel of a timeout that ran = true, want false")
		}
		tm.Batch(func(b *hourglass.Batch) {
			if b.Cancel(hs[0]) || b.Cancel(hourglass.Handle{}) {
				t.Error("Batch.Cancel of a timeout that ran, or of the zero Handle = true, want false")
			}
		})
		if n := tm.Pending(); n != 0 {
			t.Errorf("Pending() = %d, want 0", n)
		}
		tm.Stop()
	})
}

// TestBatch_StaleHandle checks the generation: a Handle whose timeout was
// cancelled or has run names nothing, even once its id is reused by a new
// timeout, which a Cancel of the stale Handle leaves alone.
func TestBatch_StaleHandle(t *testing.T) {
	forEachStructure(t, func(t *testing.T, s structure) {
		tm := s.newTimer(t, hourglass.WithShards(1), hourglass.WithExecutor(hourglass.Inline))
		r := newRecorder()
		var cancelled, again, ran hourglass.Handle
		tm.Batch(func(b *hourglass.Batch) {
			cancelled = add(t, b, 10*ms, r.fn(0))
			b.Cancel(cancelled)
			again = add(t, b, 10*ms, r.fn(1)) // the id just freed
			if b.Cancel(cancelled) {
				t.Error("Cancel of a cancelled Handle whose id is reused = true, want false")
			}
			ran = add(t, b, 5*ms, r.fn(2))
		})
		if again == cancelled {
			t.Fatal("a new timeout got the Handle of a cancelled one")
		}
		advance(5*ms + s.tolerance) // ran has run; its id is free
		tm.Batch(func(b *hourglass.Batch) {
			add(t, b, 10*ms, r.fn(3)) // ran's id
		})
		if tm.Cancel(ran) {
			t.Error("Cancel of a Handle that ran, whose id is reused = true, want false")
		}
		advance(20 * ms)
		r.checkNotRun(t, 0)
		r.checkRanOnce(t, s, 1, 10*ms)
		r.checkRanOnce(t, s, 2, 5*ms)
		r.checkRanOnce(t, s, 3, 5*ms+s.tolerance+10*ms)
		tm.Stop()
	})
}

// TestBatch_Shards checks a batch that cancels timeouts of several shards,
// taking their locks one at a time, and schedules on the shard of the
// last Handle it cancelled.
func TestBatch_Shards(t *testing.T) {
	forEachStructure(t, func(t *testing.T, s structure) {
		const shards = 4
		tm := s.newTimer(t, hourglass.WithShards(shards), hourglass.WithExecutor(hourglass.Inline))
		r := newRecorder()
		var hs []hourglass.Handle
		for i := range shards {
			hourglass.BatchOnShard(tm, i, func(b *hourglass.Batch) {
				hs = append(hs, add(t, b, 10*ms, r.fn(2*i)), add(t, b, 20*ms, r.fn(2*i+1)))
			})
		}
		var late hourglass.Handle
		tm.Batch(func(b *hourglass.Batch) {
			for i := shards - 1; i >= 0; i-- {
				if !b.Cancel(hs[2*i]) {
					t.Errorf("Cancel of shard %d's pending timeout = false, want true", i)
				}
			}
			late = add(t, b, 5*ms, r.fn(100))
		})
		if got := hourglass.HandleShard(late); got != 0 {
			t.Errorf("timeout scheduled after cancelling on shard 0 went to shard %d", got)
		}
		advance(20*ms + s.tolerance)
		for i := range shards {
			r.checkNotRun(t, 2*i)
			r.checkRanOnce(t, s, 2*i+1, 20*ms)
		}
		r.checkRanOnce(t, s, 100, 5*ms)
		tm.Stop()
	})
}

// TestBatch_Stop checks that Stop returns the batch timeouts that never
// ran, cancelled and with their deadlines, alongside the others; that
// none runs after it; and that a batch then schedules nothing.
func TestBatch_Stop(t *testing.T) {
	forEachSetup(t, executorSetups, func(t *testing.T, s structure, opts []hourglass.Option) {
		tm := s.newTimer(t, opts...)
		start := time.Now()
		r := newRecorder()
		const n = 100
		var hs []hourglass.Handle
		tm.Batch(func(b *hourglass.Batch) {
			for i := range n {
				hs = append(hs, add(t, b, time.Duration(i+1)*10*ms, r.fn(i)))
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
				t.Errorf("Stop did not return the batch timeout due at %v", d)
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
		tm.Batch(func(b *hourglass.Batch) {
			if h, err := b.AfterFunc(ms, func() {}); !errors.Is(err, hourglass.ErrStopped) || h != (hourglass.Handle{}) {
				t.Errorf("Batch.AfterFunc after Stop = %v, %v; want the zero Handle, ErrStopped", h, err)
			}
		})
		checkStopped(t, tm)
		advance(time.Hour)
		if got := r.total(); got != n/2 {
			t.Errorf("%d batch timeouts ran after Stop", got-n/2)
		}
	})
}

// TestBatch_MaxPending checks that batch timeouts take places under the
// pending limit, shared with the others, and give them back when they
// run or are cancelled.
func TestBatch_MaxPending(t *testing.T) {
	forEachStructure(t, func(t *testing.T, s structure) {
		tm := s.newTimer(t, hourglass.WithMaxPending(3))
		f := func() {}
		must(t)(tm.AfterFunc(time.Hour, f))
		var fires, held hourglass.Handle
		tm.Batch(func(b *hourglass.Batch) {
			fires = add(t, b, 10*ms, f)
			held = add(t, b, time.Hour, f)
			if _, err := b.AfterFunc(ms, f); !errors.Is(err, hourglass.ErrTooManyPending) {
				t.Errorf("Batch.AfterFunc at the limit: error %v, want ErrTooManyPending", err)
			}
		})
		if _, err := tm.AfterFunc(ms, f); !errors.Is(err, hourglass.ErrTooManyPending) {
			t.Errorf("AfterFunc at the limit: error %v, want ErrTooManyPending", err)
		}
		advance(10*ms + s.tolerance) // fires ran: one place back
		if tm.Cancel(fires) {
			t.Error("Cancel of a timeout that ran = true")
		}
		tm.Batch(func(b *hourglass.Batch) {
			add(t, b, time.Hour, f)
			if _, err := b.AfterFunc(ms, f); !errors.Is(err, hourglass.ErrTooManyPending) {
				t.Errorf("Batch.AfterFunc at the limit: error %v, want ErrTooManyPending", err)
			}
			if !b.Cancel(held) { // one place back
				t.Error("Cancel of a pending timeout = false")
			}
			add(t, b, time.Hour, f)
		})
		if n := tm.Pending(); n != 3 {
			t.Errorf("Pending() = %d, want 3", n)
		}
		tm.Stop()
	})
}

// TestBatch_Errors checks the errors of Batch.AfterFunc: a nil callback,
// an invalid option, both starting "hourglass: ", and that neither takes
// a place or holds a lock.
func TestBatch_Errors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tm := hourglass.New(hourglass.WithMaxPending(1))
		tm.Batch(func(b *hourglass.Batch) {
			if _, err := b.AfterFunc(ms, nil); err == nil || !strings.HasPrefix(err.Error(), "hourglass: ") {
				t.Errorf("Batch.AfterFunc(nil) error = %v, want one starting \"hourglass: \"", err)
			}
		})
		tm.Batch(func(b *hourglass.Batch) { add(t, b, ms, func() {}) })
		tm.Stop()

		bad := hourglass.New(hourglass.WithShards(0))
		bad.Batch(func(b *hourglass.Batch) {
			if _, err := b.AfterFunc(ms, func() {}); err == nil || !strings.HasPrefix(err.Error(), "hourglass: ") {
				t.Errorf("Batch.AfterFunc with an invalid option: error %v, want one starting \"hourglass: \"", err)
			}
			if b.Cancel(hourglass.Handle{}) {
				t.Error("Cancel on a Timer with an invalid option = true")
			}
		})
		if bad.Cancel(hourglass.Handle{}) {
			t.Error("Timer.Cancel on a Timer with an invalid option = true")
		}
	})
}

// TestBatch_Misuse checks the panics: a Batch used after its function
// returned, and Batch and Cancel on a zero Timer, each with a message
// that starts "hourglass: ". A panic in the function releases the lock.
func TestBatch_Misuse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tm := hourglass.New(hourglass.WithShards(1))
		defer tm.Stop()
		var kept *hourglass.Batch
		tm.Batch(func(b *hourglass.Batch) { kept = b })
		for name, call := range map[string]func(){
			"Batch.AfterFunc after return": func() { kept.AfterFunc(ms, func() {}) },
			"Batch.Cancel after return":    func() { kept.Cancel(hourglass.Handle{}) },
			"Batch on a zero Timer":        func() { new(hourglass.Timer).Batch(func(*hourglass.Batch) {}) },
			"Cancel on a zero Timer":       func() { new(hourglass.Timer).Cancel(hourglass.Handle{}) },
		} {
			checkPanics(t, name, call)
		}

		checkPanics(t, "panic in the function", func() {
			tm.Batch(func(b *hourglass.Batch) {
				add(t, b, ms, func() {})
				panic("hourglass: test")
			})
		})
		// The lock was released: this would deadlock otherwise.
		if n := tm.Pending(); n != 1 {
			t.Errorf("Pending() = %d after a panicking batch, want 1", n)
		}
	})
}

// checkPanics fails unless call panics with a string starting
// "hourglass: ".
func checkPanics(t *testing.T, name string, call func()) {
	t.Helper()
	defer func() {
		t.Helper()
		v := recover()
		if s, ok := v.(string); !ok || !strings.HasPrefix(s, "hourglass: ") {
			t.Errorf("%s: panic %v, want a string starting \"hourglass: \"", name, v)
		}
	}()
	call()
}

// TestConcurrent_BatchEachTimeoutEndsOnce checks, with real goroutines
// scheduling and cancelling through batches and through Timer.Cancel,
// racing with firings, with each other across shards and with Stop, that
// each batch timeout ends exactly one way: it runs once, one Cancel
// returns true, or Stop returns it.
func TestConcurrent_BatchEachTimeoutEndsOnce(t *testing.T) {
	const workers, batches, perBatch = 8, 200, 16
	forEachConcurrent(t, func(t *testing.T, s structure, opts []hourglass.Option, closeAfterStop func()) {
		tm := hourglass.New(append([]hourglass.Option{s.opt}, opts...)...)
		type life struct {
			h             hourglass.Handle
			runs, cancels atomic.Int32
		}
		var (
			lives   [workers * batches * perBatch]atomic.Pointer[life]
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
				for range batches {
					if done.Add(1) == workers*batches/2 {
						go func() { // Stop halfway, racing the workers
							defer close(stopper)
							out = tm.Stop()
						}()
					}
					tm.Batch(func(b *hourglass.Batch) {
						for range perBatch {
							switch op := rand.IntN(10); {
							case op < 6:
								l := &life{}
								h, err := b.AfterFunc(time.Duration(rand.Int64N(int64(2*ms))), func() { l.runs.Add(1); runs.ran() })
								if err != nil {
									continue // ErrStopped
								}
								l.h = h
								lives[created.Add(1)-1].Store(l)
							default:
								if l := pick(); l != nil && b.Cancel(l.h) {
									l.cancels.Add(1)
								}
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
}
