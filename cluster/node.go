package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/hourglass-go/hourglass/internal/retry"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hourglass-go/hourglass"
	"github.com/hourglass-go/hourglass/internal/schedrun"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// Options configure a [Node]. Zero fields take the defaults named on each.
type Options struct {
	// Node names this node among the cluster's; unique while it runs.
	// Default: host name and process id.
	Node string
	// Lease is how long a partition lease (and a node's heartbeat) lasts
	// without renewal: a dead node's partitions are taken over within
	// about one Lease. Default 5 s; renewed every Lease/3.
	Lease time.Duration
	// Window is how far ahead an owner holds its partitions' timers in
	// its wheel; the next window is loaded when half of this one is left.
	// Default 1 min.
	Window time.Duration
	// DBTimeout bounds every call to the database: a statement (and the
	// wait for a connection before it) not answered within it, or within
	// what is left of its caller's deadline if that is sooner, fails as
	// unreachable (task.ErrClosed, a 503). Default DefaultDBTimeout.
	DBTimeout time.Duration

	// The limits of package broker, with its defaults.
	MaxDelay   time.Duration
	MaxPayload int
	DefaultTTR time.Duration
	// MaxSchedules bounds how many schedules the cluster keeps, as
	// broker.Config's; 0: task.DefaultMaxSchedules.
	MaxSchedules int

	// History is how long the history (history.go: every attempt of a
	// task, the tasks that left their queues) is kept after a task left
	// its queue; 0: task.DefaultHistory. A negative History keeps none:
	// nothing is written, and what an earlier run wrote is pruned.
	History time.Duration

	// Logger receives the node's logs; default slog.Default().
	Logger *slog.Logger
	// Registerer receives the node's Prometheus metrics (metrics.go);
	// nil: none. Close unregisters them.
	Registerer prometheus.Registerer

	// hooks are for tests (export_test.go).
	hooks *hooks
}

// Defaults of Options.
const (
	DefaultLease  = 5 * time.Second
	DefaultWindow = time.Minute
)

// hooks let tests stand in for a paused process or a wrong clock.
type hooks struct {
	// skew is added to the measured offset of the database's clock: the
	// node believes the database's clock is skew ahead of what it is.
	skew atomic.Int64
	// paused stops the lease loop and the flusher (a SIGSTOPped process).
	paused atomic.Bool
	// handing, if set, runs in the flush between the commit of tasks
	// reserved for waiters and their hand-over.
	handing atomic.Pointer[func()]
	// flushing, if set, runs in a flush after it read the epochs of the
	// partitions it writes and before its statement.
	flushing atomic.Pointer[func()]
	// rounding, if set, runs in a lease round after the leases were
	// renewed, with the round's context (a slow database).
	rounding atomic.Pointer[func(context.Context)]
	// beating, if set, runs in a lease round right after its heartbeat
	// and renewal (one statement) returned: a process killed there.
	beating atomic.Pointer[func()]
	// emptyFor, if not zero, stands for emptyFor (wait.go).
	emptyFor atomic.Int64
}

// ErrNameInUse is returned by [Open] when a live node already runs under
// the name asked for.
var ErrNameInUse = errors.New("hourglass: node name in use by a live node")

