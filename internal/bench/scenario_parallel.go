package bench

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// parallelScenario measures how schedule+cancel scales with cores: the
// same Timer hammered by one goroutine, then by GOMAXPROCS of them.
var parallelScenario = Scenario{
	Name: "parallel",
	Doc:  "schedule+cancel pairs per second on one Timer with n pending, from 1 goroutine and from GOMAXPROCS goroutines, and the ratio",
	jobs: func(c *Config, sts []Structure) []Job {
		return perSize("parallel", sts, c.Sizes, randomDeadlines(c), func(s Structure, n int) Result {
			return parallel(s, n, c.Budget)
		})
	},
}

func parallel(s Structure, n int, budget time.Duration) Result {
	t := s.newTimers(n)
	pending, err := fill(t, n)
	defer func() { t.stop(pending) }()
	if err != nil {
		return failed(err)
	}
	procs := runtime.GOMAXPROCS(0)
	one, err := pairsPerSecond(t, 1, budget)
	if err != nil {
		return failed(err)
	}
	all, err := pairsPerSecond(t, procs, budget)
	if err != nil {
		return failed(err)
	}
	var r Result
	r.add("ops/s 1 goroutine", unitRate, one)
	r.add(fmt.Sprintf("ops/s %d goroutines", procs), unitRate, all)
	r.add("speedup", unitRatio, all/one)
	return r
}

// pairsPerSecond runs g goroutines doing schedule+cancel pairs on t for
// budget and returns the pairs per second they managed together.
func pairsPerSecond(t timers, g int, budget time.Duration) (float64, error) {
	var (
		stop   atomic.Bool
		total  atomic.Int64
		errMu  sync.Mutex
		first  error
		ready  sync.WaitGroup
		wg     sync.WaitGroup
		starts = make(chan struct{})
	)
	ready.Add(g)
	for range g {
		wg.Go(func() {
			ready.Done()
			<-starts
			// At least one batch: on a loaded machine a goroutine may
			// first run after stop is set (a tiny budget in the tests),
			// and a rate of 0 would be no measurement.
			ops := 0
			for {
				for range batch {
					h, err := t.afterFunc(farDelay(), noop)
					if err != nil {
						errMu.Lock()
						first = err
						errMu.Unlock()
						stop.Store(true)
						break
					}
					h.Cancel()
				}
				ops += batch
				if stop.Load() {
					break
				}
			}
			total.Add(int64(ops))
		})
	}
	ready.Wait()
	start := time.Now()
	close(starts)
	time.Sleep(budget)
	stop.Store(true)
	wg.Wait()
	elapsed := time.Since(start)
	return float64(total.Load()) / elapsed.Seconds(), first
}
