package cluster

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hourglass-go/hourglass"
)

// The owner's timers: the wheel holds, by job id, the next timer of every
// task of the owned partitions that fires before the horizon (the task's
// due time while it waits, its lease's end while reserved). When one
// fires, the flusher makes the task ready (or settles its expired lease)
// in the database, fenced by the partition's epoch, and wakes the
// reservers waiting on its queue on every node.

// timers is a node's role as the owner of its partitions' timers: the
// wheel, the jobs fired and not yet flushed, the horizon of what the
// wheel holds, and the flusher goroutine. It starts with start and ends
// with stop. It asks the membership which partitions are held, at which
// epochs, and drops from it those a flush was fenced out of; it asks the
// node (flushEnv) for its waiting reservers and hands them what a flush
// reserved for them.
//
// mu guards fired, horizon and reload. It is held by no database call
// and by no call into the node; under it the membership's lock (a leaf)
// may be taken. timers is safe for concurrent use by multiple
// goroutines.
type timers struct {
	db         *pool
	own        [flushLanes]*ownConn // the flushers' connections, a lane each (pool_conn.go)
	name       string
	partitions int
	window     time.Duration
	lease      time.Duration
	keep       bool // write the history (history.go)
	clock      *clock
	log        *slog.Logger
	metrics    *metrics
	hooks      *hooks
	members    *membership
	env        flushEnv

	// wholeUntil (local Unix ns): until then a flush runs sqlFlush
	// alone, without sqlFlushDue first (flushOn).
	wholeUntil atomic.Int64

	wheel    *hourglass.Keyed[uint64] // owned partitions' timers by job id
	kick     chan struct{}            // buffered 1: fired has jobs
	planDue  chan struct{}            // buffered 1: the plan timer fired (plan.go)
	quit     chan struct{}
	done     context.Context // cancelled by stop
	cancel   context.CancelFunc
	stopOnce sync.Once
	wg       sync.WaitGroup

	mu sync.Mutex
	// fired lists jobs whose timers fired, for the flusher, and firedAt
	// when each did (local Unix ns), for the hop fired → flushing.
	// Guarded by mu.
	fired   []uint64
	firedAt []int64
	// horizon (database Unix ns): the timers of owned partitions due
	// before it are in the wheel. Guarded by mu.
	horizon int64
	// reload asks the next extendWindow to load every owned partition's
	// timers again (after the listen connection was lost). Guarded by mu.
	reload bool
	// planWanted: a cold lane waits for the next timer armed to set the
	// plan timer; planArmed: the plan timer is set (plan.go). Guarded by
	// mu.
	planWanted, planArmed bool
}

// flushEnv is what a flush asks of the rest of its node: its reservers
// waiting, to hand tasks to, and what to do with the tasks it made ready
// or left for the node to settle. Node implements it; none of its
// methods is called with the timers' lock held.
type flushEnv interface {
	// waiting returns the queues with reservers waiting on them alone and
	// how many tasks each takes, at most limit.
	waiting(limit int) (queues []string, lims []int32)
	// handOver gives rows, reserved for those reservers, to them.
	handOver(rows []row, dbNow int64)
	// leaseCall returns the leasing call of a flush handing tasks of
	// queues over, given back if its answer is lost (giveback.go).
	leaseCall(queues []string) *leaseCall
	// readied tells the reservers of queue that k tasks were made ready.
	readied(queue string, k int)
	// settleExpired settles the expired leases the flush left to the
	// node's policies (failure.go).
	settleExpired(ctx context.Context, late []row) error
}

// wheelTick is the tick of the owner's wheel. A timer fires at the first
// tick at or after its time, so the tick is added to every delivery's
// first hop (due → fired): half of it on average, all of it at worst. The
// wheel's default of a millisecond would be most of that hop on a light
// load. A finer tick costs wakeups of the wheel's goroutine only
// where timers fall due in distinct slots: at most one a tick, and never
// more than one per timer, so a node with 5,000 tasks falling due a
// second wakes at most that often, each wake firing what is due.
const wheelTick = 100 * time.Microsecond

