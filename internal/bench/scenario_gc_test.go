package bench

import (
	"math"
	"runtime/metrics"
	"testing"
)

// TestPauseFigures_Comparable checks that the gc scenario's pause p99 and
// pause max come from the same samples, so that p99 is never above max:
// one pause, the only sample, gives both.
// (They were a histogram bucket's upper bound and a MemStats sample, and
// the table showed p99 above max.)
func TestPauseFigures_Comparable(t *testing.T) {
	// Buckets of the runtime's shape: bounded above, a last unbounded one.
	buckets := []float64{0, 40e-6, 45e-6, 50e-6, 55e-6, 60e-6, math.Inf(1)}
	before := &metrics.Float64Histogram{Buckets: buckets, Counts: make([]uint64, len(buckets)-1)}
	after := &metrics.Float64Histogram{Buckets: buckets, Counts: make([]uint64, len(buckets)-1)}
	after.Counts[3] = 1 // one pause in [50 µs, 55 µs)
	p99, longest := pauseFigures(before, after)
	if p99 > longest {
		t.Errorf("pause p99 %v s above pause max %v s", p99, longest)
	}
	if p99 != 55e-6 || longest != 55e-6 {
		t.Errorf("one pause in [50 µs, 55 µs): p99 %v s, max %v s, want the bucket's bound, 55 µs, for both", p99, longest)
	}

	// A hundred pauses: 99 short, one long. p99 is the short ones' bound,
	// max the long one's; both above every sample they stand for.
	after.Counts = []uint64{0, 99, 0, 0, 0, 1}
	p99, longest = pauseFigures(before, after)
	if p99 != 45e-6 || longest != 60e-6 {
		t.Errorf("99 pauses in [40, 45) µs and one above 60 µs: p99 %v s, max %v s, want 45 and 60 µs", p99, longest)
	}
	if p99, longest = pauseFigures(before, before); p99 != 0 || longest != 0 {
		t.Errorf("no pause: p99 %v s, max %v s, want 0", p99, longest)
	}
}
