package bench

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"github.com/hourglass-go/hourglass"
)

// burstScenario measures how late timeouts fire when many come due at
// once, and what scheduling costs while they fire: one goroutine schedules
// n timeouts, each due at a random delay below FireSpread from its own
// call, so the first fire while the rest are still being scheduled. The
// hourglass Timer runs twice, with its default executor (Goroutines, a
// goroutine per callback, as time.AfterFunc has) and with Inline (every
// callback on the driver). Only the default structure runs: the question
// is the hand-over to the executor, which every structure shares.
var burstScenario = Scenario{
	Name: "burst",
	Doc:  "one goroutine schedules n timeouts, each due at a random delay within the spread from its call (the first fire while the rest are scheduled); hourglass (hierarchical only) with its default executor, Goroutines, and with Inline, against time.AfterFunc; lateness = time from the deadline to the start of the callback, schedule ns/op over the n calls, fires/s from the first call until the last callback",
	jobs: func(c *Config, sts []Structure) []Job {
		n := c.Sizes[len(c.Sizes)-1]
		var jobs []Job
		for _, s := range sts {
			switch {
			case s.option == nil:
				jobs = append(jobs, burstJob(c, s, n, burstRuntime, nil))
			case s.Name == "hierarchical":
				jobs = append(jobs,
					burstJob(c, s, n, burstDefault, nil),
					burstJob(c, s, n, burstInline, hourglass.WithExecutor(hourglass.Inline)))
			}
		}
		return jobs
	},
}

// The cases of the burst scenario.
const (
	burstDefault = "Goroutines (default)"
	burstInline  = "Inline"
	burstRuntime = "time.AfterFunc"
)

// burstJob plans one burst of n on s, with exec as the Timer's executor
// option (nil for the default, and for the runtime's timers).
func burstJob(c *Config, s Structure, n int, name string, exec hourglass.Option) Job {
	return Job{Scenario: "burst", Structure: s.Name, N: n, Case: name, run: func() Result {
		var t timers = runtimeTimers{}
		if s.option != nil {
			opts := []hourglass.Option{s.option(n)}
			if exec != nil {
				opts = append(opts, exec)
			}
			t = hourglassTimers{hourglass.New(opts...)}
		}
		return burst(t, n, c.FireSpread)
	}}
}

// burstRecord is what a burst's callbacks write: callback i records its
// lateness, and the last one to run closes done.
type burstRecord struct {
	base     time.Time
	deadline []int64 // nanoseconds after base
	late     []int64
	fired    atomic.Int64
	end      atomic.Int64 // nanoseconds after base when the last one ran
	done     chan struct{}
}

func (b *burstRecord) fire(i int) {
	now := int64(time.Since(b.base))
	b.late[i] = now - b.deadline[i]
	if b.fired.Add(1) == int64(len(b.late)) {
		b.end.Store(now)
		close(b.done)
	}
}

func burst(t timers, n int, spread time.Duration) Result {
	defer t.stop(nil)
	b := &burstRecord{
		deadline: make([]int64, n),
		late:     make([]int64, n),
		done:     make(chan struct{}),
	}
	// The delays and callbacks are made before the clock starts, so the
	// loop below only schedules.
	delays := make([]time.Duration, n)
	callbacks := make([]func(), n)
	for i := range n {
		delays[i] = rand.N(spread)
		callbacks[i] = func() { b.fire(i) }
	}
	runtime.GC()

	b.base = time.Now()
	for i, d := range delays {
		b.deadline[i] = int64(time.Since(b.base) + d)
		if _, err := t.afterFunc(d, callbacks[i]); err != nil {
			return failed(err)
		}
	}
	scheduled := time.Since(b.base)

	var r Result
	select {
	case <-b.done:
	case <-time.After(spread + fireGrace):
		return failed(fmt.Errorf("only %d of %d timeouts fired within %v", b.fired.Load(), n, spread+fireGrace))
	}
	slices.Sort(b.late)
	r.add("late p50", unitSec, time.Duration(percentile(b.late, 0.50)).Seconds())
	r.add("late p99", unitSec, time.Duration(percentile(b.late, 0.99)).Seconds())
	r.add("late max", unitSec, time.Duration(b.late[n-1]).Seconds())
	r.add("schedule ns/op", unitNs, float64(scheduled.Nanoseconds())/float64(n))
	r.add("fires/s", unitRate, float64(n)/time.Duration(b.end.Load()).Seconds())
	return r
}