// Node is one hourglass node of a cluster on a PostgreSQL database: a
// [service.Engine] (service.New makes it the Service) with the same
// semantics and errors as the embedded engine; any node answers any
// request. Node is safe for concurrent use by multiple goroutines.
type Node struct {
	db         *pool   // every call bounded by opts.DBTimeout (pool.go)
	spares     *spares // keeps idle connections ready (pool.go); nil until Open's end
	opts       Options
	log        *slog.Logger
	name       string
	instance   string
	partitions int // fixed by the schema (hourglass_meta)

	clock  clock
	cron   *hourglass.Timer // owned schedules' next occurrences
	runner *schedrun.Runner // fires the owned schedules (schedule.go)
	// members holds the node's heartbeat and partition leases and runs
	// the lease loop (leases.go); its own lock.
	members *membership
	// timers holds the owned partitions' timers and runs the flusher
	// (timers.go); its own lock.
	timers *timers
	// notifications listens and notifies (notifications.go); its own
	// lock.
	notifications *notifications
	ids           idBlock
	metrics       *metrics
	acks          group[ackReq] // acks arriving together, one statement
	// giveBacks gives back what reserves whose answer was lost may have
	// leased (giveback.go); its own lock.
	giveBacks *giveBacks
	counters  counters // what this node served (report.go); its own lock

	// mu guards the fields below that say so: what stays on the node
	// beside its roles. Lock order: mu, then the membership's lock (a
	// leaf); no other role's lock is taken under mu, and mu is not taken
	// under any other role's lock.
	mu sync.Mutex
	// queues holds the reservers waiting on this node, by queue. Guarded
	// by mu.
	queues map[string]*queueWait
	// capped holds the queues with a concurrency limit: a hint for waking
	// their reservers (policy.go). The map is never changed once stored:
	// a change stores a copy (under mu), so that an ack reads it without
	// a lock.
	capped atomic.Pointer[map[string]bool]
	// recap asks the lease loop to load capped again (after the listen
	// connection was lost). Guarded by mu.
	recap bool
	// watchers are told of policies changed (NotifyPolicies): appended
	// to, never changed in place. Guarded by mu.
	watchers []func(queue string)
	// leaseEnds are told of leases ended by deletes (NotifyLeaseEnds):
	// appended to, never changed in place. Guarded by mu.
	leaseEnds []func(lease string)
	// reporter writes the node's report (report.go).
	reporter *reporter
	// pruners prune the history, the finished-id records of dedupe
	// windows and the turns of idle keys (startPruners, prune.go).
	pruners []*retry.Pruner
	// closed by Close; failed by a fatal error. Guarded by mu.
	closed bool
	failed error

	// stopOnce makes stop idempotent.
	stopOnce sync.Once
}

