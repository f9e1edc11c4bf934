package bench

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// fireScenario measures the whole life of timeouts that do fire: n of
// them, due at random within FireSpread, from the first schedule until the
// last callback has run.
var fireScenario = Scenario{
	Name: "fire",
	Doc:  "n timeouts due at random within the spread, Inline executor (runtime: a goroutine each); fires per second from the first schedule until the last fired",
	jobs: func(c *Config, sts []Structure) []Job {
		return perSize("fire", sts, c.Sizes, randomDeadlines(c), func(s Structure, n int) Result {
			st, err := scheduleAndFire(s, n, c.FireSpread, false)
			if err != nil {
				return failed(err)
			}
			var r Result
			r.add("fires/s", unitRate, float64(st.fired)/st.wall.Seconds())
			r.add("wall", unitSec, st.wall.Seconds())
			r.add("schedule ns/op", unitNs, float64(st.schedule.Nanoseconds())/float64(n))
			r.add("fired", unitCount, float64(st.fired))
			return r
		})
	},
}

// fireStats is what scheduleAndFire saw.
type fireStats struct {
	fired    int
	schedule time.Duration // scheduling all n
	wall     time.Duration // from the first schedule until the last callback
	peakHeap uint64        // peak HeapInuse, if sampled
}

// fireGrace is how long scheduleAndFire waits past the spread before it
// gives up on the timeouts that have not fired.
const fireGrace = 30 * time.Second

// scheduleAndFire schedules n timeouts on a fresh Timer of s, each due at
// a random delay below spread, and waits for all of them to fire. With
// sampleHeap it also records the peak heap in use.
func scheduleAndFire(s Structure, n int, spread time.Duration, sampleHeap bool) (fireStats, error) {
	var hs *heapSampler
	if sampleHeap {
		hs = startHeapSampler(5 * time.Millisecond)
	}
	t := s.newTimers(n)
	defer t.stop(nil)

	var fired atomic.Int64
	var end atomic.Int64 // nanoseconds after start when the last fired
	done := make(chan struct{})
	var start time.Time
	last := int64(n)
	f := func() {
		if fired.Add(1) == last {
			end.Store(int64(time.Since(start)))
			close(done)
		}
	}

	start = time.Now()
	for range n {
		if _, err := t.afterFunc(rand.N(spread), f); err != nil {
			if hs != nil {
				hs.stop()
			}
			return fireStats{}, err
		}
	}
	st := fireStats{schedule: time.Since(start)}
	var err error
	select {
	case <-done:
		st.wall = time.Duration(end.Load())
	case <-time.After(spread + fireGrace):
		st.wall = time.Since(start)
		err = fmt.Errorf("only %d of %d timeouts fired within %v", fired.Load(), n, spread+fireGrace)
	}
	st.fired = int(fired.Load())
	if hs != nil {
		st.peakHeap = hs.stop()
	}
	return st, err
}
