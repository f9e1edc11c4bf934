package bench

// seedDemoScenario is the classic timing-wheel demonstration: millions of
// timers scheduled in one go, all due within a second, all fired.
var seedDemoScenario = Scenario{
	Name: "seed-demo",
	Doc:  "the classic timing-wheel demo: schedule the seed count of timeouts due at random within the spread, Inline executor (runtime: a goroutine each), fire them all; total wall time and peak heap in use (HeapInuse, sampled every 5 ms)",
	jobs: func(c *Config, sts []Structure) []Job {
		return perSize("seed-demo", sts, []int{c.SeedTimers}, randomDeadlines(c), func(s Structure, n int) Result {
			st, err := scheduleAndFire(s, n, c.SeedSpread, true)
			if err != nil {
				return failed(err)
			}
			var r Result
			r.add("wall", unitSec, st.wall.Seconds())
			r.add("fires/s", unitRate, float64(st.fired)/st.wall.Seconds())
			r.add("peak heap MiB", unitMiB, float64(st.peakHeap)/(1<<20))
			r.add("fired", unitCount, float64(st.fired))
			return r
		})
	},
}
