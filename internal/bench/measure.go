package bench

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// opStats is the cost of one operation, averaged over a timed loop.
type opStats struct {
	ops    int
	ns     float64 // wall nanoseconds per op
	allocs float64 // heap allocations per op
	bytes  float64 // heap bytes allocated per op
}

// batch is how many operations run between looks at the clock.
const batch = 256

// measureOps calls op in batches until budget has passed and returns the
// cost per call. A warm-up of a tenth of the budget comes first, so that
// caches and the structures' free capacity are in their steady state.
// Allocations are the whole process's (runtime.MemStats deltas), so
// nothing else should be running. A collection comes before all, as
// testing.B runs one before each benchmark: the garbage of earlier steps
// (a Timer just stopped, a structure just filled) is not marked, with
// write barriers on, while op is timed.
func measureOps(budget time.Duration, op func()) opStats {
	runtime.GC()
	loop(budget/10, op)
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	ops, elapsed := loop(budget, op)
	runtime.ReadMemStats(&m1)
	return opStats{
		ops:    ops,
		ns:     float64(elapsed.Nanoseconds()) / float64(ops),
		allocs: float64(m1.Mallocs-m0.Mallocs) / float64(ops),
		bytes:  float64(m1.TotalAlloc-m0.TotalAlloc) / float64(ops),
	}
}

// loop calls op in batches until d has passed, at least one batch, and
// returns the number of calls and the time they took.
func loop(d time.Duration, op func()) (int, time.Duration) {
	start := time.Now()
	ops := 0
	for {
		for range batch {
			op()
		}
		ops += batch
		if e := time.Since(start); e >= d {
			return ops, e
		}
	}
}

// percentile returns the p-th percentile (0 ≤ p ≤ 1) of sorted, by the
// nearest-rank method, or 0 if it is empty.
func percentile[T int64 | float64](sorted []T, p float64) T {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// heapSampler records the peak of HeapInuse (heap objects plus the unused
// part of in-use spans), read every few milliseconds through runtime/metrics,
// which unlike runtime.ReadMemStats does not stop the world.
type heapSampler struct {
	peak atomic.Uint64
	quit chan struct{}
	wg   sync.WaitGroup
}

func startHeapSampler(every time.Duration) *heapSampler {
	h := &heapSampler{quit: make(chan struct{})}
	samples := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"},
	}
	read := func() {
		metrics.Read(samples)
		v := samples[0].Value.Uint64() + samples[1].Value.Uint64()
		if v > h.peak.Load() {
			h.peak.Store(v)
		}
	}
	read()
	h.wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-h.quit:
				read()
				return
			case <-t.C:
				read()
			}
		}
	})
	return h
}

// stop ends sampling and returns the peak in bytes.
func (h *heapSampler) stop() uint64 {
	close(h.quit)
	h.wg.Wait()
	return h.peak.Load()
}

// settle is how long quiesce lets the scheduler run before the final GC.
const settle = 20 * time.Millisecond

// quiesce brings the process to rest before a measurement of memory or
// CPU: it collects garbage and returns freed memory to the OS at once
// (else the background scavenger does it during the measurement, at a
// cost of milliseconds of CPU per second), gives the scheduler a moment
// to clear the runtime's stopped timers out of its per-P heaps (they go
// lazily, so their memory would otherwise be freed mid-measurement), and
// collects once more.
func quiesce() {
	debug.FreeOSMemory()
	time.Sleep(settle)
	runtime.GC()
}