// Open joins the cluster on db: it migrates the schema, registers the
// node, takes its share of the partitions, loads their timers and starts
// serving; it warms the pool's first connections (warm.go) before it
// returns. A node restarted under its old name waits for the old
// heartbeat to run out (at most one Lease). The caller keeps db and
// closes it after [Node.Close]; db's configuration should have been
// passed through [ConfigurePool] (Open logs a warning otherwise).
func Open(ctx context.Context, db *pgxpool.Pool, opts Options) (*Node, error) {
	if opts.Lease <= 0 {
		opts.Lease = DefaultLease
	}
	if opts.Window <= 0 {
		opts.Window = DefaultWindow
	}
	if opts.DBTimeout <= 0 {
		opts.DBTimeout = DefaultDBTimeout
	}
	lim := service.Limits{MaxDelay: opts.MaxDelay, MaxPayload: opts.MaxPayload, DefaultTTR: opts.DefaultTTR}.WithDefaults()
	opts.MaxDelay, opts.MaxPayload, opts.DefaultTTR = lim.MaxDelay, lim.MaxPayload, lim.DefaultTTR
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.hooks == nil {
		opts.hooks = &hooks{}
	}
	if opts.Node == "" {
		host, _ := os.Hostname()
		opts.Node = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if _, _, err := Migrate(ctx, db); err != nil {
		return nil, err
	}
	var tok [8]byte
	rand.Read(tok[:])
	n := &Node{
		db:       &pool{raw: db, timeout: opts.DBTimeout},
		opts:     opts,
		log:      opts.Logger.With("node", opts.Node),
		name:     opts.Node,
		instance: hex.EncodeToString(tok[:]),
		queues:   make(map[string]*queueWait),
		ids:      idBlock{turn: make(chan struct{}, 1)},
	}
	n.clock.skew = &opts.hooks.skew
	n.capped.Store(&map[string]bool{})
	if !configured(db) {
		n.log.Warn("hourglass: the pool was not set up with cluster.ConfigurePool: PostgreSQL plans the node's statements afresh at every execution")
	}
	// The pool's first connections warm before the node's first request
	// (warm.go): Open returns, and serve says ready, after them.
	n.warmPool(ctx, db)
	n.metrics = newMetrics(n)
	n.giveBacks = newGiveBacks(n)
	n.acks.run = n.runAcks
	if err := n.db.QueryRow(ctx, "SELECT partitions FROM hourglass_meta").Scan(&n.partitions); err != nil {
		return nil, dbErr(err)
	}
	if err := n.clock.measure(ctx, n.db); err != nil {
		return nil, dbErr(err)
	}
	n.members = newMembership(n.db, n.name, n.instance, n.partitions, opts.Lease, &n.clock, n.log, n.metrics,
		&opts.hooks.paused, memberHandlers{
			acquired: n.acquired,
			dropped:  n.dropped,
			round:    n.round,
			failed:   n.fail,
			released: func() { n.notifications.send(chanMembers, "release "+n.name) },
			beaten: func() {
				if f := opts.hooks.beating.Load(); f != nil {
					(*f)()
				}
			},
		})
	if err := n.members.register(ctx); err != nil {
		return nil, err
	}
	n.timers = newTimers(n, n)
	n.cron = hourglass.New(hourglass.WithShards(1))
	n.runner = schedrun.New(schedrun.Config{Timer: n.cron, Now: func() time.Time { return time.Unix(0, n.clock.now()) },
		Occur: n.occur, Settle: n.settleSchedule, Metrics: n.metrics.schedules, Log: n.log})
	n.notifications = newNotifications(n.db, n.name, n.log, noteHandlers{
		tick:   n.kickTick,
		policy: n.policyNotified,
		timers: n.timers.notified,
		wake:   n.wakeNotified,
		lease:  n.leaseEnded,
		resync: n.resync,
		hop:    n.metrics.hopNotified,
	})
	if err := n.notifications.start(ctx, chanMembers, chanSchedules, chanPolicies); err != nil {
		n.timers.stop()
		n.cron.Stop()
		return nil, err
	}
	if err := n.loadCapped(ctx); err != nil {
		n.stop()
		return nil, dbErr(err)
	}
	if err := n.members.awaitPreviousLeases(ctx); err != nil {
		n.stop()
		return nil, err
	}
	if err := n.members.tick(ctx); err != nil {
		n.stop()
		return nil, err
	}
	// The tasks of the partitions just taken that fell due while no node
	// owned them are made ready before Open returns, as the embedded
	// engine's recovery does: a node is ready when its due tasks are.
	overdue, owned := n.timers.pending(), n.members.count()
	if err := n.timers.flush(); err != nil {
		n.log.Warn("hourglass: flushing overdue timers failed; the sweep retries them", "err", err)
	}
	n.log.Info("hourglass: recovered", "partitions", owned, "overdue", overdue)
	if opts.Registerer != nil {
		if err := n.metrics.Register(opts.Registerer); err != nil {
			n.stop()
			n.members.release(ctx)
			return nil, fmt.Errorf("hourglass: registering metrics: %w", err)
		}
	}
	n.notifications.send(chanMembers, "join "+n.name)
	n.members.start()
	n.timers.start()
	n.reporter = &reporter{db: n.db, node: n.name, started: n.clock.now(), source: n.counters.report, log: n.log}
	n.reporter.start()
	retention, _ := opts.retention()
	n.startPruners(retention)
	n.spares = n.db.startSpares(n.log)
	return n, nil
}

// Name returns the node's name.
func (n *Node) Name() string { return n.name }

// Partitions returns the number of partitions, fixed by the schema.
func (n *Node) Partitions() int { return n.partitions }

// Close leaves the cluster: waiting reservers return, the node releases
// its partitions and its heartbeat (so that the others take them over at
// once rather than after a lease) and its goroutines have exited when it
// returns. It does not close the pool. Close is idempotent.
func (n *Node) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	for _, q := range n.queues {
		q.WakeAll()
	}
	n.mu.Unlock()
	n.stop()
	n.metrics.Unregister()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := n.members.release(ctx)
	if err == nil {
		_, err = n.db.Exec(ctx, `SELECT pg_notify($1, $2)`, chanMembers, "leave "+n.name)
	}
	if err != nil {
		return dbErr(err)
	}
	return nil
}

// stop ends the node's goroutines and timers without touching the
// database: the lease loop and the flusher first, together (each ends
// its round or flush in progress), then the reporter, the pruners, the
// wheels, and the notifications last, which send what is pending. It is
// idempotent.
func (n *Node) stop() {
	n.stopOnce.Do(func() {
		var loops sync.WaitGroup
		loops.Go(n.members.stop)
		n.timers.stop()
		loops.Wait()
		if n.reporter != nil {
			n.reporter.stop()
		}
		for _, p := range n.pruners {
			p.Stop()
		}
		n.runner.Stop()
		n.cron.Stop()
		n.giveBacks.close()
		if n.spares != nil {
			n.spares.stop()
		}
		n.notifications.stop()
	})
}

