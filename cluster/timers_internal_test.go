package cluster

import (
	"io"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"
)

// TestTimers_FireWithinTick arms a timer 250 µs ahead on the owner's
// wheel, in virtual time, and checks that it has fired (the job handed to
// the flusher) 150 µs after its time, not before it: with the wheel's
// default tick of a millisecond it fired at the next millisecond, over
// 700 µs late.
func TestTimers_FireWithinTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := &Node{opts: Options{Window: DefaultWindow, Lease: DefaultLease, hooks: &hooks{}},
			log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		n.clock.skew = &n.opts.hooks.skew
		tm := newTimers(n, nil)
		defer tm.stop()
		// Off the tick's grid: the wheel's clock starts now.
		time.Sleep(33 * time.Microsecond)
		const ahead = 250 * time.Microsecond
		tm.mu.Lock()
		tm.armAt(7, tm.clock.now()+int64(ahead))
		tm.mu.Unlock()
		time.Sleep(ahead - 25*time.Microsecond)
		synctest.Wait()
		if k := tm.pending(); k != 0 {
			t.Fatalf("%d jobs fired before their time", k)
		}
		time.Sleep(25*time.Microsecond + 150*time.Microsecond)
		synctest.Wait()
		if k := tm.pending(); k != 1 {
			t.Fatalf("%d jobs fired 150 µs after the timer's time (tick %v), want 1", k, wheelTick)
		}
	})
}
