// Command timeouts parks a burst of request timeouts on each of hourglass's
// four structures, completes most requests early (cancelling their
// timeouts), lets the rest expire, and prints what happened: how long
// scheduling and cancelling took, how many fired, and how late.
//
//	go run ./examples/timeouts [-n 200000] [-complete 0.99] [-timeout 200ms]
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/hourglass-go/hourglass"
)

func main() {
	n := flag.Int("n", 200_000, "requests per structure (the sorted list gets at most 20000)")
	complete := flag.Float64("complete", 0.99, "fraction of requests that complete before their timeout")
	timeout := flag.Duration("timeout", 200*time.Millisecond, "request timeout")
	flag.Parse()
	if *n < 1 || *complete < 0 || *complete > 1 || *timeout <= 0 {
		fmt.Fprintln(os.Stderr, "timeouts: need -n >= 1, 0 <= -complete <= 1 and -timeout > 0")
		flag.Usage()
		os.Exit(2)
	}

	fmt.Printf("%d requests, %.0f%% complete early, timeout %v\n\n", *n, *complete*100, *timeout)
	fmt.Println("| structure | requests | schedule ns/op | cancel ns/op | fired | late p50 | late max |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, s := range []struct {
		name string
		opt  hourglass.Option
		max  int
	}{
		{"hierarchical wheel 1ms", hourglass.WithHierarchicalWheel(time.Millisecond), *n},
		{"hashed wheel 1ms x 4096", hourglass.WithHashedWheel(time.Millisecond, 4096), *n},
		{"heap", hourglass.WithHeap(), *n},
		{"sorted list", hourglass.WithSortedList(), min(*n, 20_000)},
	} {
		r := run(s.opt, s.max, *complete, *timeout)
		fmt.Printf("| %s | %d | %.0f | %.0f | %d | %v | %v |\n", s.name, s.max,
			r.schedule, r.cancel, r.fired, r.lateP50.Round(time.Microsecond), r.lateMax.Round(time.Microsecond))
	}
}

type result struct {
	schedule, cancel float64 // ns per operation
	fired            int
	lateP50, lateMax time.Duration
}

func run(opt hourglass.Option, n int, complete float64, timeout time.Duration) result {
	timer := hourglass.New(opt, hourglass.WithExecutor(hourglass.Inline))
	defer timer.Stop()

	var mu sync.Mutex
	var late []time.Duration
	var wg sync.WaitGroup
	handles := make([]*hourglass.Timeout, n)
	deadlines := make([]time.Time, n)

	start := time.Now()
	for i := range handles {
		deadlines[i] = time.Now().Add(timeout)
		due := deadlines[i]
		wg.Add(1)
		to, err := timer.AfterFunc(timeout, func() {
			l := time.Since(due)
			mu.Lock()
			late = append(late, l)
			mu.Unlock()
			wg.Done()
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "timeouts:", err)
			os.Exit(1)
		}
		handles[i] = to
	}
	scheduled := time.Since(start)

	start = time.Now()
	cancelled := 0
	for _, to := range handles {
		if rand.Float64() < complete && to.Cancel() {
			cancelled++
			wg.Done()
		}
	}
	cancelTime := time.Since(start)
	wg.Wait()

	slices.Sort(late)
	r := result{
		schedule: float64(scheduled.Nanoseconds()) / float64(n),
		cancel:   float64(cancelTime.Nanoseconds()) / float64(n),
		fired:    len(late),
	}
	if len(late) > 0 {
		r.lateP50, r.lateMax = late[len(late)/2], late[len(late)-1]
	}
	return r
}