// acquired follows the acquisition of parts (the membership's handler):
// the node listens to their channels, then loads their timers, in that
// order, so that a timer written meanwhile is either announced to this
// node or read by the load.
//
// If either fails (the round ran out of time on a slow database), the
// partitions are held all the same: the listen still queued goes on, and
// the next round loads every owned partition's timers again, where they
// would otherwise have waited for the sweep, over a lease late.
func (n *Node) acquired(ctx context.Context, parts []int32) error {
	chans := make([]string, len(parts))
	for i, p := range parts {
		chans[i] = partitionChannel(int(p))
	}
	err := n.notifications.listen(ctx, chans...)
	if err == nil {
		err = n.timers.loadAcquired(ctx, parts)
	}
	if err != nil {
		n.timers.reloadAll()
	}
	return err
}

// dropped follows the loss or release of parts (the membership's
// handler): the schedules of partitions no longer held are disarmed and
// parts' channels unlistened. Their timers still in the wheel are
// dropped when they fire.
func (n *Node) dropped(parts []int) {
	n.runner.Retain(func(s *schedrun.Schedule) bool {
		_, ok := n.members.holds(s.Tag)
		return ok
	})
	if len(parts) > 0 {
		chans := make([]string, len(parts))
		for i, p := range parts {
			chans[i] = partitionChannel(p)
		}
		n.notifications.unlisten(chans...)
	}
}

// round is the rest of a lease round once the leases are settled (the
// membership's handler): extend the timer window, sweep overdue timers,
// reconcile schedules, and reload the concurrency hints after a lost
// listen connection.
func (n *Node) round(ctx context.Context) error {
	if f := n.opts.hooks.rounding.Load(); f != nil {
		(*f)(ctx)
	}
	if err := n.timers.extendWindow(ctx); err != nil {
		return err
	}
	if err := n.timers.sweep(ctx); err != nil {
		return err
	}
	if err := n.reconcileSchedules(ctx); err != nil {
		return err
	}
	n.mu.Lock()
	recap := n.recap
	n.recap = false
	n.mu.Unlock()
	if recap {
		if err := n.loadCapped(ctx); err != nil {
			n.mu.Lock()
			n.recap = true
			n.mu.Unlock()
			return err
		}
		n.tellPolicies("") // changes may have gone unheard meanwhile
	}
	return nil
}

// fail records err, fatal: the node serves no more (see Err).
func (n *Node) fail(err error) {
	n.mu.Lock()
	n.failed = err
	n.mu.Unlock()
}

// kickTick has the lease loop run now.
func (n *Node) kickTick() { n.members.kickTick() }

// resync follows a lost listen connection: every waiting reserver looks
// again, and the lease loop reloads the owned partitions' timers.
func (n *Node) resync() {
	n.mu.Lock()
	for _, q := range n.queues {
		q.WakeAll()
	}
	n.recap = true
	n.mu.Unlock()
	n.timers.reloadAll()
	n.kickTick()
}

// Err reports why the node cannot serve: task.ErrClosed after Close, a
// fatal error (another process took its name), nil while it serves.
func (n *Node) Err() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.usable()
}

// Limits returns the node's limits on a put (service.Engine).
func (n *Node) Limits() service.Limits {
	return service.Limits{MaxDelay: n.opts.MaxDelay, MaxPayload: n.opts.MaxPayload, DefaultTTR: n.opts.DefaultTTR}
}

// usable returns the error that stops operations, or nil. n.mu is held.
func (n *Node) usable() error {
	if n.failed != nil {
		return fmt.Errorf("%w: %v", task.ErrClosed, n.failed)
	}
	if n.closed {
		return task.ErrClosed
	}
	return nil
}

// dbErr reports a database error as the broker reports a failed store:
// the request could not be served (503), nothing is promised of it.
func dbErr(err error) error {
	if err == nil {
		return nil
	}
	var (
		ce *pgconn.ConnectError
		oe *net.OpError
	)
	if errors.As(err, &ce) || errors.As(err, &oe) {
		// A connection that could not be made, or broke. A connect's
		// deadline, if it ran out, is the connect timeout's.
		return &unreachableError{reason(err)}
	}
	if errors.Is(err, task.ErrClosed) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err // an unreachableError (pool.go) says it already
	}
	return fmt.Errorf("%w: database: %v", task.ErrClosed, err)
}

// partitionOf returns the partition of a task.
func (n *Node) partitionOf(job uint64) int { return int(job % uint64(n.partitions)) }

var (
	_ service.Engine         = (*Node)(nil)
	_ service.PolicyNotifier = (*Node)(nil)
)
