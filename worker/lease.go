package worker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/client"
)

// minTouch bounds how often a lease is touched: a ttr of a few
// milliseconds would otherwise touch in a loop.
const minTouch = time.Millisecond

// lease is a reserved task's lease as the worker keeps it alive while
// the task's handler runs. Its deadline is on the worker's clock, so
// that a server's clock ahead or behind does not matter. The server
// starts a lease of ttr when it touches the task, which is after the
// worker sent the touch, so the touch's send time plus ttr is a lower
// bound of the lease's end. A reserve is a long poll, though: its lease
// starts when a task is taken, anywhere in the wait, so the first
// deadline is reckoned from the answer's arrival instead, late by the
// answer's time on its way, which the first touch, at half the ttr,
// leaves ample room for.
//
// keep runs in its own goroutine; the other methods are safe to call
// from any goroutine.
type lease struct {
	queue, id, token string
	ttr              time.Duration

	mu sync.Mutex
	// deadline is when the lease surely still holds, on the worker's
	// clock. Guarded by mu.
	deadline time.Time
	// lost is set when the lease is gone. Guarded by mu.
	lost bool
	// halted is set when the handler returned: no keeper starts after
	// it. Guarded by mu.
	halted bool
	// stopKeep ends the context of the keeper running (nil before it
	// starts). Guarded by mu.
	stopKeep context.CancelFunc

	// stop cancels the handler's context with a cause (set by run.work
	// before the lease is watched, then read-only).
	stop context.CancelCauseFunc
	// keeping is done when the keeper's timer function has returned
	// (one Add before the timer is armed).
	keeping sync.WaitGroup
}

// startKeep returns the context of the keeper, a child of parent, unless
// the handler already returned (ok false). The context is made when the
// keeper's timer fires, not for every task, since most handlers return
// before half the ttr.
func (l *lease) startKeep(parent context.Context) (ctx context.Context, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.halted {
		return nil, false
	}
	ctx, l.stopKeep = context.WithCancel(parent)
	return ctx, true
}

// haltKeep marks the handler returned and ends the keeper's context if
// it started.
func (l *lease) haltKeep() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.halted = true
	if l.stopKeep != nil {
		l.stopKeep()
	}
}

// newLease returns the lease of t, reserved in an answer that arrived at
// received.
func newLease(t *api.Task, received time.Time) *lease {
	ttr := t.TTR.D()
	return &lease{queue: t.Queue, id: t.ID, token: t.Lease, ttr: ttr, deadline: received.Add(ttr)}
}

// ack returns the ack that names the lease.
func (l *lease) ack() api.Ack { return api.Ack{Queue: l.queue, ID: l.id, Lease: l.token} }

// until returns the lease's deadline on the worker's clock.
func (l *lease) until() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// isLost reports whether keep found the lease gone.
func (l *lease) isLost() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// keep touches the lease halfway through each term, so that it never
// runs out while the handler runs, until ctx is done. A touch that fails
// for any other reason is retried with back-off, its failures counted in
// fails; when the server answers that the task or lease is gone (404,
// 409), a touch fails for good ([client.IsPermanent]: a 401, say), or
// the deadline passes without a touch getting through, keep marks the
// lease lost, calls lost with the reason, and returns.
//
// touch renews the lease (client.Touch); it gets a context that ends at
// the deadline.
func (l *lease) keep(ctx context.Context, touch func(context.Context) error, fails *failureLog, lost func(why error)) {
	b := newBackoff()
	next := l.until().Add(-l.ttr / 2)
	t := time.NewTimer(max(time.Until(next), 0))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		deadline := l.until()
		sent := time.Now()
		if !sent.Before(deadline) {
			l.lose(fails.log, lost, errRanOut)
			return
		}
		tctx, cancel := context.WithDeadline(ctx, deadline)
		err := touch(tctx)
		cancel()
		switch {
		case err == nil:
			b.Reset()
			fails.ok("touch")
			l.mu.Lock()
			l.deadline = sent.Add(l.ttr)
			l.mu.Unlock()
			t.Reset(max(l.ttr/2, minTouch) - time.Since(sent))
		case ctx.Err() != nil:
			return
		case errors.Is(err, client.ErrNotFound) || errors.Is(err, client.ErrConflict) || client.IsPermanent(err):
			l.lose(fails.log, lost, err)
			return
		default:
			d := max(min(b.Next(), time.Until(deadline)/2), minTouch)
			fails.failed("touch", err, d, "queue", l.queue, "id", l.id)
			t.Reset(d)
		}
	}
}

// errRanOut is why a lease is lost when no touch got through in time.
var errRanOut = errors.New("hourglass: lease ran out before a touch got through")

// lose marks the lease lost, logs why, and calls lost.
func (l *lease) lose(log *slog.Logger, lost func(error), why error) {
	l.mu.Lock()
	l.lost = true
	l.mu.Unlock()
	log.Warn("lease lost; cancelling the handler", "queue", l.queue, "id", l.id, "reason", why)
	lost(why)
}

// cancel marks the lease lost because its task was cancelled on the
// server, and logs it.
func (l *lease) cancel(log *slog.Logger) {
	l.mu.Lock()
	l.lost = true
	l.mu.Unlock()
	log.Info("task cancelled on the server; cancelling the handler", "queue", l.queue, "id", l.id)
}
