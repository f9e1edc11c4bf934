// Package pusher delivers the tasks of push queues (a queue whose policy
// has a task.Push endpoint): it POSTs each ready task to the endpoint
// and acknowledges, retries or fails it by the answer. It is written
// over service.Service only, so it runs the same on either engine, and
// every node of a cluster runs one: they share the work through the
// reserve. It is a role of its own beside package worker (the pulling
// side, over HTTP), not part of package service, which holds semantics
// and no goroutines; `hourglass serve` starts and stops it, and the
// receiving side is package push.
//
// # The loop
//
// A [Pusher] holds up to Options.Concurrency pushes at once (slots). Its
// refresher reads which queues are push queues from the policies
// (service.Service.Queues, every Options.Refresh and at once after a
// SetPolicy or DeletePolicy through [Pusher.Watch], or, on an engine that
// is a service.PolicyNotifier, after a policy changed anywhere). Its loop
// makes one long poll after another, ReserveQueues over the push queues
// last read for as many tasks as it has free slots, cut short when the
// refresher finds them changed. The slots are shared fairly between the
// queues and between the targets they push to (slots.go), so that an
// endpoint that never answers holds only its share: the reserve polls
// the queues below their shares, for no more than the tightest one's
// room, and is cut short when a queue it left out may push again. Each
// task it gets is handed to one of
// Options.Concurrency long-lived push goroutines, which frees its slot
// once the task is settled. (A goroutine per push would grow a fresh
// stack for the HTTP client's calls every time; BenchmarkPusher_Push_Ready
// measures it. A read of the push queues in the loop would hold back the
// pushes due meanwhile: see refreshLoop.) Taking tasks by
// reserving them is what makes the engine apply everything a worker's
// reserve has: never before the due time, not while the queue is paused,
// within its rate and concurrency limits.
//
// # Leases and at least once
//
// A task is pushed under the lease of its reserve, its ttr. When the
// ttr does not cover the push's timeout and a margin (leaseMargin), the
// pusher touches the lease every half ttr while the push runs, rather
// than reserve under a lease of another length, which no reserve of the
// service has. A process that dies mid-push leaves the task reserved;
// its lease runs out and it is pushed again (a lease that ran out is a
// failed attempt): delivery is at least once.
//
// # Outcomes
//
// See api.Push: a 2xx acks the task; a 429 or 503 with Retry-After nacks
// it with that delay (cut to Options.MaxDelay); anything else (another
// status, the timeout, an error of the connection) nacks it with
// task.RetryDelay, leaving the delay to the queue's retry policy. The
// last error says why. The ack or nack is made under service.WithPush,
// so that the engine records the attempt as pushed or push-failed with
// the HTTP status the push got (service.AttemptOutcome).
//
// # Cancelled tasks
//
// A push queue's task deleted or cancelled while it is pushed
// (service.Service.Cancel, DELETE) has its push aborted: the pusher
// watches the leases of its pushes under way (service.WatchCancels,
// which on a cluster hears of a cancel made on any node), and cancels
// the push's request when its lease ends so. The receiver sees its
// request's connection closed; the task is gone, so nothing is settled,
// and the push is counted as cancelled.
//
// # Shutting down
//
// [Pusher.Stop] stops reserving at once (a long poll in flight gives its
// tasks back), releases every task whose push has not begun (no attempt
// spent), lets the pushes under way finish until its context ends, then
// cancels them and releases their tasks, and returns once every
// goroutine it started has.
package pusher

