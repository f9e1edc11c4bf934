package worker

import (
	"context"
	"errors"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/client"
)

// maxReserves is how many reserves a worker keeps in flight at once.
//
// With two, the slots freed during a round trip would go out in a second
// reserve at once, but each reserve would carry half as many tasks, and
// the server's CPU per task grows with the requests
// (docs/results/2026-11-27-worker-throughput.md, `hourglass-bench
// --scenario worker`): on a machine whose CPU is the limit that costs
// more than the round trips save.
// [Options.Prefetch] is the way to keep handlers fed across a round
// trip.
const maxReserves = 1

// reserveLinger is the longest a reserve waits, once a slot is free, for
// the other slots to free before it is sent. Handlers that end at once
// free the slots of a reserve's tasks within microseconds of its answer;
// without the wait the next reserve took only the slots free before
// them, so that a busy worker's reserves alternated at about half its
// slots each, twice the requests and statements a task on the server.
const reserveLinger = time.Millisecond

// gatherSlots takes one slot of slots (the caller has taken one more
// already), then the slots free now, then those that free until
// deadline or ctx ends, until every slot is taken or api.MaxReserve, and
// returns how many it took, the first included. It returns before
// deadline once every slot of slots is taken.
func gatherSlots(ctx context.Context, slots chan struct{}, deadline time.Time) int {
	n := 1
	most := min(cap(slots), api.MaxReserve)
	var linger *time.Timer
	defer func() {
		if linger != nil {
			linger.Stop()
		}
	}()
	for n < most {
		select {
		case <-slots:
			n++
			continue
		default:
		}
		if linger == nil {
			left := time.Until(deadline)
			if left <= 0 {
				break
			}
			linger = time.NewTimer(left)
		}
		select {
		case <-slots:
			n++
			continue
		case <-linger.C:
		case <-ctx.Done():
		}
		break
	}
	return n
}

// reserveResult is the answer of one reserve of n tasks.
type reserveResult struct {
	n        int
	tasks    []api.Task
	err      error
	sent     time.Time
	received time.Time
}

// reserve reserves tasks for the free handlers and starts them, until
// ctx is done or the server refuses the reserve for good (then it calls
// r.stop). It keeps up to maxReserves reserves in flight, each for the
// slots free when it is sent (at least one, at most api.MaxReserve), and
// sends none while it backs off after a failure or an answer cut short.
// It returns once no reserve of its own is in flight.
func (r *run) reserve(ctx context.Context) {
	results := make(chan reserveResult, maxReserves)
	inFlight := 0
	b := newBackoff()
	// pause, when not nil, fires when the back-off after a failure is
	// over; no reserve is sent until it does.
	var pause <-chan time.Time
	var pauseTimer *time.Timer
	defer func() {
		if pauseTimer != nil {
			pauseTimer.Stop()
		}
	}()
	// wait takes the answers still on their way and starts their tasks
	// (which, ctx being done, release them without running).
	wait := func() {
		for ; inFlight > 0; inFlight-- {
			res := <-results
			r.start(ctx, res)
		}
	}
	backOff := func() time.Duration {
		d := b.Next()
		if pauseTimer == nil {
			pauseTimer = time.NewTimer(d)
		} else {
			pauseTimer.Reset(d)
		}
		pause = pauseTimer.C
		return d
	}
	for {
		if ctx.Err() != nil {
			wait()
			return
		}
		var slots chan struct{}
		if inFlight < maxReserves && pause == nil {
			slots = r.slots
		}
		select {
		case <-ctx.Done():
			wait()
			return
		case <-pause:
			pause = nil
		case <-slots:
			n := gatherSlots(ctx, r.slots, time.Now().Add(reserveLinger))
			inFlight++
			go func() {
				sent := time.Now()
				tasks, err := r.w.c.ReserveQueues(ctx, r.queues, n, reserveWait)
				results <- reserveResult{n: n, tasks: tasks, err: err, sent: sent, received: time.Now()}
			}()
		case res := <-results:
			inFlight--
			err := res.err
			switch {
			case err != nil && ctx.Err() != nil:
				r.start(ctx, res)
			case err != nil:
				r.start(ctx, res)
				if refused(err) {
					r.stop("reserve", err)
					wait()
					return
				}
				r.fails.failed("reserve", err, backOff(), "queues", r.queues)
			case len(res.tasks) == 0 && res.received.Sub(res.sent) < reserveWait/2:
				// The server cut the wait short: it is draining, or another
				// reserver took what woke this one. Asking again at once
				// could spin until it stops.
				r.start(ctx, res)
				backOff()
			default:
				b.Reset()
				r.fails.ok("reserve")
				r.start(ctx, res)
			}
		}
	}
}

// refused reports whether a reserve's error is one that no retry can
// cure: [client.IsPermanent], or the server refusing the request itself
// (400: a bad queue name; 404: a server without the call).
func refused(err error) bool {
	return client.IsPermanent(err) || errors.Is(err, client.ErrInvalid) || errors.Is(err, client.ErrNotFound)
}

// start gives back the slots of res that brought no task and starts a
// handler's goroutine for each of its tasks.
func (r *run) start(ctx context.Context, res reserveResult) {
	for range res.n - len(res.tasks) {
		r.slots <- struct{}{}
	}
	for i := range res.tasks {
		r.tasks.Add(1)
		// A pointer into res.tasks, which no one else keeps: the
		// goroutine's arguments are then a word, not a copy of the task.
		go r.work(ctx, &res.tasks[i], res.received)
	}
}
