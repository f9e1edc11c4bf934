package hourglass_test

// Timer.Arm's own tests: what it shares with a Batch, the two entry
// points of value timeouts, is tested over both in handle_test.go.

import (
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

// TestArm_ReservedUntilPass checks that Arm leaves its timeout's entry
// reserved, out of the wheel's slots, until the shard's driver passes or
// anything reads the structure whole, so that a Cancel before then (a
// request timeout's) is a store into the list of reserved ids and never
// touches the wheel; and that a reserved timeout still fires on time
// (the driver files what is reserved before it advances).
//
// The driver must not pass between an Arm and the look at what is
// reserved, or the test races it: the first Arm starts the driver, which
// passes at once, so the test arms first, lets the driver settle asleep
// until that deadline, and only then arms what it looks at, never before
// the driver's wake-up (an earlier deadline would wake it).
func TestArm_ReservedUntilPass(t *testing.T) {
	forEachSetup(t, []setup{inlineOneShard}, func(t *testing.T, s structure, opts []hourglass.Option) {
		tm := s.newTimer(t, opts...)
		r := newRecorder()
		arm(t, tm, 10*ms, r.fn(0))
		synctest.Wait() // the driver has filed it and sleeps until it is due
		if n := hourglass.ArmsReserved(tm, 0); n != 0 {
			t.Fatalf("after the driver's first pass: %d reserved, want 0", n)
		}
		far := arm(t, tm, time.Hour, func() {})
		if n := hourglass.ArmsReserved(tm, 0); n != 1 {
			t.Fatalf("after Arm: %d reserved, want 1", n)
		}
		if !tm.Cancel(far) {
			t.Fatal("Cancel of a reserved timeout = false, want true")
		}
		if n := hourglass.ArmsReserved(tm, 0); n != 0 {
			t.Fatalf("after Cancel: %d reserved, want 0", n)
		}
		if tm.Cancel(far) {
			t.Error("second Cancel = true, want false")
		}
		arm(t, tm, time.Hour, func() {})
		if n := tm.Pending(); n != 2 {
			t.Errorf("Pending() = %d, want 2", n)
		}
		if n := hourglass.ArmsReserved(tm, 0); n != 0 {
			t.Errorf("after Pending: %d reserved, want 0 (filed)", n)
		}
		arm(t, tm, 10*ms, r.fn(1)) // due with the first: the driver sleeps on
		if n := hourglass.ArmsReserved(tm, 0); n != 1 {
			t.Fatalf("after an Arm due when the driver wakes: %d reserved, want 1", n)
		}
		advance(10*ms + s.tolerance)
		r.checkRanOnce(t, s, 0, 10*ms)
		r.checkRanOnce(t, s, 1, 10*ms)
		tm.Stop()
	})
}

// TestArm_BatchAfterNoStaleWake checks that a Batch after Arms does not
// wake the driver for a deadline the driver has already filed and fired:
// Arm's reserved entries are filed by the driver's pass, and the Batch's
// filing must report only what it reserved itself (and what nothing has
// seen yet), not the earliest deadline ever filed since the last Batch.
func TestArm_BatchAfterNoStaleWake(t *testing.T) {
	forEachSetup(t, []setup{inlineOneShard}, func(t *testing.T, s structure, opts []hourglass.Option) {
		tm := s.newTimer(t, opts...)
		arm(t, tm, 2*time.Hour, func() {}) // keeps the driver asleep until then
		r := newRecorder()
		arm(t, tm, 10*ms, r.fn(0))
		advance(10*ms + s.tolerance)
		r.checkRanOnce(t, s, 0, 10*ms)
		synctest.Wait()
		before := hourglass.DriverWakeups(tm)
		tm.Batch(func(b *hourglass.Batch) {
			if _, err := b.AfterFunc(3*time.Hour, func() {}); err != nil {
				t.Fatal(err)
			}
		})
		synctest.Wait()
		if after := hourglass.DriverWakeups(tm); after != before {
			t.Errorf("a Batch scheduling at 3 h woke the driver asleep until 2 h: %d passes, want %d", after, before)
		}
		tm.Stop()
	})
}
