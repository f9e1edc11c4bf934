package bench

import (
	"math"
	"runtime"
	"runtime/metrics"
	"slices"
)

// gcScenario measures what pending timers cost the garbage collector:
// every pending timeout is a live object the GC marks on each cycle, so a
// process with millions of them pays for it in GC CPU and pauses.
var gcScenario = Scenario{
	Name: "gc",
	Doc:  "with the largest n pending, a fixed workload of schedule+cancel pairs (5 per pending timer, at least the configured minimum); GC share of CPU (runtime/metrics /cpu/classes, between a forced GC before and after), GC cycles, stop-the-world pause p99 and max (both bucket bounds of /sched/pauses/total/gc)",
	jobs: func(c *Config, sts []Structure) []Job {
		n := c.Sizes[len(c.Sizes)-1]
		return perSize("gc", sts, []int{n}, randomDeadlines(c), func(s Structure, n int) Result {
			return gcCost(s, n, max(5*n, c.GCMinOps))
		})
	},
}

// gcMetrics are the runtime/metrics the gc scenario reads.
var gcMetrics = []string{
	"/cpu/classes/gc/total:cpu-seconds",
	"/cpu/classes/total:cpu-seconds",
	"/gc/cycles/total:gc-cycles",
	"/sched/pauses/total/gc:seconds",
}

// gcCost runs ops schedule+cancel pairs on s with n pending. The CPU
// classes are snapshots the runtime takes at the end of each GC cycle, so
// the window is framed by two forced cycles: it holds the workload, the
// cycles it triggered, and the closing forced one.
func gcCost(s Structure, n, ops int) Result {
	t := s.newTimers(n)
	pending, err := fill(t, n)
	defer func() { t.stop(pending) }()
	if err != nil {
		return failed(err)
	}

	before := make([]metrics.Sample, len(gcMetrics))
	after := make([]metrics.Sample, len(gcMetrics))
	for i, name := range gcMetrics {
		before[i].Name, after[i].Name = name, name
	}
	quiesce()
	metrics.Read(before)
	for range ops {
		h, err := t.afterFunc(farDelay(), noop)
		if err != nil {
			return failed(err)
		}
		h.Cancel()
	}
	runtime.GC()
	metrics.Read(after)

	gcCPU := after[0].Value.Float64() - before[0].Value.Float64()
	allCPU := after[1].Value.Float64() - before[1].Value.Float64()
	var r Result
	r.add("GC CPU %", unitPct, 100*gcCPU/allCPU)
	r.add("GC cycles", unitCount, float64(after[2].Value.Uint64()-before[2].Value.Uint64()))
	p99, longest := pauseFigures(before[3].Value.Float64Histogram(), after[3].Value.Float64Histogram())
	r.add("pause p99", unitSec, p99)
	r.add("pause max", unitSec, longest)
	r.add("ops", unitCount, float64(ops))
	return r
}

// pauseFigures returns the 99th percentile and the longest of the GC
// stop-the-world pauses recorded between two readings of the
// /sched/pauses/total/gc histogram, in seconds. Both come from the same
// samples and are read the same way, as the upper bound of the bucket
// they fall in (the lower bound for the last, unbounded bucket), so p99 is
// never above max. The runtime's buckets are coarse, four to a power of
// two (49.2, 57.3, 65.5, 81.9, 98.3 µs ...): a figure is the bucket's
// bound, up to 25% above the pauses it stands for. (The max used
// to be MemStats.PauseNs, a cycle's pauses summed, against a bucket bound
// for p99: the table could show p99 above max.)
func pauseFigures(before, after *metrics.Float64Histogram) (p99, longest float64) {
	return histogramQuantile(before, after, 0.99), histogramQuantile(before, after, 1)
}

// histogramQuantile returns the q-quantile of the observations made
// between two readings of one runtime/metrics histogram, as the upper
// bound of the bucket it falls in (the lower bound for the last,
// unbounded bucket), or 0 if there were none.
func histogramQuantile(before, after *metrics.Float64Histogram, q float64) float64 {
	counts := slices.Clone(after.Counts)
	var total uint64
	for i := range counts {
		if i < len(before.Counts) {
			counts[i] -= before.Counts[i]
		}
		total += counts[i]
	}
	if total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(total)))
	var seen uint64
	for i, c := range counts {
		seen += c
		if seen >= rank {
			if hi := after.Buckets[i+1]; !math.IsInf(hi, 1) {
				return hi
			}
			return after.Buckets[i]
		}
	}
	return 0
}
