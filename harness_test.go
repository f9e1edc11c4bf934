package hourglass_test

// The conformance suite's harness: every test in timer_test.go,
// periodic_test.go, stop_test.go and concurrency_test.go runs over the four
// structures a Timer can keep its timeouts in. Timing tests run inside
// testing/synctest bubbles, where time is virtual and exact: time.Sleep
// returns as soon as every goroutine in the bubble is blocked, and a
// goroutine still blocked when the bubble ends fails the test, which is how
// the suite checks that Stop leaves no driver behind.

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hourglass-go/hourglass"
)

const (
	µs = time.Microsecond
	ms = time.Millisecond

	// forever is the horizon of a structure whose driver sleeps until the
	// next deadline.
	forever = time.Duration(math.MaxInt64)
)

// structure is one of the four deadline structures a Timer can use.
type structure struct {
	name string
	opt  hourglass.Option
	// tolerance is how late a timeout may fire: one tick for the wheels,
	// which round deadlines up to a tick boundary, and nothing for the heap
	// and the list, which are exact. No structure may fire early.
	tolerance time.Duration
	// horizon is the longest stretch of virtual time a test lets pass while
	// timeouts are pending. A hashed wheel's driver wakes at each occupied
	// slot once per turn, every 8 ms here, however far away the timeouts
	// in the slot are (see queue.HashedWheel); the other drivers sleep
	// until the next deadline, so any stretch costs a few wake-ups. (The
	// Cron test alone waits three minutes.)
	horizon time.Duration
	// fifo is whether timeouts scheduled on one shard with equal deadlines
	// fire in the order they were scheduled.
	fifo bool
}

// sleeps reports whether the structure's driver sleeps until the next
// deadline instead of waking every tick.
func (s structure) sleeps() bool { return s.horizon == forever }

var structures = []structure{
	{"HierarchicalWheel", hourglass.WithHierarchicalWheel(ms), ms, forever, true},
	// Eight slots of 1 ms: any timeout more than 8 ms away waits rounds.
	{"HashedWheel", hourglass.WithHashedWheel(ms, 8), ms, time.Minute, true},
	{"Heap", hourglass.WithHeap(), 0, forever, false},
	{"SortedList", hourglass.WithSortedList(), 0, forever, true},
}

// forEachStructure runs test once per structure, each as a subtest inside
// a synctest bubble of its own.
func forEachStructure(t *testing.T, test func(t *testing.T, s structure)) {
	t.Helper()
	for _, s := range structures {
		t.Run(s.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { test(t, s) })
		})
	}
}

// setup is a named set of further options for New.
type setup struct {
	name string
	opts func(t *testing.T) []hourglass.Option // called inside the bubble
}

// options makes a setup's opts from a fixed list.
func options(opts ...hourglass.Option) func(*testing.T) []hourglass.Option {
	return func(*testing.T) []hourglass.Option { return slices.Clone(opts) }
}

// withPool runs callbacks on a Pool of two workers with a short queue,
// closed when the test ends.
func withPool(t *testing.T) []hourglass.Option {
	p := hourglass.NewPool(2, 4)
	t.Cleanup(p.Close) // after the Timer's Stop: cleanups run last first
	return []hourglass.Option{hourglass.WithExecutor(p)}
}

var (
	inlineOneShard     = setup{"Inline/OneShard", options(hourglass.WithExecutor(hourglass.Inline), hourglass.WithShards(1))}
	goroutinesOneShard = setup{"Goroutines/OneShard", options(hourglass.WithShards(1))}
	inlineShards       = setup{"Inline/DefaultShards", options(hourglass.WithExecutor(hourglass.Inline))}
	goroutinesShards   = setup{"Goroutines/DefaultShards", options()}
	poolOneShard       = setup{"Pool/OneShard", func(t *testing.T) []hourglass.Option {
		return append(withPool(t), hourglass.WithShards(1))
	}}

	// executorSetups runs callbacks on the driver and on goroutines of
	// their own, with one shard and with the default number.
	executorSetups = []setup{inlineOneShard, goroutinesOneShard, inlineShards, goroutinesShards}
)

