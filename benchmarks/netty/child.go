package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"sync/atomic"
	"time"

	"github.com/hourglass-go/hourglass"
)

// The Go side: one job a process, as NettyBench.java's, started by the
// driver as this program with -child. Each job prints its results as one
// line of JSON; the idle job prints "ready" and waits for standard input
// to close.

// childConfig is what the driver passes to a job.
type childConfig struct {
	n       int           // timeouts pending (pair, heap) or in the burst
	budget  time.Duration // the measured pair loop's wall time
	warmup  time.Duration // the pair loop's run before it is measured
	spread  time.Duration // the burst's delays span [0, spread)
	timeout time.Duration // how long a burst waits for its last fire
	// burstWarm is how many timeouts a burst job runs through the timer,
	// as a burst of its own, before the measured one (see warmBurst).
	burstWarm int
}

// goJobs are the Go side's jobs by name.
var goJobs = map[string]func(childConfig) (map[string]float64, error){
	"seed":             func(childConfig) (map[string]float64, error) { return seedSums(), nil },
	"pair-afterfunc":   func(c childConfig) (map[string]float64, error) { return pair(c, afterFuncAPI) },
	"pair-arm":         func(c childConfig) (map[string]float64, error) { return pair(c, armAPI) },
	"heap-afterfunc":   func(c childConfig) (map[string]float64, error) { return heap(c, afterFuncAPI) },
	"heap-arm":         func(c childConfig) (map[string]float64, error) { return heap(c, armAPI) },
	"burst-inline":     func(c childConfig) (map[string]float64, error) { return burst(c, afterFuncAPI, true, false) },
	"burst-arm-inline": func(c childConfig) (map[string]float64, error) { return burst(c, armAPI, true, false) },
	"burst-inline-locked": func(c childConfig) (map[string]float64, error) {
		return burst(c, afterFuncAPI, true, true)
	},
	"burst-arm-inline-locked": func(c childConfig) (map[string]float64, error) {
		return burst(c, armAPI, true, true)
	},
	"burst-default":     func(c childConfig) (map[string]float64, error) { return burst(c, afterFuncAPI, false, false) },
	"burst-arm-default": func(c childConfig) (map[string]float64, error) { return burst(c, armAPI, false, false) },
	"idle":              func(childConfig) (map[string]float64, error) { return nil, idle() },
}

// api is one of the two ways to schedule and cancel a timeout: Timer.AfterFunc
// and Timeout.Cancel (a *Timeout a timeout), or Timer.Arm and Timer.Cancel
// (a Handle value).
type api int

const (
	afterFuncAPI api = iota
	armAPI
)

// handles keeps what one api returns, as the Java side keeps its Timeouts.
type handles struct {
	tos []*hourglass.Timeout
	hs  []hourglass.Handle
}

func noop() {}

// fill schedules n timeouts 0-10 minutes away through a, keeping their
// handles.
func fill(t *hourglass.Timer, a api, n int) (handles, error) {
	g := splitMix64{seedFill}
	var k handles
	if a == afterFuncAPI {
		k.tos = make([]*hourglass.Timeout, n)
	} else {
		k.hs = make([]hourglass.Handle, n)
	}
	for i := range n {
		d := time.Duration(g.delay(tenMinutes))
		var err error
		if a == afterFuncAPI {
			k.tos[i], err = t.AfterFunc(d, noop)
		} else {
			k.hs[i], err = t.Arm(d, noop)
		}
		if err != nil {
			return k, err
		}
	}
	return k, nil
}

// pairs schedules and cancels timeouts through a, one call each, for
// budget of wall time, and returns how many pairs it made.
func pairs(t *hourglass.Timer, a api, g *splitMix64, budget time.Duration) (int64, error) {
	start := time.Now()
	var count int64
	for {
		for range 1000 {
			d := time.Duration(g.delay(tenMinutes))
			if a == afterFuncAPI {
				to, err := t.AfterFunc(d, noop)
				if err != nil {
					return count, err
				}
				to.Cancel()
			} else {
				h, err := t.Arm(d, noop)
				if err != nil {
					return count, err
				}
				t.Cancel(h)
			}
		}
		count += 1000
		if time.Since(start) >= budget {
			return count, nil
		}
	}
}

// gcCPU is the CPU time the garbage collector has used so far.
func gcCPU() time.Duration {
	s := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64 {
		return 0
	}
	return time.Duration(s[0].Value.Float64() * 1e9)
}

