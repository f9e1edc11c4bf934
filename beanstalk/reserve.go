package beanstalk

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/hourglass-go/hourglass/task"
)

// Reserving.
//
// reserve and reserve-with-timeout hand out the first ready job across
// the watch list (broker.ReserveAny). A reserve that finds none blocks,
// as beanstalkd's does, until one is ready, its timeout passes (TIMED_OUT),
// the client half-closes the connection (TIMED_OUT), or the safety margin
// of a job the connection holds begins (DEADLINE_SOON).
//
// The safety margin is the last second of a reservation's TTR (its lease,
// Task.LeaseUntil): during it a reserve that finds no ready job answers
// DEADLINE_SOON at once instead of waiting, and a reserve waiting when it
// begins answers DEADLINE_SOON then, so that the client can still delete,
// release or touch the job before it times out. A blocked reserve waits in
// the broker in slices of at most task.MaxWait, each one ending no later
// than the next margin or the timeout.

// safetyMargin is the last part of a TTR during which no reserve waits.
const safetyMargin = time.Second

// reserve serves reserve and reserve-with-timeout.
func (c *conn) reserve(cmd *command) error {
	c.setWorker()
	t, ok, err := c.s.b.ReserveAny(context.Background(), c.watchQueues, 0)
	if err != nil {
		return c.replyErr(err)
	}
	if ok {
		return c.reserved(t)
	}
	if c.deadlineSoon(time.Now()) {
		return c.reply(msgDeadlineSoon)
	}
	if cmd.op == opReserveWithTimeout && cmd.timeout == 0 {
		return c.reply(msgTimedOut)
	}
	return c.block(cmd)
}

// block waits for a job as reserve does when none is ready.
func (c *conn) block(cmd *command) error {
	if err := c.w.Flush(); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(c.s.ctx)
	defer cancel()
	hangup := c.watchHangup(cancel)
	c.s.tubes.wait(c.watch, 1)
	c.s.stats.waiting.Add(1)
	var end time.Time
	if cmd.op == opReserveWithTimeout && cmd.timeout > 0 {
		end = time.Now().Add(time.Duration(cmd.timeout) * time.Second)
	}
	t, reply, err := c.wait(ctx, end)
	c.s.tubes.wait(c.watch, -1)
	c.s.stats.waiting.Add(-1)
	hung := hangup()
	switch {
	case err != nil && !errors.Is(err, context.Canceled):
		return c.replyErr(err)
	case reply != "":
		return c.reply(reply)
	case err == nil:
		return c.reserved(t)
	case c.s.ctx.Err() != nil:
		return errQuit // Shutdown: close without a reply
	case hung:
		return c.reply(msgTimedOut) // as beanstalkd answers a half-closed connection
	}
	return err
}

// wait reserves a job from the watch list, waiting until end (zero: no
// end) or the next safety margin, whichever comes first; then it returns
// the reply to send instead (TIMED_OUT or DEADLINE_SOON). It returns
// ctx's error when ctx ends (a reservation the broker was committing
// then is given back at once).
func (c *conn) wait(ctx context.Context, end time.Time) (task.Task, string, error) {
	for {
		now := time.Now()
		w := task.MaxWait
		if !end.IsZero() {
			if now.Compare(end) >= 0 {
				return task.Task{}, msgTimedOut, nil
			}
			w = min(w, end.Sub(now))
		}
		if margin, ok := c.nextMargin(now); ok {
			if !now.Before(margin) {
				if c.deadlineSoon(now) {
					return task.Task{}, msgDeadlineSoon, nil
				}
				continue // that job is no longer held: look again
			}
			w = min(w, margin.Sub(now))
		}
		t, ok, err := c.s.b.ReserveAny(ctx, c.watchQueues, w)
		if err != nil {
			return task.Task{}, "", err
		}
		if ok {
			return t, "", nil
		}
		if err := ctx.Err(); err != nil {
			return task.Task{}, "", err
		}
	}
}

// nextMargin returns when the safety margin of the soonest-ending
// reservation c holds begins, forgetting reservations already over.
func (c *conn) nextMargin(now time.Time) (time.Time, bool) {
	var soonest time.Time
	for job, h := range c.held {
		if !now.Before(h.until) {
			delete(c.held, job) // timed out: the broker requeues it
			continue
		}
		if soonest.IsZero() || h.until.Before(soonest) {
			soonest = h.until
		}
	}
	if soonest.IsZero() {
		return time.Time{}, false
	}
	return soonest.Add(-safetyMargin), true
}

// deadlineSoon reports whether a reservation c holds is in its safety
// margin at now. It asks the broker whether the job is still reserved
// under the lease c holds (it may have been deleted over HTTP), and
// forgets those that are not.
func (c *conn) deadlineSoon(now time.Time) bool {
	for {
		margin, ok := c.nextMargin(now)
		if !ok || now.Before(margin) {
			return false
		}
		for job, h := range c.held {
			if h.until.Add(-safetyMargin).After(now) {
				continue
			}
			t, err := c.s.b.Job(job)
			if err == nil && t.State == task.Reserved && t.LeaseUntil.Equal(h.until) {
				return true
			}
			delete(c.held, job)
		}
	}
}

// watchHangup watches, while a reserve blocks, for the client closing its
// side of the connection, and calls cancel if it does. The returned stop
// ends the watch and reports whether it saw a hang-up; it must be called
// before c.r is used again. Bytes the client sends meanwhile (a pipelined
// command) stay buffered, and end the watch, since beanstalkd does not
// look at them either until the reserve is answered.
func (c *conn) watchHangup(cancel context.CancelFunc) (stop func() bool) {
	if c.r.Buffered() > 0 {
		return func() bool { return false }
	}
	done := make(chan struct{})
	hung := false
	go func() {
		defer close(done)
		if _, err := c.r.Peek(1); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			hung = true
			cancel()
		}
	}()
	return func() bool {
		c.nc.SetReadDeadline(time.Unix(1, 0)) // wakes the Peek
		<-done
		c.nc.SetReadDeadline(time.Time{})
		return hung
	}
}
