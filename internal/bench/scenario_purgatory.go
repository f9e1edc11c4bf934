package bench

import (
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// purgatoryScenario is Kafka's request purgatory, the workload its timing
// wheel was built for: requests arrive at a fixed rate whether or not the
// server keeps up (open loop), each parks a 200 ms timeout, and 99% of
// them complete early and cancel it. The rate goes up step by step until
// a structure falls behind. See
// https://www.confluent.io/blog/apache-kafka-purgatory-hierarchical-timing-wheels/.
var purgatoryScenario = Scenario{
	Name: "purgatory",
	Doc:  "open-loop requests from GOMAXPROCS producers, each parking a 200 ms timeout, 99% completing (cancelling) after a random 1-199 ms; the rate steps up until achieved < 95% of target; highest rate sustained, CPU cores used then, and the rate achieved at each step",
	jobs: func(c *Config, sts []Structure) []Job {
		var jobs []Job
		for _, s := range sts {
			jobs = append(jobs, Job{
				Scenario:  "purgatory",
				Structure: s.Name,
				run:       func() Result { return purgatory(s, c.Rates, c.Step) },
			})
		}
		return jobs
	},
}

const (
	purgatoryTimeout = 200 * time.Millisecond
	completeFraction = 0.99
	// completion buckets: one per millisecond, more than the timeout's
	// worth so that a completion never lands in the bucket being emptied.
	completionRing = 256
	// sustainedFraction of the target rate counts as keeping up.
	sustainedFraction = 0.95
)

// purgatory runs each rate in turn for step, stopping after the first
// that s does not sustain.
func purgatory(s Structure, rates []int, step time.Duration) Result {
	var steps Result
	best, bestCPU := 0, -1.0
	for _, rate := range rates {
		st, err := purgatoryStep(s, rate, step)
		if err != nil {
			return failed(err)
		}
		steps.add("@"+formatRate(float64(rate)), unitRate, st.achieved)
		if st.achieved < sustainedFraction*float64(rate) {
			break
		}
		best, bestCPU = rate, st.cores
	}
	var r Result
	r.add("sustained/s", unitRate, float64(best))
	if bestCPU >= 0 {
		r.add("CPU cores", unitCores, bestCPU)
	}
	r.Metrics = append(r.Metrics, steps.Metrics...)
	return r
}

type stepStats struct {
	achieved float64 // requests per second
	cores    float64 // process CPU seconds per second
}

func purgatoryStep(s Structure, rate int, step time.Duration) (stepStats, error) {
	procs := runtime.GOMAXPROCS(0)
	// About a tenth of a second of requests is pending at any time.
	t := s.newTimers(rate / 10)
	var expired atomic.Int64
	onExpire := func() { expired.Add(1) }

	quiesce()
	c0, _ := cpuTime()
	start := time.Now()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		issued   int
		leftover []handle
		errs     []error
	)
	for range procs {
		wg.Go(func() {
			p := producer{t: t, rate: float64(rate) / float64(procs), onExpire: onExpire}
			err := p.run(start, step)
			mu.Lock()
			defer mu.Unlock()
			issued += p.issued
			leftover = append(leftover, p.leftover()...)
			errs = append(errs, err)
		})
	}
	wg.Wait()
	c1, _ := cpuTime()
	wall := time.Since(start)
	t.stop(leftover)
	return stepStats{
		achieved: float64(issued) / step.Seconds(),
		cores:    (c1 - c0).Seconds() / wall.Seconds(),
	}, errors.Join(errs...)
}

// producer is one source of requests, paced against the wall clock: by
// any moment it has issued rate × elapsed requests if it can, in batches.
type producer struct {
	t        timers
	rate     float64
	onExpire func()
	issued   int
	// completions holds the timeouts of requests that will complete, one
	// bucket per millisecond (modulo the ring) of the step.
	completions [completionRing][]handle
	// expiring holds the timeouts of requests that never complete.
	expiring []handle
}

func (p *producer) run(start time.Time, step time.Duration) error {
	nextMs := 0 // the first bucket not yet completed
	for {
		elapsed := time.Since(start)
		if elapsed >= step {
			return nil
		}
		nowMs := int(elapsed / time.Millisecond)
		for ; nextMs < nowMs; nextMs++ {
			b := &p.completions[nextMs%completionRing]
			for _, h := range *b {
				h.Cancel()
			}
			clear(*b)
			*b = (*b)[:0]
		}
		due := int(p.rate * elapsed.Seconds())
		if due <= p.issued {
			time.Sleep(pace)
			continue
		}
		k := min(due-p.issued, batch)
		for range k {
			h, err := p.t.afterFunc(purgatoryTimeout, p.onExpire)
			if err != nil {
				return err
			}
			if rand.Float64() < completeFraction {
				done := nowMs + 1 + rand.IntN(int(purgatoryTimeout/time.Millisecond)-1)
				b := &p.completions[done%completionRing]
				*b = append(*b, h)
			} else {
				p.expiring = append(p.expiring, h)
			}
		}
		p.issued += k
	}
}

// leftover returns every handle p still holds.
func (p *producer) leftover() []handle {
	out := p.expiring
	for _, b := range p.completions {
		out = append(out, b...)
	}
	return out
}
