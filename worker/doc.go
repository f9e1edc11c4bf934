// Package worker runs Go functions on the tasks of an hourglass server,
// as asynq's ServeMux or river's Workers do for theirs:
//
//	c, err := client.New("http://127.0.0.1:7070", client.Options{Token: token})
//	if err != nil {
//		return err
//	}
//	w := worker.New(c, worker.Options{Concurrency: 16})
//	w.Handle("emails", func(ctx context.Context, t *worker.Task) error {
//		return send(ctx, t.Payload)
//	})
//	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
//	defer stop()
//	return w.Run(ctx) // until SIGINT or SIGTERM, then drains
//
// A [Worker] reserves tasks only for its free handlers (and
// [Options.Prefetch] more, a task not started by half its ttr being
// released), with one long poll (POST /v1/reserve) at a time over all
// its queues, and runs each task's [Handler] in its own goroutine. Once
// a handler is free, the reserve waits up to a millisecond for the
// others still running to end, and goes at once when all have, so that
// handlers ending together share one reserve.
// While a handler runs, the worker touches the task's lease halfway
// through each ttr, so a handler may run past its task's ttr; when the
// lease is lost (the task was deleted, or the server could not be
// reached before the lease ran out), the handler's context is cancelled
// with [ErrLeaseLost]. A task cancelled on the server (POST
// .../cancel, or DELETE) while its handler runs has the handler's
// context cancelled with [ErrCancelled] within about a second: while it
// holds tasks, the worker asks once a second, in one request for all of
// them (POST /v1/leases:cancelled), which were cancelled; an idle worker
// asks nothing (cancels.go).
//
// The handler's result decides what becomes of the task:
//
//   - nil: acked. Acks are sent in batches (POST /v1/acks): whatever is
//     pending when the previous batch is answered, and those that end
//     within a millisecond of the first of a batch; no ack waits more
//     than a millisecond for others.
//   - an error: nacked with the error's text as the task's last error;
//     the queue's retry policy says when it is ready again (at once
//     without one), and whether it is dead once its attempts are used
//     up.
//   - [RetryAfter](d, err): nacked, ready again after d.
//   - [Fail](err): buried: dead at once, or moved to the queue's
//     dead-letter queue.
//   - a panic: nacked with the panic's text; its stack is logged and the
//     worker keeps running.
//
// Every call has the client's deadline ([client.Options.Timeout],
// default 30 s; for a reserve, its wait of 5 s plus that), so a server
// that stops answering without closing its connections (a machine gone,
// a firewall dropping everything) holds a call no longer than that.
// Calls that fail for a transient reason ([client.IsTransient]: the
// server's 503 while it recovers or stops, a refused connection, no
// answer by the deadline) are retried with capped, jittered back-off
// (100 ms doubling up to 10 s, each wait ±20 % at random: the project's
// one rule, internal/retry), and logged about once a second for each
// kind of call with the count of failures since the previous line, and
// once when that kind of call works again. A task whose result could not be sent comes back
// when its lease expires, as if its worker had died: handlers should be
// idempotent, since delivery is at least once.
//
// When Run's context is done, the worker stops reserving, waits up to
// [Options.ShutdownTimeout] for its handlers, cancels the contexts of
// those still running ([ErrShutdown]) and releases their tasks without
// counting the attempt, sends the pending acks, and returns nil.
//
// Run also shuts down so, and then returns the error, when a call fails
// in a way that no waiting cures: a 401 (a wrong token) or 403, a server
// certificate the client does not trust, https to a server that does not
// speak it ([client.IsPermanent]), or a reserve the server refuses (400,
// 404). The error reads "hourglass: worker stopped: ..." and errors.Is
// matches it against the client's sentinel ([client.ErrUnauthorized]...).
// A URL that no call could reach fails earlier, in [client.New].
package worker
