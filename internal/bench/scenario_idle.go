package bench

import (
	"errors"
	"time"
)

// idleScenario measures what a Timer costs while nothing is due: the CPU
// its driver burns waking up. The library does not count wake-ups, so
// this reads the process's CPU time (getrusage) over an idle window,
// during which the process does nothing else; the runtime row with nothing
// pending is the floor every row shares (the Go runtime's own background
// work).
var idleScenario = Scenario{
	Name: "idle",
	Doc:  "process CPU time (user+sys, getrusage) per second of wall time while a Timer sits idle: empty (one timeout scheduled and cancelled, so its driver has started) or holding one timeout 1 h away",
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

	quiesce()
	time.Sleep(settle) // let the driver go back to sleep after the GC
	c0, ok := cpuTime()
	if !ok {
		return failed(errors.New("process CPU time is not available on this platform"))
	}
	w0 := time.Now()
	time.Sleep(window)
	c1, _ := cpuTime()
	wall := time.Since(w0)

	var r Result
	r.add("CPU µs/s", unitPerSec, float64((c1-c0).Microseconds())/wall.Seconds())
	return r
}
