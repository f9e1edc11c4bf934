package bench

import (
	"fmt"
	"slices"
	"time"

	"github.com/hourglass-go/hourglass"
)

// scheduleCancelScenario measures the operation a request timeout costs
// when the request completes in time: schedule a timeout, then cancel it,
// with n others pending at random deadlines an hour or two away. A
// Timer's rows add two shapes through Batch, in turns with the
// runtime's same calls; then, when the hierarchical wheel runs, the
// one-call comparison with delays over 0-10 minutes (onecall.go), with
// other Go timer libraries when c.Peers names their module.
var scheduleCancelScenario = Scenario{
	Name: "schedule-cancel",
	Doc: "one goroutine schedules and cancels a fresh timeout (1-2 h away) in a loop while n others are pending; cost per schedule+cancel pair, one call each and through a Batch of 64 " +
		"(batch-64: each batch cancels the previous one's; batch-64 same: 0-10 min delays, the batch schedules 64 then cancels them; runtime/this: the runtime's same calls, in turns); " +
		"rows \"" + oneCallCase + "\": one call each with delays over 0-10 min, every side in one process in turns, hierarchical/this the median ratio of the turns (peers from benchmarks/peers when run from the repository)",
	jobs: func(c *Config, sts []Structure) []Job {
		jobs := perSize("schedule-cancel", sts, c.Sizes, randomDeadlines(c), func(s Structure, n int) Result {
			return scheduleCancel(s, n, c.Budget)
		})
		if !slices.ContainsFunc(sts, func(s Structure) bool { return s.Name == "hierarchical" }) {
			return jobs
		}
		for _, n := range c.Sizes {
			jobs = append(jobs, Job{
				Scenario: "schedule-cancel", Structure: "hierarchical", N: n, Case: oneCallCase,
				runAll: func() []Result { return compareOneCall(c, n) },
			})
		}
		return jobs
	},
}

// compareOneCallTurns is how many turns the one-call comparison takes.
const compareOneCallTurns = 5

// compareOneCall runs the one-call comparison at size n: in the peers'
// module if c.Peers names it, here without them otherwise.
func compareOneCall(c *Config, n int) []Result {
	if c.Peers == "" {
		return CompareOneCall(OneCallSides(), n, c.Budget, compareOneCallTurns)
	}
	rs, err := runPeers(c.Peers, n, c.Budget, compareOneCallTurns)
	if err != nil {
		return []Result{failed(fmt.Errorf("peers (%s): %w", c.Peers, err))}
	}
	return rs
}

// scheduleCancel fills s with n pending timeouts and measures schedule+
// cancel pairs for budget, one call each; then, on a fresh Timer, pairs
// through batches, in turns with the runtime's (measureBatchPairs).
func scheduleCancel(s Structure, n int, budget time.Duration) Result {
	t := s.newTimers(n)
	pending, err := fill(t, n)
	if err != nil {
		t.stop(pending)
		return failed(err)
	}
	st, err := measurePairs(t, budget)
	t.stop(pending)
	if err != nil {
		return failed(err)
	}
	bst, ratio, err := measureBatchPairs(s, n, budget, previousBatch)
	if err != nil {
		return failed(err)
	}
	sst, sratio, err := measureBatchPairs(s, n, budget, sameBatch)
	if err != nil {
		return failed(err)
	}
	var r Result
	r.add("ns/op", unitNs, st.ns)
	r.add("allocs/op", unitAllocs, st.allocs)
	r.add("B/op", unitBytes, st.bytes)
	r.add("batch-64 ns/op", unitNs, bst.ns)
	r.add("batch-64 allocs/op", unitAllocs, bst.allocs)
	if ratio > 0 {
		r.add("batch-64 runtime/this", unitRatio, ratio)
	}
	r.add("batch-64 same ns/op", unitNs, sst.ns)
	if sratio > 0 {
		r.add("batch-64 same runtime/this", unitRatio, sratio)
	}
	r.add("ops", unitCount, float64(st.ops))
	return r
}

// pairBatch is how many schedule+cancel pairs one batch makes.
const pairBatch = 64

// batchTurns is how many turns measureBatchPairs takes with the runtime.
const batchTurns = 5

// batchShape is a way of making schedule+cancel pairs pairBatch at a
// time: the delays it draws, and which timeouts a batch cancels.
type batchShape struct {
	// delay draws a delay, for the pending timeouts and the pairs alike.
	delay func() time.Duration
	// same: a batch schedules pairBatch timeouts and then cancels those
	// same ones. Otherwise it cancels the pairBatch timeouts the previous
	// batch scheduled, then schedules as many new ones.
	same bool
}

var (
	// previousBatch is the scenario's first shape: far timeouts (1-2 h),
	// each batch cancelling the previous one's, so that every timeout is
	// filed into the structure and taken out again.
	previousBatch = batchShape{delay: farDelay}
	// sameBatch is the second: a timeout per request of a poll, 0-10 min,
	// all cancelled before the batch ends (every request answered).
	sameBatch = batchShape{delay: oneCallDelay, same: true}
)

