package bench

import (
	"runtime"
)

// memoryScenario measures the heap a pending timer holds: everything the
// structure allocates for it, the handle included, with the structure's
// own fixed cost spread over n.
var memoryScenario = Scenario{
	Name: "memory",
	Doc:  "heap bytes per pending timer: HeapAlloc after scheduling n timeouts (static callback, handles kept) minus before, over n, each side after a GC",
	jobs: func(c *Config, sts []Structure) []Job {
		return perSize("memory", sts, c.Sizes, randomDeadlines(c), memory)
	},
}

// memory measures the heap that n pending timeouts on s take. The slice
// that holds the handles is made before the first reading, so it is not
// counted: only what scheduling allocates is, the Timer itself included.
// The runtime's per-P timer heaps keep the capacity earlier scenarios gave
// them, so for runtime timers the heap slots (16 bytes each) may not all
// be counted.
func memory(s Structure, n int) Result {
	pending := make([]handle, n)
	var m0, m1 runtime.MemStats
	quiesce()
	runtime.ReadMemStats(&m0)
	t := s.newTimers(n)
	for i := range pending {
		h, err := t.afterFunc(farDelay(), noop)
		if err != nil {
			t.stop(pending)
			return failed(err)
		}
		pending[i] = h
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	t.stop(pending)
	runtime.KeepAlive(pending)

	var r Result
	r.add("B/timer", unitBytes, (float64(m1.HeapAlloc)-float64(m0.HeapAlloc))/float64(n))
	r.add("objects/timer", unitRatio, (float64(m1.HeapObjects)-float64(m0.HeapObjects))/float64(n))
	return r
}
