package bench

import (
	"math/rand/v2"
	"time"

	"github.com/hourglass-go/hourglass"
	"github.com/hourglass-go/hourglass/queue"
)

// structuresScenario measures the pure structures of package queue, with
// no Timer, lock or clock around them: the cost the Timer adds is the
// difference from schedule-cancel.
var structuresScenario = Scenario{
	Name: "structures",
	Doc:  "package queue alone, the queue.Queue a Timer's shard runs: n entries at random deadlines 1-2 h away; each op removes one entry by id and adds it back at a new random deadline; must not allocate",
	jobs: func(c *Config, sts []Structure) []Job {
		skip := randomDeadlines(c)
		return perSize("structures", sts, c.Sizes, func(s Structure, n int) string {
			if s.queue == nil {
				return "skipped: the runtime's timer heap cannot be driven on its own"
			}
			return skip(s, n)
		}, func(s Structure, n int) Result {
			return structures(s, n, c.Budget)
		})
	},
}

// structures fills a queue.Queue of s, the type a Timer's shard runs,
// with n entries and measures remove+add of each in turn. The queue's
// time stays at 0, so nothing ever fires.
func structures(s Structure, n int, budget time.Duration) Result {
	q := queue.New[*hourglass.Timeout](s.queue(n))
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = q.Add(farDeadline(), nil)
	}
	i := 0
	st := measureOps(budget, func() {
		q.Remove(ids[i])
		ids[i] = q.Add(farDeadline(), nil)
		if i++; i == len(ids) {
			i = 0
		}
	})
	var r Result
	r.add("ns/op", unitNs, st.ns)
	r.add("allocs/op", unitAllocs, st.allocs)
	r.add("ops", unitCount, float64(st.ops))
	return r
}

// farDeadline is farDelay on a queue's clock that reads 0.
func farDeadline() uint64 {
	return uint64(time.Hour + rand.N(time.Hour))
}
