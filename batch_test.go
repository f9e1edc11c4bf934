package hourglass_test

// Batch's own tests, over the harness of harness_test.go: every
// structure, in virtual time. What it shares with Timer.Arm, the two
// entry points of value timeouts, is tested over both in handle_test.go.

import (
	"strings"
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

// TestBatch_CancelledInBatchWakesNothing checks that timeouts a batch
// schedules and cancels before it ends leave the driver as it was, as
// they never reach the structure: it makes as many passes in the 10 ms
// after the batch as in the 10 ms before (none for a structure with
// nothing due in that time; the hashed wheel looks every tick), while a
// timeout the same kind of batch leaves pending wakes it in time.
func TestBatch_CancelledInBatchWakesNothing(t *testing.T) {
	forEachStructure(t, func(t *testing.T, s structure) {
		tm := s.newTimer(t, hourglass.WithShards(1), hourglass.WithExecutor(hourglass.Inline))
		r := newRecorder()
		must(t)(tm.AfterFunc(time.Hour, r.fn(0))) // the driver sleeps for it
		advance(ms)
		before := tm.Stats().Wakeups
		advance(10 * ms)
		wakeups := tm.Stats().Wakeups
		tm.Batch(func(b *hourglass.Batch) {
			hs := make([]hourglass.Handle, 64)
			for i := range hs {
				hs[i] = add(t, b, time.Duration(i%8)*ms, r.fn(1))
			}
			for _, h := range hs {
				if !b.Cancel(h) {
					t.Fatal("Batch.Cancel of a timeout the batch scheduled = false, want true")
				}
			}
		})
		advance(10 * ms)
		if got, want := tm.Stats().Wakeups-wakeups, wakeups-before; got != want {
			t.Errorf("driver passes in the 10 ms after a batch that cancelled all it scheduled = %d, want %d as before it", got, want)
		}
		if n := tm.Pending(); n != 1 {
			t.Errorf("Pending() = %d, want 1", n)
		}
		tm.Batch(func(b *hourglass.Batch) {
			b.Cancel(add(t, b, 2*ms, r.fn(2)))
			add(t, b, 5*ms, r.fn(3))
			b.Cancel(add(t, b, 3*ms, r.fn(4)))
		})
		advance(5*ms + s.tolerance)
		r.checkNotRun(t, 1)
		r.checkNotRun(t, 2)
		r.checkRanOnce(t, s, 3, 21*ms+5*ms) // scheduled 21 ms after the recorder's start
		r.checkNotRun(t, 4)
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
