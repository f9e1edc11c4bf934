package worker

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/client"
)

// How a worker learns that a task it runs was cancelled: while it holds
// at least one running task, it asks the server every checkEvery (with a
// tenth of jitter, so that workers started together spread out) which
// of the leases it holds were ended by a cancel or a delete, in one
// request for all of them (client.CancelledLeases, at most api.MaxAcks
// leases a request), and cancels those handlers' contexts with
// ErrCancelled. The server answers from memory. A worker that holds
// nothing asks nothing. A check has checkTimeout; after a failed one
// the next waits checkEvery or the worker's back-off (newBackoff),
// whichever is longer, and failures are logged about once a second with
// a count (failureLog); a server that does not know the route (404: an
// older server) is not asked again, and the handlers then learn of a
// cancel at their next touch, which answers 404.
const (
	checkEvery   = time.Second
	checkTimeout = 5 * time.Second
)

// cancels watches the leases of the running handlers for cancels. Its
// methods are safe for concurrent use; run is its one goroutine.
type cancels struct {
	check func(ctx context.Context, leases []string) ([]string, error)
	fails *failureLog
	log   *slog.Logger

	mu sync.Mutex
	// held maps each watched lease's token to the lease, whose stop
	// cancels its handler. Guarded by mu.
	held map[string]*lease
	// off is set once the server answered that it has no such route.
	// Guarded by mu.
	off bool
	// some is signalled when held gains its first lease.
	some chan struct{}
}

func newCancels(check func(context.Context, []string) ([]string, error), fails *failureLog, log *slog.Logger) *cancels {
	return &cancels{check: check, fails: fails, log: log, held: map[string]*lease{}, some: make(chan struct{}, 1)}
}

// watch watches l until unwatch is called with its token: if it is
// cancelled, l is marked lost and its handler's context cancelled with
// ErrCancelled (l.stop), once. l.stop must be set. O(1).
func (c *cancels) watch(l *lease) {
	c.mu.Lock()
	c.held[l.token] = l
	if len(c.held) == 1 {
		select {
		case c.some <- struct{}{}:
		default:
		}
	}
	c.mu.Unlock()
}

// unwatch stops watching the lease token. O(1).
func (c *cancels) unwatch(token string) {
	c.mu.Lock()
	delete(c.held, token)
	c.mu.Unlock()
}

// stopAll cancels the handlers' contexts of every lease watched with
// cause, without marking them lost: the worker's shutdown, which reaches
// the handlers this way since their contexts are not children of the
// run's (see run.work). O(leases watched).
func (c *cancels) stopAll(cause error) {
	c.mu.Lock()
	ls := make([]*lease, 0, len(c.held))
	for _, l := range c.held {
		ls = append(ls, l)
	}
	c.mu.Unlock()
	for _, l := range ls {
		l.stop(cause)
	}
}

// leases returns the leases watched, or nil when none is (or the server
// has no such route).
func (c *cancels) leases() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.off || len(c.held) == 0 {
		return nil
	}
	ls := make([]string, 0, len(c.held))
	for l := range c.held {
		ls = append(ls, l)
	}
	return ls
}

// run checks the leases watched, as the comment above says, until ctx is
// done.
func (c *cancels) run(ctx context.Context) {
	b := newBackoff()
	// pause is the back-off after the last check failed; 0 after one
	// that worked.
	var pause time.Duration
	t := time.NewTimer(0)
	defer t.Stop()
	<-t.C
	for {
		ls := c.leases()
		if ls == nil {
			// Nothing held: wait, at no cost, for a lease.
			select {
			case <-ctx.Done():
				return
			case <-c.some:
				continue
			}
		}
		wait := checkEvery - checkEvery/20 + rand.N(checkEvery/10+1)
		// Never sooner than the next check would be.
		wait = max(wait, pause)
		t.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if ls = c.leases(); ls == nil {
			continue
		}
		if err := c.checkAll(ctx, ls); err != nil {
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, client.ErrNotFound) {
				c.mu.Lock()
				c.off = true
				c.mu.Unlock()
				c.fails.log.Warn("the server does not answer which leases were cancelled; a cancelled task's handler learns it at its next touch", "error", err)
				continue
			}
			pause = b.Next()
			c.fails.failed("check cancels", err, max(pause, checkEvery))
			continue
		}
		b.Reset()
		pause = 0
		c.fails.ok("check cancels")
	}
}

// checkAll asks about ls, api.MaxAcks at a time, and cancels the
// handlers of those cancelled.
func (c *cancels) checkAll(ctx context.Context, ls []string) error {
	for chunk := range slices.Chunk(ls, api.MaxAcks) {
		cctx, cancel := context.WithTimeout(ctx, checkTimeout)
		ended, err := c.check(cctx, chunk)
		cancel()
		if err != nil {
			return err
		}
		for _, l := range ended {
			c.mu.Lock()
			h := c.held[l]
			delete(c.held, l)
			c.mu.Unlock()
			if h != nil {
				h.cancel(c.log)
				h.stop(ErrCancelled)
			}
		}
	}
	return nil
}
