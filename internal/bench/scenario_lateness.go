package bench

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"
)

// latenessScenario measures how late timeouts fire under load: a steady
// stream of short timeouts on a Timer that also holds n far-future ones.
var latenessScenario = Scenario{
	Name: "lateness",
	Doc:  "n far-future timeouts pending plus a stream of timeouts 1-10 ms away scheduled at the stream rate; lateness = time since the deadline, taken in the callback (Inline; runtime: a goroutine each)",
	jobs: func(c *Config, sts []Structure) []Job {
		return perSize("lateness", sts, c.Sizes, randomDeadlines(c), func(s Structure, n int) Result {
			return lateness(s, n, c.StreamRate, c.StreamFor)
		})
	},
}

// Stream timeouts are due minDelay plus up to spreadDelay after they are
// scheduled.
const (
	minDelay    = time.Millisecond
	spreadDelay = 9 * time.Millisecond
	// pace is how long the producer sleeps when it is ahead of the rate.
	pace = 100 * time.Microsecond
)

func lateness(s Structure, n, rate int, streamFor time.Duration) Result {
	t := s.newTimers(n)
	pending, err := fill(t, n)
	defer func() { t.stop(pending) }()
	if err != nil {
		return failed(err)
	}

	total := max(int(float64(rate)*streamFor.Seconds()), 1)
	base := time.Now()
	deadline := make([]int64, total) // nanoseconds after base
	late := make([]int64, total)
	var fired atomic.Int64
	done := make(chan struct{})
	// The callbacks are made before the stream starts, so the producer
	// only schedules.
	callbacks := make([]func(), total)
	for i := range callbacks {
		callbacks[i] = func() {
			late[i] = int64(time.Since(base)) - deadline[i]
			if fired.Add(1) == int64(total) {
				close(done)
			}
		}
	}

	start := time.Now()
	for issued := 0; issued < total; {
		due := min(int(float64(rate)*time.Since(start).Seconds()), total)
		if due <= issued {
			time.Sleep(pace)
			continue
		}
		for ; issued < due; issued++ {
			d := minDelay + rand.N(spreadDelay)
			deadline[issued] = int64(time.Since(base) + d)
			if _, err := t.afterFunc(d, callbacks[issued]); err != nil {
				return failed(err)
			}
		}
	}
	streamed := time.Since(start)

	var r Result
	select {
	case <-done:
	case <-time.After(minDelay + spreadDelay + fireGrace):
		r.Err = fmt.Sprintf("only %d of %d stream timeouts fired", fired.Load(), total)
		return r
	}
	slices.Sort(late)
	r.add("late p50", unitSec, time.Duration(percentile(late, 0.50)).Seconds())
	r.add("late p99", unitSec, time.Duration(percentile(late, 0.99)).Seconds())
	r.add("late max", unitSec, time.Duration(late[len(late)-1]).Seconds())
	r.add("stream/s", unitRate, float64(total)/streamed.Seconds())
	r.add("samples", unitCount, float64(total))
	return r
}
