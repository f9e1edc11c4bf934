package hourglass_test

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hourglass-go/hourglass"
)

// TestValue_StopTakesBatch checks that Stop, called from a callback on
// the driver (Inline, one shard), returns the value timeouts of the same
// batch not yet handed over, cancelled, with their deadlines, and that
// none of them runs: due value timeouts wait in the driver's batch with
// no *Timeout, and Stop makes one for each it takes.
func TestValue_StopTakesBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		tm := hourglass.New(hourglass.WithShards(1), hourglass.WithExecutor(hourglass.Inline))
		const n = 10
		var ran atomic.Int32
		var out []*hourglass.Timeout
		first := true
		for range n {
			if _, err := tm.Arm(10*time.Millisecond, func() {
				ran.Add(1)
				if first {
					first = false
					out = tm.Stop()
				}
			}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(time.Second)
		<-tm.Done()
		if got := ran.Load(); got != 1 {
			t.Errorf("%d callbacks ran; want 1, the one that called Stop", got)
		}
		if len(out) != n-1 {
			t.Fatalf("Stop returned %d timeouts; want the %d left in the batch", len(out), n-1)
		}
		for _, to := range out {
			if !to.Cancelled() || to.Expired() {
				t.Errorf("returned timeout: Cancelled %v, Expired %v; want true, false", to.Cancelled(), to.Expired())
			}
			if got, want := to.Deadline().Sub(start), 10*time.Millisecond; got != want {
				t.Errorf("returned timeout's deadline %v after start; want %v", got, want)
			}
		}
	})
}