func pair(c childConfig, a api) (map[string]float64, error) {
	t := hourglass.New()
	defer t.Stop()
	kept, err := fill(t, a, c.n)
	if err != nil {
		return nil, err
	}
	time.Sleep(100 * time.Millisecond) // as the Java side lets its worker file them
	g := splitMix64{seedPairs}
	if _, err := pairs(t, a, &g, c.warmup); err != nil {
		return nil, err
	}
	c0, err := procCPU("self")
	if err != nil {
		return nil, err
	}
	gc0, w0 := gcCPU(), time.Now()
	count, err := pairs(t, a, &g, c.budget)
	if err != nil {
		return nil, err
	}
	wall := time.Since(w0)
	c1, err := procCPU("self")
	if err != nil {
		return nil, err
	}
	gc := gcCPU() - gc0
	runtime.KeepAlive(kept)
	return map[string]float64{
		"pairs":       float64(count),
		"wall_ns":     float64(wall) / float64(count),
		"cpu_ns":      float64(c1-c0) / float64(count),
		"gc_ms_per_s": float64(gc.Milliseconds()) / wall.Seconds(),
	}, nil
}

// heapAlloc is the heap's live bytes after a collection.
func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func heap(c childConfig, a api) (map[string]float64, error) {
	t := hourglass.New()
	defer t.Stop()
	// Start the driver, as the Java side starts its worker.
	if to, err := t.AfterFunc(time.Hour, noop); err != nil {
		return nil, err
	} else {
		to.Cancel()
	}
	time.Sleep(100 * time.Millisecond)
	before := heapAlloc()
	kept, err := fill(t, a, c.n)
	if err != nil {
		return nil, err
	}
	time.Sleep(200 * time.Millisecond)
	after := heapAlloc()
	runtime.KeepAlive(kept)
	return map[string]float64{"bytes": (float64(after) - float64(before)) / float64(c.n)}, nil
}

// burstRecord is what a burst's callbacks write, as the Java side's.
type burstRecord struct {
	base     time.Time
	deadline []int64 // nanoseconds after base
	late     []int64
	runs     []atomic.Int32
	fired    atomic.Int64
	end      atomic.Int64 // nanoseconds after base when the last one ran
	done     chan struct{}
}

func (b *burstRecord) fire(i int) {
	now := int64(time.Since(b.base))
	b.late[i] = now - b.deadline[i]
	b.runs[i].Add(1)
	if b.fired.Add(1) == int64(len(b.late)) {
		b.end.Store(now)
		close(b.done)
	}
}

