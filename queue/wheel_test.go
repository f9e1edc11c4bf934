package queue_test

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/queue"
)

// TestHierarchicalWheel_NearDeadlinesNeverCascade checks that entries due
// within the current block of 1,024 ticks are filed straight into the
// level-0 slot they fire from: driven by Next, every wake-up fires an
// entry, and there are as many as distinct ticks. A level 0 of 64 slots
// would send the entries due after tick 63 to level 1, and Next would
// report the start of each level-1 slot, a cascade that fires nothing.
func TestHierarchicalWheel_NearDeadlinesNeverCascade(t *testing.T) {
	q := queue.New[int](queue.HierarchicalWheel(time.Millisecond))
	rng := rand.New(rand.NewPCG(45, 1))
	var ticks []uint64
	for i := range 500 {
		tk := 1 + rng.Uint64N(1023) // ticks 1 to 1,023: the first block
		ticks = append(ticks, tk)
		q.Add(tk*ms, i)
	}
	slices.Sort(ticks)
	ticks = slices.Compact(ticks)
	wakeups := 0
	for {
		next, ok := q.Next()
		if !ok {
			break
		}
		wakeups++
		fired := 0
		q.Advance(next, func(int32, int) { fired++ })
		if fired == 0 {
			t.Fatalf("wake-up %d at %v fired nothing: a cascade", wakeups, time.Duration(next))
		}
		if want := ticks[wakeups-1] * ms; next != want {
			t.Fatalf("wake-up %d at %v, want %v", wakeups, time.Duration(next), time.Duration(want))
		}
	}
	if wakeups != len(ticks) {
		t.Errorf("%d wake-ups for %d distinct ticks", wakeups, len(ticks))
	}
}