// newTimers returns the role with its wheel running and its horizon one
// window from now, its flusher not started.
func newTimers(n *Node, env flushEnv) *timers {
	t := &timers{
		db: n.db, name: n.name, partitions: n.partitions, window: n.opts.Window, lease: n.opts.Lease,
		keep: n.keep(), clock: &n.clock, log: n.log, metrics: n.metrics, hooks: n.opts.hooks,
		members: n.members, env: env,
		kick:    make(chan struct{}, 1),
		planDue: make(chan struct{}, 1),
		quit:    make(chan struct{}),
	}
	t.done, t.cancel = context.WithCancel(context.Background())
	for i := range t.own {
		t.own[i] = newOwnConn(t.db, t.warm)
	}
	t.wheel = hourglass.NewKeyed(t.fire, hourglass.WithExecutor(hourglass.Inline), hourglass.WithHierarchicalWheel(wheelTick))
	t.horizon = t.clock.now() + int64(t.window)
	return t
}

// start starts the flusher.
func (t *timers) start() {
	t.wg.Add(1)
	go t.flushLoop()
}

// stop ends the flusher, if started, once its flushes in progress are
// done, closes its connections and stops the wheel. It is idempotent.
func (t *timers) stop() {
	t.stopOnce.Do(func() {
		close(t.quit)
		t.cancel()
		t.wg.Wait()
		for _, c := range t.own {
			c.close()
		}
		t.wheel.Stop()
	})
}

// partitionOf returns the partition of a task.
func (t *timers) partitionOf(job uint64) int { return int(job % uint64(t.partitions)) }

// armAt sets job's timer for at (database ns) unless an earlier one is
// pending: the earliest wins, since a timer that fires before its task's
// time is only armed again for the rest (see flush), while one that fires
// late makes the task late. A timer already due goes to the flusher at
// once, without the wheel: the overdue tasks of partitions just acquired
// (a restart, a takeover) are flushed in one statement. t.mu is held.
func (t *timers) armAt(job uint64, at int64) {
	d := t.clock.until(at)
	if d == 0 {
		t.fired = append(t.fired, job)
		t.firedAt = append(t.firedAt, time.Now().UnixNano())
		select {
		case t.kick <- struct{}{}:
		default:
		}
		return
	}
	if dl, ok := t.wheel.Deadline(job); ok && !time.Now().Add(d).Before(dl) {
		return
	}
	t.wheel.Set(job, d)
	t.armPlanLocked(d)
}

// disarm drops the timers of jobs whose tasks were deleted (acked) that
// this node's wheel holds: the timer of a lease ended by its ack would
// otherwise stay armed for the rest of the lease's TTR (up to
// 1.5 Windows, see announceLease) and then fire into a flush that finds
// no task. A timer of a partition another node owns stays there, and
// fires into its flush for nothing. O(len(jobs)).
func (t *timers) disarm(jobs []int64) {
	for _, j := range jobs {
		t.wheel.Remove(uint64(j))
	}
}

// retry arms jobs again a moment from now: a flush or a settlement that
// failed puts them back for the next round (the sweep is the backstop).
func (t *timers) retry(jobs []uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, j := range jobs {
		t.armAt(j, t.clock.now()+int64(100*time.Millisecond))
	}
}

// fire is the wheel's callback: job's timer is due by this node's clock.
// It runs on the wheel's goroutine.
func (t *timers) fire(job uint64) {
	if job == planKey {
		t.planFired()
		return
	}
	now := time.Now().UnixNano()
	t.mu.Lock()
	t.fired = append(t.fired, job)
	t.firedAt = append(t.firedAt, now)
	t.mu.Unlock()
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

// pending returns how many fired jobs wait for the flusher.
func (t *timers) pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.fired)
}