import (
	"cmp"
	"context"
	"github.com/hourglass-go/hourglass/internal/retry"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// Defaults of [Options].
const (
	// DefaultConcurrency is how many pushes a process runs at once: a
	// queue alone may run half of them (slots.go), 64.
	DefaultConcurrency = 128
	// DefaultRefresh is how often the push queues are read again from
	// the policies.
	DefaultRefresh = time.Second
)

// Times of a push's bookkeeping.
const (
	// leaseMargin is what a task's ttr must exceed its push's timeout by
	// for its lease to need no touch: time to settle the push after its
	// answer, on a loaded machine or a far database.
	leaseMargin = 2 * time.Second
	// settleTimeout bounds an ack, nack or release of a pushed task.
	settleTimeout = 5 * time.Second
)

// Options configure a [Pusher].
type Options struct {
	// Targets are the hosts pushes may reach; nil: every host but the
	// cloud metadata endpoints.
	Targets *Targets
	// Concurrency bounds the pushes under way at once; 0:
	// DefaultConcurrency. A queue, and a target, hold at most a share of
	// them (slots.go): half of them alone.
	Concurrency int
	// Refresh is how often the push queues are read again; 0:
	// DefaultRefresh. A refresh reads every queue's counts
	// (service.Service.Queues).
	Refresh time.Duration
	// MaxDelay bounds a Retry-After's delay: the server's longest delay
	// of a put (hourglass serve --max-delay); 0: task.DefaultMaxDelay.
	MaxDelay time.Duration
	// Logger receives what goes wrong with the service (the pushes'
	// failures are their tasks' last errors); nil: slog.Default().
	Logger *slog.Logger
	// Registerer, when set, registers the pushes' metrics.
	Registerer prometheus.Registerer
}

// Pusher pushes the tasks of push queues. Start, Stop, Refresh and
// Watch are safe for concurrent use.
type Pusher struct {
	s        service.Service
	targets  *Targets
	client   *http.Client
	refresh  time.Duration
	maxDelay time.Duration
	log      *slog.Logger
	metrics  *metrics
	// touchFails and settleFails log the failures of the pushes' touches
	// and settles, shared by every push: in an outage, a line a second
	// with a count rather than one per push.
	touchFails, settleFails *retry.FailureLog

	// concurrency is Options.Concurrency, the number of push slots.
	concurrency int
	// work carries the tasks reserved to the push goroutines; run closes
	// it when it returns.
	work chan pushJob
	// stale is signalled by Refresh: read the policies again now.
	stale chan struct{}
	// queues are the push queues the refresher last read (nil before
	// its first read); changed is signalled when it stores others.
	queues  atomic.Pointer[pushQueues]
	changed chan struct{}

	// ctx ends when Stop is called: no more reserves, and a push not yet
	// begun releases its task. pushes ends when Stop's own context does:
	// the pushes under way are cancelled.
	ctx, pushes         context.Context
	stop                context.CancelFunc
	cancelPushes        context.CancelFunc
	startOnce, stopOnce sync.Once
	wg                  sync.WaitGroup // the loop, the refresher, the push goroutines and the lease keepers
	mu                  sync.Mutex
	cancelReserve       context.CancelFunc // the long poll under way, nil if none; guarded by mu
	// slots are the push slots (slots.go); guarded by mu. left are the
	// queues the long poll under way left out, polled the push queues
	// it polls; guarded by mu. freed is signalled when a push ends.
	slots  *slots
	left   []string
	polled *pushQueues
	freed  chan struct{}

	// aborts holds the pushes under way by lease: what aborts each, when
	// its task is cancelled (watchLease). Guarded by abortsMu.
	abortsMu sync.Mutex
	aborts   map[string]func()
	// unwatch ends the watch of cancels that Start began.
	unwatch func()
}

// New returns a Pusher of s's push queues, not yet started.
func New(s service.Service, o Options) *Pusher {
	p := &Pusher{
		s:        s,
		targets:  o.Targets,
		refresh:  cmp.Or(o.Refresh, DefaultRefresh),
		maxDelay: cmp.Or(o.MaxDelay, task.DefaultMaxDelay),
		log:      cmp.Or(o.Logger, slog.Default()),
		work:     make(chan pushJob, cmp.Or(o.Concurrency, DefaultConcurrency)),
		stale:    make(chan struct{}, 1),
		changed:  make(chan struct{}, 1),
		freed:    make(chan struct{}, 1),
		aborts:   map[string]func(){},
		unwatch:  func() {},
		metrics:  newMetrics(o.Registerer),
	}
	p.touchFails = retry.NewFailureLog(p.log, "hourglass: push: renewing pushed tasks' leases failed", "hourglass: push: renewing pushed tasks' leases works again")
	p.settleFails = retry.NewFailureLog(p.log, "hourglass: push: settling pushed tasks failed; their leases settle them", "hourglass: push: settling pushed tasks works again")
	p.concurrency = cap(p.work)
	p.slots = newSlots(p.concurrency)
	p.client = newClient(o.Targets, p.concurrency)
	if n, ok := s.(service.PolicyNotifier); ok {
		n.NotifyPolicies(func(string) { p.Refresh() })
	}
	p.ctx, p.stop = context.WithCancel(context.Background())
	p.pushes, p.cancelPushes = context.WithCancel(context.Background())
	return p
}

// Start starts pushing, once; it returns at once.
func (p *Pusher) Start() {
	p.startOnce.Do(func() {
		p.unwatch = p.s.WatchCancels(p.leaseEnded)
		for range p.concurrency {
			p.wg.Go(p.pushLoop)
		}
		p.wg.Add(2)
		go p.refreshLoop()
		go p.run()
	})
}

// Stop stops pushing: no more reserves, the tasks whose push has not
// begun released, the pushes under way let finish until ctx ends and
// then cancelled (their tasks released). It returns once every goroutine
// of p has, and ctx's error if it ended first. Calling it again waits
// for nothing and returns nil.
func (p *Pusher) Stop(ctx context.Context) error {
	var err error
	p.stopOnce.Do(func() {
		p.startOnce.Do(func() {}) // never start after Stop
		p.stop()
		done := make(chan struct{})
		go func() { p.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			err = ctx.Err()
			p.cancelPushes()
			<-done
		}
		p.cancelPushes()
		p.unwatch()
		p.client.CloseIdleConnections()
	})
	return err
}

// Refresh makes the pusher read the push queues again at once; a long
// poll under way is cut short if they changed. It does not block.
func (p *Pusher) Refresh() {
	select {
	case p.stale <- struct{}{}:
	default:
	}
}

// pushQueues are the push queues as one read found them: their names,
// sorted, their endpoints, and their targets (targetOf). A value is
// never changed once stored.
type pushQueues struct {
	names   []string
	ends    map[string]task.Push
	targets map[string]string
}

// target returns the target of queue q.
func (qs *pushQueues) target(q string) string { return qs.targets[q] }

// targetOf returns the target a push URL reaches, the unit the slots are
// shared by besides queues: its scheme, host (lower case) and port.
func targetOf(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return rawURL
	}
	port := u.Port()
	if port == "" {
		port = strconv.Itoa(int(defaultPort(u.Scheme)))
	}
	return strings.ToLower(u.Scheme) + "://" + net.JoinHostPort(canonicalHost(u.Hostname()), port)
}