// burst runs the measured burst through a, on an Inline Timer if inline.
// With locked, the scheduling goroutine is locked to its thread, whose
// CPU is then the caller's cost (caller_cpu_ns), as the Java side's
// scheduling thread's is; the other jobs leave it unlocked, as a Go
// program's goroutines are, since a locked goroutine's every wait for
// the drivers hands its thread's P to another thread and back (at a load
// average of 8, a quarter of the fires/s and 60% more p99 lateness; see
// docs/BENCHMARKS.md, netty).
func burst(c childConfig, a api, inline, locked bool) (map[string]float64, error) {
	var opts []hourglass.Option
	if inline {
		opts = append(opts, hourglass.WithExecutor(hourglass.Inline))
	}
	t := hourglass.New(opts...)
	defer t.Stop()
	if to, err := t.AfterFunc(time.Hour, noop); err != nil {
		return nil, err
	} else {
		to.Cancel()
	}
	if err := warmBurst(t, a, c.burstWarm, c.spread, c.timeout); err != nil {
		return nil, err
	}
	n := c.n
	b := &burstRecord{
		deadline: make([]int64, n),
		late:     make([]int64, n),
		runs:     make([]atomic.Int32, n),
		done:     make(chan struct{}),
	}
	g := splitMix64{seedBurst}
	delays := make([]time.Duration, n)
	callbacks := make([]func(), n)
	for i := range n {
		delays[i] = time.Duration(g.delay(uint64(c.spread)))
		callbacks[i] = func() { b.fire(i) }
	}
	runtime.GC()
	time.Sleep(100 * time.Millisecond)

	if locked {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	t0, err := threadCPU()
	if err != nil {
		return nil, err
	}
	c0, err := procCPU("self")
	if err != nil {
		return nil, err
	}
	gc0 := gcCPU()
	b.base = time.Now()
	for i, d := range delays {
		b.deadline[i] = int64(time.Since(b.base) + d)
		var err error
		if a == afterFuncAPI {
			_, err = t.AfterFunc(d, callbacks[i])
		} else {
			_, err = t.Arm(d, callbacks[i])
		}
		if err != nil {
			return nil, err
		}
	}
	scheduled := time.Since(b.base)
	c1, err := procCPU("self")
	if err != nil {
		return nil, err
	}
	t1, err := threadCPU()
	if err != nil {
		return nil, err
	}
	all := true
	select {
	case <-b.done:
	case <-time.After(c.spread + c.timeout):
		all = false
	}
	c2, err := procCPU("self")
	if err != nil {
		return nil, err
	}
	gc := gcCPU() - gc0
	time.Sleep(50 * time.Millisecond) // a second run of any would show now

	var early, lost, twice int
	seen := make([]int64, 0, n)
	for i := range n {
		r := b.runs[i].Load()
		if r == 0 {
			lost++
			continue
		}
		if r > 1 {
			twice++
		}
		late := atomic.LoadInt64(&b.late[i])
		if late < 0 {
			early++
		}
		seen = append(seen, late)
	}
	slices.Sort(seen)
	fps := 0.0
	if all {
		fps = float64(n) / time.Duration(b.end.Load()).Seconds()
	}
	r := map[string]float64{
		"schedule_ns":     float64(scheduled.Nanoseconds()) / float64(n),
		"schedule_cpu_ns": float64(c1-c0) / float64(n),
		"cpu_ns":          float64(c2-c0) / float64(n),
		"gc_ms":           float64(gc.Microseconds()) / 1e3,
		"fires_per_s":     fps,
		"late_p50_ms":     pct(seen, 0.50) / 1e6,
		"late_p99_ms":     pct(seen, 0.99) / 1e6,
		"late_max_ms":     0,
		"early":           float64(early),
		"lost":            float64(lost),
		"double":          float64(twice),
	}
	if locked {
		// Only a locked goroutine's thread is the caller's.
		r["caller_cpu_ns"] = float64(t1-t0) / float64(n)
	}
	if len(seen) > 0 {
		r["late_max_ms"] = float64(seen[len(seen)-1]) / 1e6
	}
	if all {
		for k, v := range decompose(b.deadline, b.late, int64(scheduled)) {
			r[k] = v
		}
	}
	return r, nil
}

// decompose splits a burst's time from the first call to the last fire,
// as NettyBench.java's decompose does, from each timeout's deadline and
// lateness (nanoseconds after the first call): the scheduling loop
// (loop_ms), the last deadline (last_due_ms) and the last fire (end_ms,
// fires/s's denominator), so end = loop + (last_due - loop) + (end -
// last_due); and how far firing was behind: the timeouts due by the
// loop's end and not yet fired then (behind_at_loop_end), and the most
// due and not yet fired at any deadline (behind_max). O(n log n); it
// sorts copies.
func decompose(deadline, late []int64, loop int64) map[string]float64 {
	due := slices.Clone(deadline)
	fire := make([]int64, len(late))
	for i := range late {
		fire[i] = deadline[i] + late[i]
	}
	slices.Sort(due)
	slices.Sort(fire)
	m := len(due)
	if m == 0 {
		return nil
	}
	// behind(t) = #due ≤ t − #fired ≤ t, largest just after a deadline.
	worst, f := 0, 0
	for i, d := range due {
		for f < m && fire[f] <= d {
			f++
		}
		worst = max(worst, i+1-f)
	}
	dueByLoop, _ := slices.BinarySearch(due, loop+1)
	firedByLoop, _ := slices.BinarySearch(fire, loop+1)
	return map[string]float64{
		"loop_ms":            float64(loop) / 1e6,
		"last_due_ms":        float64(due[m-1]) / 1e6,
		"end_ms":             float64(fire[m-1]) / 1e6,
		"behind_at_loop_end": float64(max(0, dueByLoop-firedByLoop)),
		"behind_max":         float64(worst),
	}
}

// warmBurst runs a burst of n timeouts through t before the measured
// one, as NettyBench.java's warmBurst does through Netty's timer: due
// within spread of their calls (delays from seedWarm), each counting its
// fire, and waits for the last. For the JVM it is the JIT's warm-up of
// the paths the burst takes; for both sides, the measured burst then
// meets a timer that has burst before, as a long-running program's does.
func warmBurst(t *hourglass.Timer, a api, n int, spread, timeout time.Duration) error {
	if n <= 0 {
		return nil
	}
	var fired atomic.Int64
	done := make(chan struct{})
	f := func() {
		if fired.Add(1) == int64(n) {
			close(done)
		}
	}
	g := splitMix64{seedWarm}
	for range n {
		d := time.Duration(g.delay(uint64(spread)))
		var err error
		if a == afterFuncAPI {
			_, err = t.AfterFunc(d, f)
		} else {
			_, err = t.Arm(d, f)
		}
		if err != nil {
			return err
		}
	}
	select {
	case <-done:
		return nil
	case <-time.After(spread + timeout):
		return fmt.Errorf("the warm-up burst: %d of %d fired", fired.Load(), n)
	}
}

// pct is the p-th percentile of sorted, nearest rank, as the Java side's.
func pct(sorted []int64, p float64) float64 {
	m := len(sorted)
	if m == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(m))) - 1
	return float64(sorted[max(0, min(i, m-1))])
}

// idle holds one timeout an hour away until standard input closes; the
// driver measures the process meanwhile.
func idle() error {
	t := hourglass.New()
	defer t.Stop()
	to, err := t.AfterFunc(time.Hour, noop)
	if err != nil {
		return err
	}
	fmt.Println("ready")
	if _, err := io.Copy(io.Discard, bufio.NewReader(os.Stdin)); err != nil {
		return err
	}
	if to.Expired() {
		return errors.New("the timeout an hour away fired")
	}
	return nil
}
