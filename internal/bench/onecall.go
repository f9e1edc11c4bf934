package bench

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"time"

	"github.com/hourglass-go/hourglass"
)

// The one-call comparison: hourglass's schedule+cancel pair, one call
// each, side by side in one process with the runtime's and with other Go
// timer libraries' (the peers), each holding n timeouts pending at
// delays spread over 0-10 minutes, measured in turns. The peers are not
// dependencies of this module: the module benchmarks/peers adds them
// and runs [CompareOneCall] itself (see Config.Peers).

// Side is one timer the one-call comparison measures.
type Side struct {
	Name string
	// Doc says what the side is and how it is configured.
	Doc string
	// Start makes the timer, schedules n timeouts on it at delays from
	// delay, and returns pair, which schedules one timeout at a delay from
	// delay and cancels it, and stop, which ends the timer.
	Start func(n int, delay func() time.Duration) (pair func(), stop func(), err error)
}

// OneCallWindow is the window the one-call comparison's delays are drawn
// from, uniformly: timeouts of a few seconds to ten minutes, as request
// timeouts are, some of which fire while the pairs are measured.
const OneCallWindow = 10 * time.Minute

// oneCallCase is the Case of the comparison's rows.
const oneCallCase = "one call, 0-10 min"

// OneCallSides returns the sides the comparison measures without peers:
// a default hourglass Timer (hierarchical wheel, 1 ms tick, Goroutines)
// through AfterFunc and Timeout.Cancel, the same through Arm and
// Timer.Cancel, and the runtime's time.AfterFunc and Stop. The first is
// the side the others are compared with.
func OneCallSides() []Side {
	return []Side{
		{
			Name: "hierarchical",
			Doc:  "hourglass.New(): Timer.AfterFunc, Timeout.Cancel",
			Start: func(n int, delay func() time.Duration) (func(), func(), error) {
				t := hourglass.New()
				for range n {
					if _, err := t.AfterFunc(delay(), noop); err != nil {
						t.Stop()
						return nil, nil, fmt.Errorf("filling %d pending: %w", n, err)
					}
				}
				pair := func() {
					to, _ := t.AfterFunc(delay(), noop)
					to.Cancel()
				}
				return pair, func() { t.Stop() }, nil
			},
		},
		{
			Name: "hierarchical Arm",
			Doc:  "hourglass.New(): Timer.Arm, Timer.Cancel",
			Start: func(n int, delay func() time.Duration) (func(), func(), error) {
				t := hourglass.New()
				for range n {
					if _, err := t.Arm(delay(), noop); err != nil {
						t.Stop()
						return nil, nil, fmt.Errorf("filling %d pending: %w", n, err)
					}
				}
				pair := func() {
					h, _ := t.Arm(delay(), noop)
					t.Cancel(h)
				}
				return pair, func() { t.Stop() }, nil
			},
		},
		{
			Name: "runtime",
			Doc:  "time.AfterFunc, (*time.Timer).Stop",
			Start: func(n int, delay func() time.Duration) (func(), func(), error) {
				ts := make([]*time.Timer, n)
				for i := range ts {
					ts[i] = time.AfterFunc(delay(), noop)
				}
				pair := func() { time.AfterFunc(delay(), noop).Stop() }
				stop := func() {
					for _, t := range ts {
						t.Stop()
					}
				}
				return pair, stop, nil
			},
		},
	}
}

// oneCallDelay draws a delay of the comparison.
func oneCallDelay() time.Duration { return rand.N(OneCallWindow) }

// CompareOneCall measures the schedule+cancel pairs of sides with n
// timeouts pending on each, in turns: every side is started first, then
// each turn times every side for budget/turns, in order and in reverse
// on alternate turns, so that a slow stretch of the machine falls on all
// of them. Delays come from a table drawn beforehand, the same for every
// side.
//
// It returns a Result per side: ns/op, the median of the turns; allocs/op
// and B/op, over all its turns; and "first/this", the median of the
// turns' ratios of the first side's pair to this side's, so that a
// figure under 1 on a row means the first side was cheaper there. A side
// that fails to start gets a Result with the error.
func CompareOneCall(sides []Side, n int, budget time.Duration, turns int) []Result {
	turns = max(turns, 1)
	out := make([]Result, len(sides))
	pairs := make([]func(), len(sides))
	for i, s := range sides {
		out[i] = Result{Scenario: "schedule-cancel", Structure: s.Name, N: n, Case: oneCallCase}
		d := newDelayTable(oneCallDelay)
		pair, stop, err := s.Start(n, d.next)
		if err != nil {
			out[i].Err = err.Error()
			continue
		}
		defer stop()
		pairs[i] = pair
	}
	ns := make([][]float64, len(sides))
	total := make([]opStats, len(sides))
	order := make([]int, len(sides))
	for turn := range turns {
		for i := range order {
			order[i] = i
		}
		if turn%2 == 1 {
			slices.Reverse(order)
		}
		for _, i := range order {
			if pairs[i] == nil {
				continue
			}
			st := measureOps(budget/time.Duration(turns), pairs[i])
			ns[i] = append(ns[i], st.ns)
			total[i].ops += st.ops
			total[i].allocs += st.allocs * float64(st.ops)
			total[i].bytes += st.bytes * float64(st.ops)
		}
	}
	runtime.KeepAlive(pairs)
	for i := range sides {
		if pairs[i] == nil {
			continue
		}
		r := &out[i]
		r.add("ns/op", unitNs, median(slices.Clone(ns[i])))
		r.add("allocs/op", unitAllocs, total[i].allocs/float64(total[i].ops))
		r.add("B/op", unitBytes, total[i].bytes/float64(total[i].ops))
		if pairs[0] != nil {
			ratios := make([]float64, len(ns[i]))
			for t := range ratios {
				ratios[t] = ns[0][t] / ns[i][t]
			}
			r.add(sides[0].Name+"/this", unitRatio, median(ratios))
		}
		r.add("ops", unitCount, float64(total[i].ops))
	}
	return out
}