// forEachSetup runs test for every structure and setup, each as a subtest
// inside a synctest bubble of its own. opts are the setup's options.
func forEachSetup(t *testing.T, setups []setup, test func(t *testing.T, s structure, opts []hourglass.Option)) {
	t.Helper()
	for _, s := range structures {
		t.Run(s.name, func(t *testing.T) {
			for _, su := range setups {
				t.Run(su.name, func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) { test(t, s, su.opts(t)) })
				})
			}
		})
	}
}

// newTimer returns a Timer over s configured by opts. It is stopped when
// the test ends, in case the test fails before stopping it itself, and
// the test waits for its drivers to exit (Done), so that none is left
// blocked in the bubble.
func (s structure) newTimer(t *testing.T, opts ...hourglass.Option) *hourglass.Timer {
	t.Helper()
	tm := hourglass.New(append([]hourglass.Option{s.opt}, opts...)...)
	t.Cleanup(func() {
		tm.Stop()
		<-tm.Done()
	})
	return tm
}

// checkOnTime fails unless a callback due at want (virtual time since
// some start) ran at got: never early, and at most the structure's
// tolerance late.
func (s structure) checkOnTime(t *testing.T, what string, got, want time.Duration) {
	t.Helper()
	if got < want || got > want+s.tolerance {
		t.Errorf("%s ran at %v, want %v to %v", what, got, want, want+s.tolerance)
	}
}

// must returns a function that fails the test on a scheduling error and
// otherwise returns the Timeout: must(t)(tm.AfterFunc(d, f)).
func must(t *testing.T) func(*hourglass.Timeout, error) *hourglass.Timeout {
	return func(to *hourglass.Timeout, err error) *hourglass.Timeout {
		t.Helper()
		if err != nil {
			t.Fatalf("scheduling: %v", err)
		}
		return to
	}
}

// advance lets d of virtual time pass and then waits until every other
// goroutine in the bubble is blocked, so that every callback due by then
// has run, or is blocked in a sleep of its own.
func advance(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

// recorder notes when callbacks run, as virtual time since it was made.
// It is safe for concurrent use.
type recorder struct {
	start time.Time
	mu    sync.Mutex
	runs  map[int][]time.Duration
}

func newRecorder() *recorder {
	return &recorder{start: time.Now(), runs: make(map[int][]time.Duration)}
}

// fn returns a callback that records a run under key.
func (r *recorder) fn(key int) func() {
	return func() { r.record(key) }
}

func (r *recorder) record(key int) {
	d := time.Since(r.start)
	r.mu.Lock()
	r.runs[key] = append(r.runs[key], d)
	r.mu.Unlock()
}

// at returns the times of key's runs.
func (r *recorder) at(key int) []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.runs[key])
}

// total returns the number of runs of every key.
func (r *recorder) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, at := range r.runs {
		n += len(at)
	}
	return n
}

// checkRanOnce fails unless key ran exactly once, on time for want.
func (r *recorder) checkRanOnce(t *testing.T, s structure, key int, want time.Duration) {
	t.Helper()
	at := r.at(key)
	if len(at) != 1 {
		t.Errorf("timeout %d due after %v ran %d times (at %v), want once", key, want, len(at), at)
		return
	}
	s.checkOnTime(t, fmt.Sprintf("timeout %d due after %v", key, want), at[0], want)
}

// checkNotRun fails if key ran.
func (r *recorder) checkNotRun(t *testing.T, key int) {
	t.Helper()
	if at := r.at(key); len(at) > 0 {
		t.Errorf("timeout %d ran at %v, want never", key, at)
	}
}

// deadlines cover each level of a 1 ms hierarchical wheel, its slot
// boundaries, deadlines that are not whole ticks, and several rounds of an
// eight-slot hashed wheel.
var deadlines = []time.Duration{
	1, 999 * µs, ms, 1500 * µs, 2*ms + 1, 7 * ms, 8 * ms, 9 * ms, 63 * ms, 64 * ms, 65 * ms,
	100*ms + 1, time.Second, 4095 * ms, 4096 * ms, 4097 * ms, time.Minute,
	time.Hour, 49 * 24 * time.Hour,
}
