package bench

import (
	"time"
)

// scheduleCancelScenario measures the operation a request timeout costs
// when the request completes in time: schedule a timeout, then cancel it,
// with n others pending at random deadlines an hour or two away.
var scheduleCancelScenario = Scenario{
	Name: "schedule-cancel",
	Doc:  "one goroutine schedules and cancels a fresh timeout (1-2 h away) in a loop while n others are pending; cost per schedule+cancel pair",
	jobs: func(c *Config, sts []Structure) []Job {
		return perSize("schedule-cancel", sts, c.Sizes, randomDeadlines(c), func(s Structure, n int) Result {
			return scheduleCancel(s, n, c.Budget)
		})
	},
}

// scheduleCancel fills s with n pending timeouts and measures schedule+
// cancel pairs for budget.
func scheduleCancel(s Structure, n int, budget time.Duration) Result {
	t := s.newTimers(n)
	pending, err := fill(t, n)
	defer func() { t.stop(pending) }()
	if err != nil {
		return failed(err)
	}
	st, err := measurePairs(t, budget)
	if err != nil {
		return failed(err)
	}
	var r Result
	r.add("ns/op", unitNs, st.ns)
	r.add("allocs/op", unitAllocs, st.allocs)
	r.add("B/op", unitBytes, st.bytes)
	r.add("ops", unitCount, float64(st.ops))
	return r
}

// measurePairs measures schedule+cancel pairs on t for budget.
func measurePairs(t timers, budget time.Duration) (opStats, error) {
	var err error
	st := measureOps(budget, func() {
		h, e := t.afterFunc(farDelay(), noop)
		if e != nil {
			err = e
			return
		}
		h.Cancel()
	})
	return st, err
}
