package worker

import (
	"context"
	"log/slog"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/client"
)

// acker batches acks: its goroutine takes the acks that are pending when
// it is free, waits for more until ackLinger after the first of them was
// queued unless most are already there, and sends them in one request
// (POST /v1/acks, one statement on a cluster node), so that a busy worker
// sends a request per round trip rather than per task, and acks that
// finish within ackLinger of each other share one. The linger never
// holds an ack past ackLinger after it was queued: an ack that waited
// that long behind the request in flight goes at once.
//
// Call add from any goroutine while run runs; close once no more acks
// will be added, and run returns after sending the last.
type acker struct {
	in chan pendingAck
	// most is how many acks one request carries at most.
	most int
	send func(context.Context, []api.Ack) ([]error, error) // client.AckMany
	log  *slog.Logger
	// fails counts the failures of the requests that are retried.
	fails *failureLog
	// stop is called with a request's error that no retry can cure
	// ([client.IsPermanent]).
	stop func(what string, err error)
	// base is the context of the requests, deadlines aside.
	base context.Context
	// giveUp, once closed, ends the retries of failed requests.
	giveUp <-chan struct{}
}

// minCall is the least time a call about a task (ack, nack, release,
// bury) is given, even when the lease's deadline is nearer or past: the
// deadline is the worker's reckoning (see [lease]), and only the server
// knows whether a first try is too late.
const minCall = time.Second

// latest returns the deadline of a call about a task whose lease surely
// holds until until.
func latest(until time.Time) time.Time {
	return later(until, time.Now().Add(minCall))
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// ackBacklog is how many acks of finished tasks the worker queues behind
// the ack request in flight (at least as many as it has handlers) before
// a handler that ends waits to queue its own: as many as one request
// may carry (api.MaxAcks).
// An ack is answered once the server's commit is durable (an fsync).
// Were the queue only as long as the handlers are many, one slow fsync
// would keep every handler's slot, and the worker would reserve nothing
// until it was over: every ready task, of any key, would wait that long
// (issue 42's small key under a big key's flood; TestWorker_SlowAck).
// An ack is some 100 bytes: the queue costs at most about 100 KB.
//
// A request carries at most ackBatch acks a handler (2 × Concurrency):
// the server handles a request's acks under one hold of its lock, which
// reserves and tasks falling due wait for, so a backlog goes out in
// requests of the size a busy worker sends anyway, not in one of
// api.MaxAcks.
const (
	ackBacklog = api.MaxAcks
	ackBatch   = 2
)

// ackLinger is the longest the acker holds a batch's first ack for more
// to join it. An ack is a statement and a durable commit on the server:
// with 64 handlers finishing at once, the acks that come within a
// millisecond share them, where without the linger a request carried
// those finished during the previous request's round trip. A handler
// does not wait for it: its slot is free once its ack is queued.
const ackLinger = time.Millisecond

// pendingAck is an ack, when its lease surely holds until (retrying a
// batch past the last of its leases is pointless), and when it was
// queued.
type pendingAck struct {
	ack    api.Ack
	until  time.Time
	queued time.Time
}

// newAcker returns an acker that sends through send, retrying until
// giveUp is closed, and calls stop with an error that no retry can cure;
// buffer is how many acks add can queue without blocking (ackBacklog, or
// the worker's concurrency if larger); most is how many acks a request
// carries at most (1 to api.MaxAcks).
func newAcker(base context.Context, giveUp <-chan struct{}, send func(context.Context, []api.Ack) ([]error, error), buffer, most int, fails *failureLog, stop func(string, error)) *acker {
	return &acker{in: make(chan pendingAck, buffer), most: min(max(most, 1), api.MaxAcks), send: send, log: fails.log, fails: fails, stop: stop, base: base, giveUp: giveUp}
}

// add queues an ack. It blocks while the buffer is full: while a request
// (or its retries) takes longer than the handlers need to fill it.
func (a *acker) add(ack api.Ack, until time.Time) { a.in <- pendingAck{ack, until, time.Now()} }

// close tells run that no more acks will come.
func (a *acker) close() { close(a.in) }

// run sends the acks as they come until close, then returns.
func (a *acker) run() {
	batch := make([]pendingAck, 0, a.most)
	linger := time.NewTimer(ackLinger)
	linger.Stop()
	defer linger.Stop()
	for first := range a.in {
		batch = append(batch[:0], first)
		open := true
		// The acks already queued join at once; then those that come
		// until ackLinger after the first was queued, until the batch is
		// full.
		lingering := false
	more:
		for len(batch) < a.most {
			var p pendingAck
			var ok bool
			select {
			case p, ok = <-a.in:
			default:
				if !lingering {
					left := ackLinger - time.Since(first.queued)
					if left <= 0 {
						break more
					}
					lingering = true
					linger.Reset(left)
				}
				select {
				case p, ok = <-a.in:
				case <-linger.C:
					lingering = false
					break more
				}
			}
			if !ok {
				open = false
				break more
			}
			batch = append(batch, p)
		}
		// Since Go 1.23 a stopped timer delivers no stale value.
		linger.Stop()
		a.flush(batch)
		if !open {
			return
		}
	}
}

// flush sends batch, retrying a transient failure until the last of its
// leases runs out or giveUp is closed, and logs the acks that failed.
func (a *acker) flush(batch []pendingAck) {
	acks := make([]api.Ack, len(batch))
	until := batch[0].until
	for i, p := range batch {
		acks[i] = p.ack
		until = later(until, p.until)
	}
	ctx, cancel := context.WithDeadline(a.base, latest(until))
	defer cancel()
	var errs []error
	err := retryCall(ctx, a.giveUp, a.fails, "ack", func(ctx context.Context) error {
		var err error
		errs, err = a.send(ctx, acks)
		return err
	}, "tasks", len(acks))
	if err != nil {
		a.log.Error("ack failed; the tasks come back when their leases expire", "tasks", len(acks), "error", err)
		if client.IsPermanent(err) {
			a.stop("ack", err)
		}
		return
	}
	for i, err := range errs {
		if err != nil {
			a.log.Error("ack failed", "queue", acks[i].Queue, "id", acks[i].ID, "error", err)
		}
	}
}
