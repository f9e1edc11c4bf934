package cluster

import (
	"errors"
	"sync"
)

// group runs the requests that arrive while one of its statements is in
// flight together, as one statement, the way a group commit shares one
// fsync: the first caller runs its request alone; callers arriving
// meanwhile queue up, and when the statement returns, the oldest of them
// leads the next statement for all that queued. So k callers at once
// cost about two statements instead of k, and no caller waits for more
// than the statement before its own and its own. No goroutine is
// started: the callers take turns.
//
// A zero group is not usable; run must be set. It is safe for concurrent
// use.
type group[R any] struct {
	// run executes a statement for the calls and sets each call's err;
	// it must not block on another call of the same group.
	run func([]*call[R])

	mu      sync.Mutex
	running bool       // a leader is running a statement; guarded by mu
	pending []*call[R] // queued for the next statement; guarded by mu
}

// call is one request of a group and its answer.
type call[R any] struct {
	req R
	err error
	// done is closed once err is set; lead is signalled when this call
	// is to lead the next statement.
	done chan struct{}
	lead chan struct{}
}

// do runs req in the group's next statement and returns its error. It
// waits for that statement whatever happens to the caller's context:
// the statement's own context bounds it (see run).
func (g *group[R]) do(req R) error {
	c := &call[R]{req: req, done: make(chan struct{}), lead: make(chan struct{}, 1)}
	g.mu.Lock()
	g.pending = append(g.pending, c)
	if g.running {
		g.mu.Unlock()
		select {
		case <-c.done:
			return c.err
		case <-c.lead:
		}
		g.mu.Lock()
	}
	g.running = true
	batch := g.pending
	g.pending = nil
	g.mu.Unlock()

	g.lead(batch)
	return c.err
}

// lead runs batch's statement, answers its calls and hands the lead on
// to the oldest call queued meanwhile, if any. A panic in run (a bug)
// still answers the calls, with errGroupPanic, and hands the lead on
// before it goes up the leader's stack (where net/http, say, recovers
// it): the calls queued behind are not left waiting for ever.
func (g *group[R]) lead(batch []*call[R]) {
	ran := false
	defer func() {
		for _, b := range batch {
			if !ran {
				b.err = errGroupPanic
			}
			close(b.done)
		}
		g.mu.Lock()
		if len(g.pending) > 0 {
			g.pending[0].lead <- struct{}{}
		} else {
			g.running = false
		}
		g.mu.Unlock()
	}()
	g.run(batch)
	ran = true
}

var errGroupPanic = errors.New("hourglass: a grouped statement panicked")