// refreshLoop is the refresher: it reads the push queues every
// p.refresh, and at once after Refresh, until Stop, and hands run a set
// that changed, cutting its long poll short. It runs apart from run, so
// that a slow read (a cluster's Queues counts every task in the
// database, O(tasks) every 5 s) never holds back
// the reserves: the lateness of pushes due meanwhile.
//
// A failed read (a database gone) is tried again after p.refresh or a
// back-off, whichever is longer, and logged about once a second with a
// count; a Refresh still reads at once.
func (p *Pusher) refreshLoop() {
	defer p.wg.Done()
	backoff := retry.Backoff{Base: retry.DefaultBase, Max: retry.DefaultMax}
	failures := retry.NewFailureLog(p.log, "hourglass: push: reading the push queues failed", "hourglass: push: reading the push queues works again")
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-p.stale:
		case <-p.ctx.Done():
			return
		}
		qs, err := p.read()
		wait := p.refresh
		if err == nil {
			backoff.Reset()
			failures.OK()
		}
		switch {
		case err != nil:
			if p.ctx.Err() == nil {
				wait = max(wait, backoff.Next())
				failures.Failed(err, "retry_in", wait)
			}
		case !reflect.DeepEqual(qs, p.queues.Load()):
			p.queues.Store(qs)
			select {
			case p.changed <- struct{}{}:
			default:
			}
			p.mu.Lock()
			if p.cancelReserve != nil {
				p.cancelReserve()
			}
			p.mu.Unlock()
		}
		t.Reset(wait)
	}
}