// load arms the timers of parts firing in [from, to) (database ns);
// with overdue also those before from.
func (t *timers) load(ctx context.Context, parts []int32, from, to int64, overdue bool) error {
	if len(parts) == 0 {
		return nil
	}
	q := `SELECT job_id, fire_at FROM hourglass_tasks
		WHERE partition = ANY($1) AND fire_at IS NOT NULL AND fire_at >= $2 AND fire_at < $3`
	if overdue {
		from = minInt64
	}
	rows, err := t.db.Query(ctx, q, parts, from, to)
	if err != nil {
		return err
	}
	type timer struct{ job, at int64 }
	ts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (timer, error) {
		var tm timer
		err := r.Scan(&tm.job, &tm.at)
		return tm, err
	})
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	owned := t.members.snapshot()
	for _, tm := range ts {
		if _, ok := owned[t.partitionOf(uint64(tm.job))]; ok {
			t.armAt(uint64(tm.job), tm.at)
		}
	}
	return nil
}

const minInt64 = -1 << 63

// loadAcquired arms the timers of parts, just acquired, due before the
// horizon, overdue ones included.
// It then wakes the flusher, which opens and warms its connection if it
// had none (flushLoop): the first timer of a node that held no partition
// is then flushed on a connection ready for it.
func (t *timers) loadAcquired(ctx context.Context, parts []int32) error {
	t.mu.Lock()
	horizon := t.horizon
	t.mu.Unlock()
	err := t.load(ctx, parts, 0, horizon, true)
	select {
	case t.kick <- struct{}{}:
	default:
	}
	return err
}

// extendWindow loads the next window's timers once less than half of the
// current one is left: the horizon moves to one Window from now. It runs
// on the lease loop, the one goroutine that moves the horizon.
func (t *timers) extendWindow(ctx context.Context) error {
	now := t.clock.now()
	t.mu.Lock()
	from := t.horizon
	reload := t.reload
	t.reload = false
	t.mu.Unlock()
	parts, _ := t.members.arrays()
	if reload {
		if err := t.load(ctx, parts, 0, from, true); err != nil {
			t.mu.Lock()
			t.reload = true
			t.mu.Unlock()
			return err
		}
	}
	if from-now >= int64(t.window/2) {
		return nil
	}
	to := now + int64(t.window)
	if err := t.load(ctx, parts, from, to, false); err != nil {
		return err
	}
	t.mu.Lock()
	t.horizon = to
	t.mu.Unlock()
	return nil
}

// reloadAll has the next extendWindow load every owned partition's
// timers again: notifications of timers may have been lost.
func (t *timers) reloadAll() {
	t.mu.Lock()
	t.reload = true
	t.mu.Unlock()
}

// sweep arms again the owned timers that are overdue by more than a
// lease: those whose notification was lost (a crash between a commit and
// its notification, a listen connection down) or whose flush failed.
// Normally it finds none, reading one empty index range per partition.
func (t *timers) sweep(ctx context.Context) error {
	parts, _ := t.members.arrays()
	cut := t.clock.now() - int64(t.lease)
	return t.load(ctx, parts, 0, cut, true)
}

// notified arms the timers announced on partition p's channel, if this
// node holds p.
func (t *timers) notified(p int, payload string) {
	if _, ok := t.members.holds(p); !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for line := range strings.SplitSeq(payload, "\n") {
		j, a, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		job, err1 := strconv.ParseUint(j, 10, 64)
		at, err2 := strconv.ParseInt(a, 10, 64)
		if err1 != nil || err2 != nil || t.partitionOf(job) != p {
			continue
		}
		t.armAt(job, at)
	}
}

// armHeld arms job's timer for at if this node holds job's partition.
func (t *timers) armHeld(job uint64, at int64) {
	if _, ok := t.members.holds(t.partitionOf(job)); ok {
		t.mu.Lock()
		t.armAt(job, at)
		t.mu.Unlock()
	}
}

// announce tells the owner of job's partition that job's timer fires at
// (database ns), when that may be inside the owner's window: an owner
// holds at most one Window ahead, and later timers are loaded with the
// window that holds them. dbNow is the database's clock when the timer
// was written. If this node owns the partition it also arms the timer
// itself, saving the notification's round trip; the notification is sent
// anyway, since this node may have lost the partition without knowing
// yet.
func (n *Node) announce(job uint64, at, dbNow int64) {
	if at-dbNow >= int64(n.opts.Window)+int64(n.opts.Window/2) {
		return
	}
	n.timers.armHeld(job, at)
	n.notifications.timer(n.partitionOf(job), job, at)
}
