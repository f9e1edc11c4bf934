package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/client"
)

// Options configure a [Worker]. Zero fields take the defaults named on
// each.
type Options struct {
	// Concurrency is how many handlers run at once; default 1.
	Concurrency int
	// Prefetch is how many tasks the worker reserves beyond its free
	// handlers, so that a handler that ends finds its next task at hand
	// rather than waiting a reserve's round trip; the worker holds at
	// most Concurrency + Prefetch tasks (and the acks of those handled,
	// on their way: see ackBacklog). A task that no handler has
	// started by half its ttr is released (its attempt not counted), so
	// that the worker never holds a task it cannot start before its
	// lease runs out. Default none: the worker reserves for its free
	// handlers. In `hourglass-bench --scenario worker` (64 handlers that
	// return at once) a prefetch gained less than the runs' spread
	// (docs/results/2026-12-05-85b6bbc-worker-prefetch-ab.md,
	// docs/results/2026-11-27-worker-throughput.md).
	Prefetch int
	// ShutdownTimeout is how long Run waits, once its context is done,
	// for running handlers to return before it cancels their contexts;
	// default 30 s.
	ShutdownTimeout time.Duration
	// Logger receives the worker's warnings and errors (failed calls,
	// lost leases, panics); default slog.Default().
	Logger *slog.Logger
}

// Defaults of [Options].
const (
	DefaultShutdownTimeout = 30 * time.Second
	// reserveWait is how long one reserve waits for tasks. The wait ends
	// when Run's context is done, so it bounds only how often an idle
	// worker asks.
	reserveWait = 5 * time.Second
)

// Worker takes tasks of the queues it handles from a server and runs a
// [Handler] for each: [New] one, [Worker.Handle] its queues, then
// [Worker.Run] it. Handle and Run are safe to call from any goroutine.
type Worker struct {
	c    *client.Client
	opts Options
	log  *slog.Logger

	mu sync.Mutex
	// handlers by queue. Guarded by mu until Run starts; read-only after.
	handlers map[string]Handler
	// ran is set when Run is called. Guarded by mu.
	ran bool
}

// New returns a worker that takes tasks from the server of c.
func New(c *client.Client, opts Options) *Worker {
	if c == nil {
		panic("hourglass: worker.New with a nil client")
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 1
	}
	opts.Prefetch = max(opts.Prefetch, 0)
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = DefaultShutdownTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Worker{c: c, opts: opts, log: opts.Logger, handlers: map[string]Handler{}}
}

// Handle makes h the handler of queue's tasks. It panics when queue is
// empty or already handled, h is nil, the worker would handle more than
// [api.MaxReserveQueues] queues, or Run has been called: all mistakes of
// the program's setup, as with http.ServeMux.Handle.
func (w *Worker) Handle(queue string, h Handler) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.ran:
		panic("hourglass: worker: Handle called after Run")
	case queue == "":
		panic("hourglass: worker: Handle with an empty queue name")
	case h == nil:
		panic("hourglass: worker: Handle of queue " + queue + " with a nil handler")
	case w.handlers[queue] != nil:
		panic("hourglass: worker: queue " + queue + " handled twice")
	case len(w.handlers) == api.MaxReserveQueues:
		panic(fmt.Sprintf("hourglass: worker: more than %d queues", api.MaxReserveQueues))
	}
	w.handlers[queue] = h
}