// measureBatchPairs measures schedule+cancel pairs pairBatch at a time
// with n timeouts pending, for budget, in shape sh. An hourglass Timer
// does it through one [hourglass.Timer.Batch], after filling its n
// pending through batches too (value timeouts are kept apart from the
// others); the runtime, which has no batch, makes the same calls one at
// a time. The figures are per pair. The delays come from a table drawn
// before the clock starts, on both sides, as in the root package's
// BenchmarkBatch_AfterFuncCancel_Pending: a draw is a sizeable part of
// a batch pair's cost and would be measured as the timer's.
//
// For a Timer, the runtime's pairs run beside it, with their own n
// pending, and the two take batchTurns turns of budget/batchTurns each:
// ratio is the median of the turns' runtime/Timer ratios, each taken
// from two measurements a moment apart, so that a slow stretch of the
// machine (on a shared host, the same loop's speed varies from one
// second to the next) falls on both sides of a ratio rather than on
// one. stats are the Timer's, over all its turns. ratio is 0 for the
// runtime itself.
func measureBatchPairs(s Structure, n int, budget time.Duration, sh batchShape) (stats opStats, ratio float64, err error) {
	if s.option == nil {
		rt := newRuntimeBatchPairs(n, sh)
		defer rt.stop()
		return perPair(measureOps(budget, rt.pairs)), 0, nil
	}
	t := hourglass.New(s.option(n), hourglass.WithExecutor(hourglass.Inline))
	defer t.Stop()
	d := newDelayTable(sh.delay)
	schedule := func(b *hourglass.Batch) hourglass.Handle {
		h, e := b.AfterFunc(d.next(), noop)
		if e != nil && err == nil {
			err = fmt.Errorf("filling %d pending: %w", n, e)
		}
		return h
	}
	for i := 0; i < n && err == nil; i += 1024 {
		t.Batch(func(b *hourglass.Batch) {
			for range min(1024, n-i) {
				schedule(b)
			}
		})
	}
	last := make([]hourglass.Handle, pairBatch)
	if !sh.same {
		t.Batch(func(b *hourglass.Batch) {
			for j := range last {
				last[j] = schedule(b)
			}
		})
	}
	if err != nil {
		return opStats{}, 0, err
	}
	pairs := func(b *hourglass.Batch) {
		for j, h := range last {
			b.Cancel(h)
			last[j] = schedule(b)
		}
	}
	if sh.same {
		pairs = func(b *hourglass.Batch) {
			for j := range last {
				last[j] = schedule(b)
			}
			for _, h := range last {
				b.Cancel(h)
			}
		}
	}
	rt := newRuntimeBatchPairs(n, sh)
	defer rt.stop()
	ratios := make([]float64, batchTurns)
	var total opStats
	for i := range ratios {
		st := measureOps(budget/batchTurns, func() { t.Batch(pairs) })
		rst := measureOps(budget/batchTurns, rt.pairs)
		ratios[i] = rst.ns / st.ns
		total.ops += st.ops
		total.ns += st.ns * float64(st.ops)
		total.allocs += st.allocs * float64(st.ops)
	}
	total.ns /= float64(total.ops)
	total.allocs /= float64(total.ops)
	slices.Sort(ratios)
	return perPair(total), ratios[len(ratios)/2], err
}

// runtimeBatchPairs is measureBatchPairs for the runtime's timers: n
// pending and pairBatch to schedule and cancel, in a shape.
type runtimeBatchPairs struct {
	d       *delayTable
	same    bool
	pending []*time.Timer
	last    []*time.Timer
}

func newRuntimeBatchPairs(n int, sh batchShape) *runtimeBatchPairs {
	r := &runtimeBatchPairs{d: newDelayTable(sh.delay), same: sh.same, pending: make([]*time.Timer, n), last: make([]*time.Timer, pairBatch)}
	for i := range r.pending {
		r.pending[i] = time.AfterFunc(r.d.next(), noop)
	}
	if !sh.same {
		for j := range r.last {
			r.last[j] = time.AfterFunc(r.d.next(), noop)
		}
	}
	return r
}

// pairs makes one batch's pairs, one call at a time.
func (r *runtimeBatchPairs) pairs() {
	if r.same {
		for j := range r.last {
			r.last[j] = time.AfterFunc(r.d.next(), noop)
		}
		for _, t := range r.last {
			t.Stop()
		}
		return
	}
	for j, t := range r.last {
		t.Stop()
		r.last[j] = time.AfterFunc(r.d.next(), noop)
	}
}

func (r *runtimeBatchPairs) stop() {
	for _, t := range append(r.pending, r.last...) {
		if t != nil {
			t.Stop()
		}
	}
}

// delayTable hands out delays drawn beforehand from a table, cycling
// through it.
type delayTable struct {
	d []time.Duration
	i int
}

func newDelayTable(draw func() time.Duration) *delayTable {
	t := &delayTable{d: make([]time.Duration, 1<<16)}
	for i := range t.d {
		t.d[i] = draw()
	}
	return t
}

// next returns the table's next delay.
func (t *delayTable) next() time.Duration {
	t.i++
	return t.d[t.i&(len(t.d)-1)]
}

// perPair turns the figures of a batch of pairBatch pairs into those of
// a pair.
func perPair(st opStats) opStats {
	st.ns /= pairBatch
	st.allocs /= pairBatch
	st.bytes /= pairBatch
	st.ops *= pairBatch
	return st
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
