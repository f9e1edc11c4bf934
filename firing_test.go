package hourglass_test

import (
	"testing"

	"github.com/hourglass-go/hourglass"
)

// TestTimeout_CancelAndResetWhileFiring checks timeouts that have been
// taken from the structure with others due at the same tick but not yet
// handed to the executor: a callback of the same batch, running before
// them on the driver (Inline), can still call them off. Cancel returns
// true and the callback never runs; Reset returns true (it was pending)
// and the callback runs once, at the new deadline, not also at the old
// one.
func TestTimeout_CancelAndResetWhileFiring(t *testing.T) {
	forEachStructure(t, func(t *testing.T, s structure) {
		tm := s.newTimer(t, hourglass.WithExecutor(hourglass.Inline), hourglass.WithShards(1))
		r := newRecorder()
		var cancelled, reset *hourglass.Timeout
		var cancelOK, resetOK bool
		must(t)(tm.AfterFunc(10*ms, func() {
			r.record(0)
			cancelOK = cancelled.Cancel()
			resetOK = reset.Reset(20 * ms)
		}))
		cancelled = must(t)(tm.AfterFunc(10*ms, r.fn(1)))
		reset = must(t)(tm.AfterFunc(10*ms, r.fn(2)))
		tm.Pending() // takes the shard's lock: the driver sees both handles
		advance(10*ms + s.tolerance)
		if !cancelOK || !resetOK {
			t.Errorf("Cancel, Reset of a batch mate not yet handed over = %v, %v; want true, true", cancelOK, resetOK)
		}
		r.checkNotRun(t, 1)
		if !cancelled.Cancelled() || cancelled.Expired() {
			t.Errorf("cancelled batch mate: Cancelled() = %v, Expired() = %v; want true, false", cancelled.Cancelled(), cancelled.Expired())
		}
		if at := r.at(2); len(at) != 0 {
			t.Errorf("reset batch mate ran at %v, before its new deadline", at)
		}
		advance(20 * ms)
		if at := r.at(2); len(at) != 1 || at[0] < 30*ms || at[0] > 30*ms+2*s.tolerance {
			t.Errorf("reset batch mate ran at %v, want once at 30 ms", at)
		}
		tm.Stop()
	})
}