// Run takes and works tasks until ctx is done, then shuts down and
// returns nil. It reserves only as many tasks as it has free handlers
// and Options.Prefetch more, with one long poll at a time over all its
// queues; it renews each running task's
// lease, and acks (in batches), nacks or buries the task as its handler's
// result says (see [Handler]). Calls that fail for a transient reason
// ([client.IsTransient]: the server's 503, a refused connection, no
// answer within the client's deadline) are retried with back-off, and
// logged about once a second for each kind of call with the count of
// failures since the previous line.
//
// Shutting down, Run stops reserving at once (a reserve in flight is
// cancelled: the server gives back what it was taking for it, and tasks
// whose answer was already on its way come back when their leases
// expire, or are released if the answer arrives), waits up to
// ShutdownTimeout for the running handlers, then
// cancels their contexts and waits for them to return: a handler that
// ignores its context holds Run up. The tasks of handlers cancelled so
// that did not return nil are released, their attempts not counted;
// pending acks are sent. Failed calls are retried only while
// ShutdownTimeout, counted from ctx's end, is not over; after it each is
// tried once. No goroutine of Run outlives it.
//
// Run returns an error at once when called a second time or without
// handlers. It shuts down as above, and then returns an error wrapping
// the call's, when a call fails in a way no retry can cure: any call
// whose error is [client.IsPermanent] (a 401 or 403, a server
// certificate the client does not trust), or a reserve the server
// refuses (400, 404: a bad queue name, an older server).
func (w *Worker) Run(ctx context.Context) error {
	w.mu.Lock()
	if w.ran {
		w.mu.Unlock()
		return errors.New("hourglass: worker: Run called twice")
	}
	if len(w.handlers) == 0 {
		w.mu.Unlock()
		return errors.New("hourglass: worker: Run without handlers")
	}
	w.ran = true
	handlers := w.handlers
	w.mu.Unlock()
	queues := make([]string, 0, len(handlers))
	for q := range handlers {
		queues = append(queues, q)
	}
	slices.Sort(queues)

	// bg carries ctx's values without its end: what outlives ctx (the
	// handlers, their leases, acks) runs under it.
	bg := context.WithoutCancel(ctx)
	hctx, stop := context.WithCancelCause(bg)
	defer stop(nil)
	// rctx is ctx, also ended when a call fails for good.
	rctx, stopReserving := context.WithCancel(ctx)
	defer stopReserving()
	giveUp := make(chan struct{})
	fails := newFailureLog(w.log)
	r := &run{
		w:             w,
		handlers:      handlers,
		queues:        queues,
		bg:            bg,
		hctx:          hctx,
		giveUp:        giveUp,
		slots:         make(chan struct{}, w.opts.Concurrency+w.opts.Prefetch),
		running:       make(chan struct{}, w.opts.Concurrency),
		fails:         fails,
		stopReserving: stopReserving,
	}
	r.acks = newAcker(bg, giveUp, w.c.AckMany, max(w.opts.Concurrency, ackBacklog), ackBatch*w.opts.Concurrency, fails, r.stop)
	for range w.opts.Concurrency + w.opts.Prefetch {
		r.slots <- struct{}{}
	}
	ackerDone := make(chan struct{})
	go func() {
		defer close(ackerDone)
		r.acks.run()
	}()
	r.cancels = newCancels(w.c.CancelledLeases, fails, w.log)
	cctx, stopCancels := context.WithCancel(bg)
	cancelsDone := make(chan struct{})
	go func() {
		defer close(cancelsDone)
		r.cancels.run(cctx)
	}()
	defer func() {
		stopCancels()
		<-cancelsDone
	}()

	r.reserve(rctx)

	// The shutdown: the handlers, then the acker, get ShutdownTimeout
	// together. When it is over, the handlers are cancelled and failed
	// calls are no longer retried.
	handlersDone := make(chan struct{})
	go func() {
		defer close(handlersDone)
		r.tasks.Wait()
	}()
	over := time.NewTimer(w.opts.ShutdownTimeout)
	defer over.Stop()
	select {
	case <-handlersDone:
	case <-over.C:
		w.log.Warn("handlers outlived the shutdown timeout; cancelling them", "timeout", w.opts.ShutdownTimeout)
		close(giveUp)
		stop(ErrShutdown)
		r.cancels.stopAll(ErrShutdown)
		<-handlersDone
	}
	r.acks.close()
	select {
	case <-ackerDone:
	case <-over.C:
		close(giveUp)
		<-ackerDone
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopped
}

// run is the state of one [Worker.Run].
type run struct {
	w        *Worker
	handlers map[string]Handler // read-only
	queues   []string           // sorted
	// bg is Run's context without its end; hctx is bg until the shutdown
	// timeout cancels it with ErrShutdown: the handlers' contexts derive
	// from it.
	bg, hctx context.Context
	// giveUp is closed when the shutdown's time is over: failed calls
	// are no longer retried.
	giveUp chan struct{}
	// slots holds a token per task the worker may take (Concurrency +
	// Prefetch): a task takes one before it is reserved and gives it
	// back when its handler is done and its result sent (or queued, for
	// an ack), or when it is released unstarted.
	slots chan struct{}
	// running holds a token per running handler, at most Concurrency: a
	// task puts one in before its handler starts and takes it out when
	// the handler returns.
	running chan struct{}
	tasks   sync.WaitGroup // the tasks' goroutines
	acks    *acker
	fails   *failureLog
	// cancels tells the handlers of cancelled tasks (cancels.go).
	cancels *cancels
	// stopReserving ends the reserve loop's context: Run shuts down.
	stopReserving context.CancelFunc

	mu sync.Mutex
	// stopped is the error of the first call that failed for good (a
	// *stopError), which Run returns. Guarded by mu.
	stopped error
}

// stop makes Run shut down and return an error wrapping err, the error of
// the call what that no retry can cure; only the first such error is
// kept and logged.
func (r *run) stop(what string, err error) {
	r.mu.Lock()
	first := r.stopped == nil
	if first {
		r.stopped = &stopError{what: what, err: err}
	}
	r.mu.Unlock()
	if first {
		r.w.log.Error(what+" failed for good; stopping", "queues", r.queues, "error", err)
		r.stopReserving()
	}
}

// work runs t's handler, once one is free, with its lease kept alive,
// sends its result and gives its slot back. A task reserved after ctx
// was done, of a queue without a handler, or that found no free handler
// before half its ttr was over (see [run.handlerFor]), is released
// without running.
func (r *run) work(ctx context.Context, t *api.Task, received time.Time) {
	defer r.tasks.Done()
	defer func() { r.slots <- struct{}{} }()
	l := newLease(t, received)
	// The handler's context is a child of the run's background, not of
	// r.hctx: a child of a context that can be cancelled registers with
	// it, an entry of its map under its lock, for every task of every
	// reserve. The shutdown that cancels r.hctx reaches the handlers
	// through the leases watched instead (cancels.stopAll), and a task
	// watched after it finds r.hctx done below.
	hctx, cancel := context.WithCancelCause(r.bg)
	defer cancel(nil)
	l.stop = cancel
	// The lease is watched from the reserve on, so that a task cancelled
	// while it waits for a handler (Options.Prefetch) never starts.
	r.cancels.watch(l)
	defer r.cancels.unwatch(l.token)
	if r.hctx.Err() != nil {
		cancel(context.Cause(r.hctx))
	}
	h := r.handlers[t.Queue]
	if h == nil || ctx.Err() != nil || !r.handlerFor(ctx, l) {
		if !l.isLost() {
			r.release(l)
		}
		return
	}
	defer func() { <-r.running }()
	if l.isLost() {
		return // cancelled before a handler was free
	}
	// The lease's keeper starts when its first touch is due: most
	// handlers are done before, and then none runs (a goroutine, its
	// stack grown and a timer per task less), nor is its context made.
	l.keeping.Add(1)
	keeper := time.AfterFunc(time.Until(l.until().Add(-l.ttr/2)), func() {
		defer l.keeping.Done()
		kctx, ok := l.startKeep(r.bg)
		if !ok {
			return
		}
		touch := func(ctx context.Context) error {
			_, err := r.w.c.Touch(ctx, l.queue, l.id, l.token)
			return err
		}
		l.keep(kctx, touch, r.fails, func(why error) {
			cancel(ErrLeaseLost)
			if client.IsPermanent(why) {
				r.stop("touch", why)
			}
		})
	})
	// halt stops keeping the lease, also when the handler calls
	// runtime.Goexit (the task then comes back when its lease expires):
	// once, on this goroutine (a call, then the deferred one).
	halted := false
	halt := func() {
		if halted {
			return
		}
		halted = true
		l.haltKeep()
		if !keeper.Stop() {
			l.keeping.Wait() // started
		}
	}
	defer halt()
	err := r.call(hctx, h, newTask(t))
	halt()

	switch bury, delay := outcome(err); {
	case l.isLost():
		// Its lease is gone: the task is deleted or cancelled, or with
		// another worker.
	case err == nil:
		r.acks.add(l.ack(), l.until())
	case r.hctx.Err() != nil:
		r.release(l)
	case bury:
		r.settle(l, "bury", func(ctx context.Context) error {
			_, err := r.w.c.Bury(ctx, l.queue, l.id, l.token, cut(err.Error()))
			return err
		})
	default:
		r.settle(l, "nack", func(ctx context.Context) error {
			_, err := r.w.c.Nack(ctx, l.queue, l.id, l.token, delay, cut(err.Error()))
			return err
		})
	}
}

// handlerFor waits for a free handler for the task of l, reserved
// ahead of one (Options.Prefetch), and reports whether it got one: not
// when ctx is done first, nor once half the lease's ttr has passed
// since the task was reserved (the first touch would be due; a task
// that waits so long had better go to a worker that is free).
func (r *run) handlerFor(ctx context.Context, l *lease) bool {
	select {
	case r.running <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(time.Until(l.until().Add(-l.ttr / 2)))
	defer t.Stop()
	select {
	case r.running <- struct{}{}:
		return true
	case <-ctx.Done():
	case <-t.C:
	}
	return false
}

// call runs h, turning a panic into an error with the panic's text and
// logging the panic's stack.
func (r *run) call(ctx context.Context, h Handler, t *Task) (err error) {
	defer func() {
		if p := recover(); p != nil {
			r.w.log.Error("handler panicked", "queue", t.Queue, "id", t.ID, "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return h(ctx, t)
}

// release gives the task of l back, its attempt not counted.
func (r *run) release(l *lease) {
	r.settle(l, "release", func(ctx context.Context) error {
		_, err := r.w.c.Release(ctx, l.queue, l.id, l.token, 0)
		return err
	})
}

// settle makes the call f about the task of l, retrying a transient
// failure while the lease holds (and the shutdown's time is not over),
// and logs its failure; one that no retry can cure stops Run.
func (r *run) settle(l *lease, what string, f func(context.Context) error) {
	ctx, cancel := context.WithDeadline(r.bg, latest(l.until()))
	defer cancel()
	if err := retryCall(ctx, r.giveUp, r.fails, what, f, "queue", l.queue, "id", l.id); err != nil {
		r.w.log.Error(what+" failed; the task comes back when its lease expires", "queue", l.queue, "id", l.id, "error", err)
		if client.IsPermanent(err) {
			r.stop(what, err)
		}
	}
}

// cut returns s cut to api.MaxError bytes, on a UTF-8 boundary.
func cut(s string) string {
	if len(s) <= api.MaxError {
		return s
	}
	i := api.MaxError
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}
