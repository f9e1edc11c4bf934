package bench

import (
	"fmt"
	"time"

	"github.com/hourglass-go/hourglass"
)

// scheduleCancelScenario measures the operation a request timeout costs
// when the request completes in time: schedule a timeout, then cancel it,
// with n others pending at random deadlines an hour or two away.
var scheduleCancelScenario = Scenario{
	Name: "schedule-cancel",
	Doc:  "one goroutine schedules and cancels a fresh timeout (1-2 h away) in a loop while n others are pending; cost per schedule+cancel pair, one call each and through a Batch of 64",
	jobs: func(c *Config, sts []Structure) []Job {
		return perSize("schedule-cancel", sts, c.Sizes, randomDeadlines(c), func(s Structure, n int) Result {
			return scheduleCancel(s, n, c.Budget)
		})
	},
}

// scheduleCancel fills s with n pending timeouts and measures schedule+
// cancel pairs for budget, one call each; then, on a fresh Timer, pairs
// through batches (measureBatchPairs).
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
	bst, err := measureBatchPairs(s, n, budget)
	if err != nil {
		return failed(err)
	}
	var r Result
	r.add("ns/op", unitNs, st.ns)
	r.add("allocs/op", unitAllocs, st.allocs)
	r.add("B/op", unitBytes, st.bytes)
	r.add("batch-64 ns/op", unitNs, bst.ns)
	r.add("batch-64 allocs/op", unitAllocs, bst.allocs)
	r.add("ops", unitCount, float64(st.ops))
	return r
}

// pairBatch is how many schedule+cancel pairs one batch makes.
const pairBatch = 64

// measureBatchPairs measures schedule+cancel pairs pairBatch at a time
// with n timeouts pending, for budget: each batch cancels the pairBatch
// timeouts the previous one scheduled and schedules as many new ones, so
// every timeout is filed into the structure and taken out again. An
// hourglass Timer does it through one [hourglass.Timer.Batch], after
// filling its n pending through batches too (value timeouts are kept
// apart from the others); the runtime, which has no batch, makes the
// same calls one at a time. The figures are per pair. The delays (1-2 h)
// come from a table drawn before the clock starts, on both sides, as in
// the root package's BenchmarkBatch_AfterFuncCancel_Pending: a draw
// (about 5 ns) is a sixth of a batch pair and would be measured as the
// timer's.
func measureBatchPairs(s Structure, n int, budget time.Duration) (opStats, error) {
	if s.option == nil {
		return measureRuntimeBatchPairs(n, budget), nil
	}
	t := hourglass.New(s.option(n), hourglass.WithExecutor(hourglass.Inline))
	defer t.Stop()
	var err error
	d := newDelayTable()
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
	t.Batch(func(b *hourglass.Batch) {
		for j := range last {
			last[j] = schedule(b)
		}
	})
	if err != nil {
		return opStats{}, err
	}
	pairs := func(b *hourglass.Batch) {
		for j, h := range last {
			b.Cancel(h)
			last[j] = schedule(b)
		}
	}
	st := measureOps(budget, func() { t.Batch(pairs) })
	return perPair(st), err
}

// measureRuntimeBatchPairs is measureBatchPairs for the runtime's timers.
func measureRuntimeBatchPairs(n int, budget time.Duration) opStats {
	d := newDelayTable()
	ts := make([]*time.Timer, n)
	for i := range ts {
		ts[i] = time.AfterFunc(d.next(), noop)
	}
	last := make([]*time.Timer, pairBatch)
	for j := range last {
		last[j] = time.AfterFunc(d.next(), noop)
	}
	st := measureOps(budget, func() {
		for j, t := range last {
			t.Stop()
			last[j] = time.AfterFunc(d.next(), noop)
		}
	})
	for _, t := range append(ts, last...) {
		t.Stop()
	}
	return perPair(st)
}

// delayTable hands out far delays (as farDelay draws them) from a table
// drawn beforehand, cycling through it.
type delayTable struct {
	d []time.Duration
	i int
}

func newDelayTable() *delayTable {
	t := &delayTable{d: make([]time.Duration, 1<<16)}
	for i := range t.d {
		t.d[i] = farDelay()
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