// run is the loop: reserve from the push queues the refresher last read,
// for the free slots, and hand each task to a push goroutine, until Stop.
func (p *Pusher) run() {
	defer p.wg.Done()
	defer close(p.work)
	// A failed reserve (a database gone, the store failed) is retried
	// after a back-off, and logged about once a second.
	backoff := retry.Backoff{Base: retry.DefaultBase, Max: retry.DefaultMax}
	failures := retry.NewFailureLog(p.log, "hourglass: push: reserving failed", "hourglass: push: reserving works again")
	for p.ctx.Err() == nil {
		qs := p.queues.Load()
		if qs == nil || len(qs.names) == 0 {
			select {
			case <-p.changed:
			case <-p.ctx.Done():
			}
			continue
		}
		rctx, cancel := context.WithCancel(p.ctx)
		p.mu.Lock()
		names, n, left := p.slots.plan(qs.names, qs.target)
		if n > 0 {
			p.cancelReserve, p.left, p.polled = cancel, left, qs
		}
		p.mu.Unlock()
		if n == 0 {
			cancel()
			select {
			case <-p.freed:
			case <-p.changed:
			case <-p.ctx.Done():
			}
			continue
		}
		if p.queues.Load() != qs {
			cancel() // changed before the refresher could see this poll
		}
		tasks, err := p.s.ReserveQueues(rctx, names, min(n, task.MaxReserve), task.MaxWait)
		p.mu.Lock()
		p.cancelReserve, p.left, p.polled = nil, nil, nil
		p.slots.unused(n - len(tasks))
		for _, t := range tasks {
			p.slots.started(t.Queue, qs.target(t.Queue))
		}
		p.mu.Unlock()
		cutShort := rctx.Err() != nil
		cancel()
		for _, t := range tasks {
			p.work <- pushJob{t, qs.ends[t.Queue], qs.target(t.Queue)}
		}
		switch {
		case err == nil || cutShort:
			backoff.Reset()
			failures.OK()
		default:
			d := backoff.Next()
			failures.Failed(err, "retry_in", d)
			p.sleep(d)
		}
	}
}

// read returns the push queues.
func (p *Pusher) read() (*pushQueues, error) {
	ctx, cancel := context.WithTimeout(p.ctx, max(p.refresh, 5*time.Second))
	defer cancel()
	qs, err := p.s.Queues(ctx)
	if err != nil {
		return nil, err
	}
	out := &pushQueues{ends: map[string]task.Push{}, targets: map[string]string{}}
	for _, q := range qs {
		if q.Policy.Push != nil {
			out.names = append(out.names, q.Name)
			out.ends[q.Name] = *q.Policy.Push
			out.targets[q.Name] = targetOf(q.Policy.Push.URL)
		}
	}
	slices.Sort(out.names)
	return out, nil
}

// sleep waits d, or until Stop.
func (p *Pusher) sleep(d time.Duration) {
	t := time.NewTimer(max(d, 0))
	defer t.Stop()
	select {
	case <-t.C:
	case <-p.ctx.Done():
	}
}

// done ends a push of queue q to target: it frees its slot, and cuts
// the long poll under way short if it left out a queue that may now
// start pushes.
func (p *Pusher) done(q, target string) {
	p.mu.Lock()
	p.slots.done(q, target)
	if p.cancelReserve != nil && len(p.left) > 0 && p.slots.eligibleLeftOut(p.left, p.polled.target) {
		p.cancelReserve()
	}
	p.mu.Unlock()
	select {
	case p.freed <- struct{}{}:
	default:
	}
}

// Watch returns s with its SetPolicy and DeletePolicy calling
// [Pusher.Refresh] once they succeed, so that a queue made a push queue
// through this process is pushed at once rather than at the next
// refresh. The other methods are s's.
func (p *Pusher) Watch(s service.Service) service.Service { return watched{s, p} }

// watched is a Service whose policy changes refresh a Pusher.
type watched struct {
	service.Service
	p *Pusher
}

// SetPolicy is service.Service's, and refreshes the pusher.
func (w watched) SetPolicy(ctx context.Context, queue string, pol task.Policy) (task.Policy, error) {
	got, err := w.Service.SetPolicy(ctx, queue, pol)
	if err == nil {
		w.p.Refresh()
	}
	return got, err
}

// DeletePolicy is service.Service's, and refreshes the pusher.
func (w watched) DeletePolicy(ctx context.Context, queue string) error {
	err := w.Service.DeletePolicy(ctx, queue)
	if err == nil {
		w.p.Refresh()
	}
	return err
}

// watchLease has abort called if lease ends by a cancel or a delete of
// its task, until the returned unwatch is called. O(1).
func (p *Pusher) watchLease(lease string, abort func()) (unwatch func()) {
	p.abortsMu.Lock()
	p.aborts[lease] = abort
	p.abortsMu.Unlock()
	return func() {
		p.abortsMu.Lock()
		delete(p.aborts, lease)
		p.abortsMu.Unlock()
	}
}

// leaseEnded aborts the push under lease, if one is under way: the
// service's WatchCancels calls it. It does not block.
func (p *Pusher) leaseEnded(lease string) {
	p.abortsMu.Lock()
	abort := p.aborts[lease]
	delete(p.aborts, lease)
	p.abortsMu.Unlock()
	if abort != nil {
		abort()
	}
}
