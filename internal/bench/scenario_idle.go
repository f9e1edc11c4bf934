package bench

import (
	"errors"
	"time"
)

// idleScenario measures what a Timer costs while nothing is due. The first
// metric is exact: how often the Timer's drivers woke up in the window
// ([hourglass.Stats] Wakeups, read before and after). The second is the
// process's CPU time (getrusage) over the same window, which also holds
// the Go runtime's own background work, a floor of some hundreds of
// microseconds per second that varies more from run to run than the
// structures differ. The runtime's timers have no driver of their own, so
// their wake-ups cannot be counted; their row with nothing pending shows
// the CPU floor every row shares.
var idleScenario = Scenario{
	Name: "idle",
	Doc:  "a Timer sits idle for the window, empty (one timeout scheduled and cancelled, so its driver has started) or holding one timeout 1 h away; driver wake-ups in the window (Stats().Wakeups after minus before) and per second, and process CPU time (user+sys, getrusage) per second of wall time",
	jobs: func(c *Config, sts []Structure) []Job {
		var jobs []Job
		for _, s := range sts {
			for _, pending := range []int{0, 1} {
				jobs = append(jobs, Job{
					Scenario:  "idle",
					Structure: s.Name,
					Case:      idleCases[pending],
					run:       func() Result { return idle(s, pending, c.Idle) },
				})
			}
		}
		return jobs
	},
}

var idleCases = []string{"empty", "1 pending 1h away"}

// noWakeups is the note of a structure whose wake-ups cannot be counted.
const noWakeups = "wake-ups not observable: the runtime's timers have no driver of their own to count"

func idle(s Structure, pending int, window time.Duration) Result {
	t := s.newTimers(1)
	h, err := t.afterFunc(time.Hour, noop)
	if err != nil {
		t.stop(nil)
		return failed(err)
	}
	if pending == 0 {
		h.Cancel()
		h = nil
	}
	defer t.stop([]handle{h})
	counter, counted := t.(wakeupCounter)

	quiesce()
	time.Sleep(settle) // let the driver go back to sleep after the GC
	var k0, k1 uint64
	if counted {
		k0 = counter.wakeups()
	}
	c0, ok := cpuTime()
	if !ok {
		return failed(errors.New("process CPU time is not available on this platform"))
	}
	w0 := time.Now()
	time.Sleep(window)
	c1, _ := cpuTime()
	wall := time.Since(w0)
	if counted {
		k1 = counter.wakeups()
	}

	var r Result
	if counted {
		r.add("wakeups", unitCount, float64(k1-k0))
		r.add("wakeups/s", unitHz, float64(k1-k0)/wall.Seconds())
	} else {
		r.Note = noWakeups
	}
	r.add("CPU µs/s", unitPerSec, float64((c1-c0).Microseconds())/wall.Seconds())
	return r
}
