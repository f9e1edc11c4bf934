// Package broker is the embedded engine of the delay queue: tasks put
// into named queues, delayed until their due time, handed to reservers in
// priority order under a lease, acknowledged, retried, or dead; and cron
// schedules that put tasks. It is a [service.Engine]: the transports
// reach it through service.New, which checks every argument first. It
// knows neither HTTP nor disk, and keeps its record in a [store.Store].
//
// # Memory and record
//
// The store is the record; the broker's memory is the clock. For each live
// task the broker keeps a 16-byte slot (due time, priority, queue and
// state) in pages indexed by job id (slots.go) and, while the task is
// reserved or delayed and due within the next minute, a key in a
// [hourglass.Keyed] timing wheel: delays fire when a task falls due,
// leases when a reservation expires. Tasks due later wait in their slots
// until a sweep arms them (horizon.go), so a million tasks due in hours
// cost about 16 MB. Ready tasks wait in a heap per queue. A
// payload, an id, a lease token live only in the store (and, until their
// group is committed, in a small overlay).
//
// # One put, step by step
//
// Put (its request checked by service.New) takes b.mu, allocates the next
// job id, writes the record into the open commit group (commit.go) and
// arms the delay wheel (or leaves the task to a sweep when it is due
// beyond the next minute), or pushes the task onto its queue's ready heap
// when it is due already; then it releases b.mu and waits for the group's
// fsync before returning. When the wheel fires (fire, reserve.go) the task moves to
// the ready heap and one waiting reserver is woken; nothing is written,
// since "delayed" and "ready" are one recorded state told apart by the
// clock. Reserve pops the heap and marks the task reserved, reads its
// record and payload with b.mu released, then writes the reservation
// (attempts, lease) and arms the lease wheel; it waits only for the
// group of a put it hands out, if that is still committing. Ack deletes
// the record.
//
// # Queue policies
//
// A queue's policy (retry back-off, put defaults, rate and concurrency
// limits, a dead-letter queue) and its pause are kept in its queueState
// and in one store.Queue record (policy.go, which says where each part
// acts); what becomes of a failed attempt is failure.go's.
//
// # History
//
// Every attempt that ends and every task that leaves its queue (acked,
// dead or deleted) writes a record into the group commit of the task's
// own change, kept for Config.History and then pruned, a batch at a time,
// between two groups of the committer (history.go).
//
// # Time
//
// Due times are recorded as wall-clock instants (they must survive a
// restart) and turned into a delay on the monotonic clock once, when a
// wheel is armed: a task is never handed out before its wheel fires, and a
// wheel never fires early. When it fires, the due time is compared with
// the wall clock again, and if that was stepped back since, the wheel is
// armed for the rest (fire): no task is delivered before its due time by
// the wall clock, as on a cluster node, whose flush compares with the
// database's. A rate
// limit's tokens accrue on the monotonic clock (Broker.monoNow), so a step of
// the wall clock forward hands out no token early.
//
// Broker is safe for concurrent use by multiple goroutines.
package broker

import (
	"context"
	"fmt"
	"github.com/hourglass-go/hourglass/internal/retry"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hourglass-go/hourglass"
	"github.com/hourglass-go/hourglass/internal/schedrun"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/store"
	"github.com/hourglass-go/hourglass/task"
)

// Config holds the broker's limits and collaborators. Zero fields take the
// defaults named on each.
type Config struct {
	MaxDelay   time.Duration // default 10 years
	MaxPayload int           // bytes; default 1 MiB
	DefaultTTR time.Duration // default 60 s
	Logger     *slog.Logger  // default slog.Default()
	// History is how long the history (history.go: every attempt of a
	// task, the tasks that left their queues) is kept after a task left
	// its queue; 0: task.DefaultHistory. A negative History keeps none:
	// nothing is written, and what an earlier run wrote is pruned.
	History time.Duration
	// Registerer receives the broker's Prometheus metrics; nil: none.
	Registerer prometheus.Registerer
	// RecentBytes is the budget of records of tasks due soon kept in
	// memory for reserves (recent.go); 0: DefaultRecentBytes; negative:
	// none kept.
	RecentBytes int64
	// MaxQueues bounds how many queues the broker keeps (see
	// queueForLocked); 0: MaxQueues.
	MaxQueues int
	// MaxSchedules bounds how many schedules the broker keeps; 0:
	// task.DefaultMaxSchedules.
	MaxSchedules int
	// RateClock, when set, is the clock of the rate limits' buckets in
	// place of the monotonic clock: for tests that move it forward
	// (policy.go). nil in production.
	RateClock *RateClock
}

// Broker is the delay queue. Open one over a store, use it from any number
// of goroutines, and Close it.
type Broker struct {
	st      store.Store
	cfg     Config
	log     *slog.Logger
	metrics *metrics
	// opened is the origin of monoNow.
	opened time.Time

	delays *hourglass.Keyed[uint64] // delayed tasks, by job id
	leases *hourglass.Keyed[uint64] // reserved tasks, by job id
	cron   *hourglass.Timer         // schedules' next occurrences, key buckets, pauses
	runner *schedrun.Runner         // fires the schedules (schedule.go)

	mu sync.Mutex
	// tasks is every live task's place in memory. Guarded by mu.
	tasks slots
	// leased holds the records (without payloads) of reserved tasks, so
	// that ack, touch, nack and the like read nothing from the store.
	// Guarded by mu.
	leased map[uint64]store.Task
	// delayKeys holds the keys of delayed tasks whose key is not "", for
	// when they fall due (fair.go). Guarded by mu.
	delayKeys map[uint64]string
	// cursors keeps the cursors of the rounds of queues dropped
	// (fair.go). Guarded by mu.
	cursors keptCursors
	// taking holds the tasks a reserve has marked reserved in memory and
	// whose records it is reading with mu released (see reserve); an
	// operation that takes a task out of that state (unplace) removes it,
	// which tells the reserve not to hand it out. Each holds the task's
	// key, for its count (perkey.go). Guarded by mu.
	taking map[uint64]string
	// leaseEnds are told of the leases that deletes ended
	// (NotifyLeaseEnds): appended to, never changed in place. Guarded by
	// mu.
	leaseEnds []func(lease string)
	// queues by index (nil: an index free for the next queue, in
	// freeIndex), and by name: the queues that hold something (a task, a
	// policy, a pause or a schedule) and those reservers wait on (see
	// queueForLocked and waitQueueLocked). Guarded by mu.
	queues    []*queueState
	freeIndex []uint32
	byName    map[string]*queueState
	// real counts the queues of byName marked real (queueForLocked), those
	// that count toward Config.MaxQueues. Guarded by mu.
	real int
	// emptied holds queues that may hold nothing any more, for tidy to
	// drop. Guarded by mu.
	emptied []*queueState
	// idle holds the queues that hold nothing and that reservers no
	// longer wait on, for sweepIdle to drop once idleGrace has passed;
	// idleGen counts sweepIdle's passes, idleArmed says whether one is
	// armed. Guarded by mu.
	idle      []*queueState
	idleGen   uint64
	idleArmed bool
	// schedules by name. Guarded by mu.
	schedules map[string]*schedule
	// nextJob is the next job id to give. Guarded by mu.
	nextJob uint64
	// numeric holds the all-digit ids clients chose that are not below
	// nextJob (see generatedIDLocked). Guarded by mu.
	numeric map[qid]struct{}
	// open is the group that collects writes; last is the newest group with
	// writes (see barrier); over shows their writes. Guarded by mu.
	open, last *group
	over       overlay
	// recent keeps the committed records of tasks due soon, for reserves
	// (recent.go). Guarded by mu.
	recent recent
	// spare holds the storage of committed groups' batches, for groups
	// to come (see recycle). Guarded by mu.
	spare [][]store.Op
	// armedUntil: every delayed task due before it (Unix ns) is in the
	// delay wheel; the others wait for a sweep (horizon.go). Guarded by mu.
	armedUntil int64
	// histSeq is the Seq of the newest store.Finished written (see
	// leave). Guarded by mu.
	histSeq uint64
	// keep says whether the history is written (Config.History not
	// negative); set by Open.
	keep bool
	// late is the lateness history the dashboard draws. Guarded by mu.
	late service.Lateness
	// closed is set by Close; failed by a failed commit. Guarded by mu.
	closed bool
	failed error

	// takenHook, set only by tests, runs between a reserve's take and
	// hand, with mu released.
	takenHook func()

	work          chan struct{} // buffered 1: the open group has writes
	chores        chan chore    // work the committer does between groups
	quit          chan struct{} // closed by Close
	committerDone chan struct{}
	sweepDone     chan struct{}
	pruners       []*retry.Pruner // startPruners (history.go); started last, stopped by shutdown
}

// slot is a live task's place in memory: 16 bytes in Broker.tasks (see
// slots).
type slot struct {
	due  int64  // Unix ns
	prio uint32 // lower first
	qs   uint32 // queue index << 3 | State
}

func (s slot) state() task.State  { return task.State(s.qs & 7) }
func (s slot) queue() uint32      { return s.qs >> 3 }
func (s *slot) set(st task.State) { s.qs = s.qs&^7 | uint32(st) }

// Open recovers the broker's state from st and starts it: tasks due while
// it was down are ready at once, the others keep their due times, leases
// keep running, expired leases make their tasks ready (or dead), and each
// schedule puts its newest missed occurrence once. It takes O(n) for n
// tasks in st, reading no payloads. The broker does not own st: close st
// after [Broker.Close].
func Open(st store.Store, cfg Config) (*Broker, error) {
	l := service.Limits{MaxDelay: cfg.MaxDelay, MaxPayload: cfg.MaxPayload, DefaultTTR: cfg.DefaultTTR}.WithDefaults()
	cfg.MaxDelay, cfg.MaxPayload, cfg.DefaultTTR = l.MaxDelay, l.MaxPayload, l.DefaultTTR
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.History == 0 {
		cfg.History = task.DefaultHistory
	}
	if cfg.MaxQueues <= 0 {
		cfg.MaxQueues = MaxQueues
	}
	if cfg.MaxSchedules <= 0 {
		cfg.MaxSchedules = task.DefaultMaxSchedules
	}
	b := &Broker{
		opened:        time.Now(),
		st:            st,
		cfg:           cfg,
		log:           cfg.Logger,
		numeric:       make(map[qid]struct{}),
		leased:        make(map[uint64]store.Task),
		delayKeys:     make(map[uint64]string),
		taking:        make(map[uint64]string),
		byName:        make(map[string]*queueState),
		schedules:     make(map[string]*schedule),
		over:          overlay{tasks: make(map[uint64]pendingTask), index: make(map[qid]pendingIndex), deduped: make(map[qid]pendingDeduped)},
		recent:        newRecent(recentBudget(cfg.RecentBytes)),
		work:          make(chan struct{}, 1),
		chores:        make(chan chore),
		keep:          cfg.History > 0,
		quit:          make(chan struct{}),
		committerDone: make(chan struct{}),
		sweepDone:     make(chan struct{}),
		armedUntil:    time.Now().Add(armAhead).UnixNano(),
	}
	b.open = newGroup(1)
	b.last = newGroup(0)
	close(b.last.done)
	b.metrics = newMetrics(b)
	b.delays = hourglass.NewKeyed(b.fire, hourglass.WithExecutor(hourglass.Inline))
	b.leases = hourglass.NewKeyed(b.expireLease, hourglass.WithExecutor(hourglass.Inline))
	b.cron = hourglass.New(hourglass.WithExecutor(hourglass.Inline), hourglass.WithShards(1))
	b.runner = schedrun.New(schedrun.Config{Timer: b.cron, Occur: b.occur, Settle: b.settle, Metrics: b.metrics.schedules, Log: b.log})
	go b.commitLoop()
	go b.sweepLoop()
	if err := b.recover(); err != nil {
		b.shutdown()
		return nil, err
	}
	if cfg.Registerer != nil {
		if err := b.metrics.Register(cfg.Registerer); err != nil {
			b.shutdown()
			return nil, fmt.Errorf("hourglass: registering metrics: %w", err)
		}
	}
	b.startPruners()
	if c := cfg.RateClock; c != nil {
		c.onMove(b.rateClockMoved)
	}
	return b, nil
}

// Close stops the broker: waiting reservers return, operations after it
// fail with ErrClosed, every write already sequenced is committed, and the
// broker's goroutines have exited when it returns. It does not close the
// store. Close is idempotent.
func (b *Broker) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		<-b.committerDone
		return nil
	}
	if b.usableLocked() == nil {
		b.keepKeyRatesLocked() // committed by the committer's last group
	}
	b.closed = true
	for _, q := range b.queues {
		if q != nil {
			q.waiters.WakeAll()
		}
	}
	b.mu.Unlock()
	b.shutdown()
	b.mu.Lock()
	err := b.failed
	b.mu.Unlock()
	return err
}

// shutdown stops the wheels, the committer and a read ahead running.
func (b *Broker) shutdown() {
	b.runner.Stop()
	b.cron.Stop()
	b.delays.Stop()
	b.leases.Stop()
	close(b.quit)
	for _, p := range b.pruners {
		p.Stop()
	}
	<-b.committerDone
	<-b.sweepDone
	b.recent.running.Wait()
	b.metrics.Unregister()
}

// Err reports why the broker cannot serve: ErrClosed after Close; after
// a failed commit, an error wrapping ErrClosed and the store's error (and
// ErrNoSpace when the disk is full), for good: only a broker opened again
// over the store reopened serves again. nil while it serves.
func (b *Broker) Err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.usableLocked()
}

// Limits returns the broker's limits on a put (service.Engine).
func (b *Broker) Limits() service.Limits {
	return service.Limits{MaxDelay: b.cfg.MaxDelay, MaxPayload: b.cfg.MaxPayload, DefaultTTR: b.cfg.DefaultTTR}
}

// usableLocked returns the error that stops operations, or nil. b.mu must
// be held.
func (b *Broker) usableLocked() error {
	if b.failed != nil {
		return failed(b.failed)
	}
	if b.closed {
		return task.ErrClosed
	}
	return nil
}

// MaxQueues is the default bound (Config.MaxQueues) on how many queues
// the broker keeps: a put, policy, pause or schedule naming a new queue
// past it fails with ErrInvalid.
const MaxQueues = 100_000

// The queues the broker keeps. A queue exists while it holds a task, a
// policy, a pause or a schedule: it is then real, and counts toward
// Config.MaxQueues. Reservers may also wait on a name that holds none
// (waitQueueLocked): its queueState then lives while they wait, counts
// toward no limit, and is dropped one to two idleGrace after the last of
// them left (Poller.Left, sweepIdle). A
// queue that stops holding anything (its last task acked, its policy
// deleted, its pause ended) is noted (emptiedOutLocked) and dropped by
// tidy, which runs before an operation waits for its commit, when the limit
// is reached, and when the queues are listed: so the state a name keeps
// lasts no longer than what it holds, or the waits on it. A queue's index
// (in its tasks' slots) is reused once it is dropped; no slot names a
// dropped queue, as a queue holding a task is never dropped.

// queueForLocked returns the real state of the queue named name, creating
// it (or making real the one reservers wait on) unless the broker already
// keeps Config.MaxQueues real queues. b.mu must be held. O(1), or
// O(emptied queues) at the limit.
func (b *Broker) queueForLocked(name string) (*queueState, error) {
	if q, ok := b.byName[name]; ok && q.real {
		return q, nil
	}
	if b.real >= b.cfg.MaxQueues {
		b.tidyLocked()
		if b.real >= b.cfg.MaxQueues {
			return nil, fmt.Errorf("%w: too many queues (the limit is %d)", task.ErrInvalid, b.cfg.MaxQueues)
		}
	}
	return b.queueLocked(name), nil
}

// queueLocked returns the real state of the queue named name, creating it
// past the limit: for what the broker recovers, and a schedule's
// occurrences, whose queue counted when the schedule was set. A queue made
// real is noted for tidy, which drops it if the operation that made it
// leaves nothing in it (a kick of a new queue, a put that fails). b.mu must
// be held.
func (b *Broker) queueLocked(name string) *queueState {
	q := b.waitQueueLocked(name)
	if !q.real {
		q.real = true
		b.real++
		b.emptiedOutLocked(q)
	}
	return q
}

// waitQueueLocked returns the state of the queue named name, creating it
// not real: for a reserver to wait on. b.mu must be held. O(1) amortised.
func (b *Broker) waitQueueLocked(name string) *queueState {
	if q, ok := b.byName[name]; ok {
		return q
	}
	var i uint32
	if n := len(b.freeIndex); n > 0 {
		i = b.freeIndex[n-1]
		b.freeIndex = b.freeIndex[:n-1]
	} else {
		i = uint32(len(b.queues))
		b.queues = append(b.queues, nil)
	}
	q := &queueState{name: name, index: i}
	q.ready.cursor = b.cursors.take(name, b.monoNow()) // fair.go
	b.queues[i] = q
	b.byName[name] = q
	return q
}

// holdsLocked reports whether q holds a task, a policy, a pause or a
// schedule. b.mu must be held. O(1).
func (q *queueState) holdsLocked() bool {
	return q.delayed+q.readyN+q.reserved+q.dead > 0 || !q.policy.IsZero() || q.pausedUntil != 0 || q.schedules > 0
}

// emptiedOutLocked notes that q may hold nothing any more, for tidy. b.mu
// must be held. O(1).
func (b *Broker) emptiedOutLocked(q *queueState) {
	if !q.noted {
		q.noted = true
		b.emptied = append(b.emptied, q)
	}
}

// tidyLocked drops the queues noted by emptiedOutLocked that hold nothing.
// b.mu must be held. O(queues noted).
func (b *Broker) tidyLocked() {
	for i, q := range b.emptied {
		q.noted = false
		b.emptied[i] = nil
		b.dropLocked(q)
	}
	b.emptied = b.emptied[:0]
	if cap(b.emptied) > 1024 {
		b.emptied = nil // let a burst's array go
	}
}

// idleGrace is how long a queue that holds nothing is kept after the
// last reserver waiting on it left: one to two idleGrace. A reserver
// over many queues (a beanstalkd connection watching 1,000 tubes) that
// is handed a task and waits again finds their states still there,
// rather than each wait making and dropping one a queue, which cost
// several times the rest of a hand-over (BenchmarkBroker_ReserveWatch_1000).
const idleGrace = time.Second

// maxIdle bounds the queues kept for idleGrace (b.idle): past it a queue
// is dropped as its last waiter leaves. Without it a client naming new
// queues in a stream of short long polls would have the broker keep
// every name of the last seconds; with it they cost at most about 3 MB.
// Ten beanstalkd connections watching task.MaxWatch tubes each fit.
const maxIdle = 10 * task.MaxWatch

// leftIdleLocked notes that q's last waiter left: sweepIdle drops it after
// idleGrace unless it is waited on again or comes to hold something; or
// at once, with maxIdle queues noted already. b.mu must be held. O(1).
func (b *Broker) leftIdleLocked(q *queueState) {
	q.leftGen = b.idleGen
	if q.idleNoted {
		return
	}
	if len(b.idle) >= maxIdle {
		b.dropLocked(q)
		return
	}
	q.idleNoted = true
	b.idle = append(b.idle, q)
	if b.idleArmed || b.closed {
		return
	}
	if _, err := b.cron.AfterFunc(idleGrace, b.sweepIdle); err == nil {
		b.idleArmed = true
	}
}

// sweepIdle drops the queues of b.idle left by their last waiter before
// its previous pass and not waited on since, and arms the next pass
// while any are left. It runs on the cron timer's goroutine.
// O(len(b.idle)).
func (b *Broker) sweepIdle() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.idleArmed = false
	kept := b.idle[:0]
	for _, q := range b.idle {
		switch {
		case b.byName[q.name] != q || q.holdsLocked() || !q.waiters.Unused():
			q.idleNoted = false // dropped already, or used again
		case q.leftGen < b.idleGen:
			q.idleNoted = false
			b.dropLocked(q)
		default:
			kept = append(kept, q)
		}
	}
	clear(b.idle[len(kept):])
	b.idle = kept
	if cap(b.idle) > 1024 && len(b.idle) < cap(b.idle)/4 {
		b.idle = append([]*queueState(nil), b.idle...)
	}
	b.idleGen++
	if len(b.idle) > 0 && !b.closed {
		if _, err := b.cron.AfterFunc(idleGrace, b.sweepIdle); err == nil {
			b.idleArmed = true
		}
	}
}

// dropLocked forgets q unless it holds something: it no longer counts
// toward the limit, nor has metric series, and unless reservers wait on it,
// its state and index go. b.mu must be held. O(1).
func (b *Broker) dropLocked(q *queueState) {
	if q.holdsLocked() || b.byName[q.name] != q {
		return
	}
	if q.real {
		q.real = false
		b.real--
		b.metrics.ForgetQueue(q.name)
	}
	q.ready.reset() // stale items only
	q.buried, q.reburied = nil, nil
	q.bucket = service.Bucket{}
	if q.rateWake != nil {
		q.rateWake.Cancel()
		q.rateWake, q.rateAt = nil, 0
	}
	if !q.waiters.Unused() {
		return
	}
	b.cursors.keep(q.name, q.ready.cursor, b.monoNow()) // fair.go
	delete(b.byName, q.name)
	b.queues[q.index] = nil
	b.freeIndex = append(b.freeIndex, q.index)
}

// countLocked moves one task of q from state from to state to (0: none). A
// task that stops being reserved in a queue with a concurrency limit
// frees a place: one waiter is woken, if a task is ready for it. b.mu must
// be held.
func (q *queueState) countLocked(from, to task.State) {
	for i, st := range [2]task.State{from, to} {
		d := 1
		if i == 0 {
			d = -1
		}
		switch st {
		case task.Delayed:
			q.delayed += d
		case task.Ready:
			q.readyN += d
		case task.Reserved:
			q.reserved += d
		case task.Dead:
			q.dead += d
		}
	}
	if from == task.Reserved && to != task.Reserved && q.policy.Concurrency > 0 && q.readyN > 0 {
		q.waiters.Wake(1)
	}
}

// placeLocked puts job, a task of key, into memory as waiting until due:
// armed in the delay wheel (its key kept in b.delayKeys), or in its key's
// lane of q's ready tasks (waking a reserver) when due is not after now.
// The slot's previous state, if any, must already be left. b.mu must be
// held.
func (b *Broker) placeLocked(job uint64, s slot, q *queueState, now int64, key string) {
	old := s.state()
	if s.due > now {
		s.set(task.Delayed)
		if key != "" {
			b.delayKeys[job] = key
		}
		if s.due < b.armedUntil {
			b.delays.Set(job, time.Duration(s.due-now))
		} // else a sweep arms it (horizon.go)
	} else {
		s.set(task.Ready)
		q.ready.push(key, readyItem{due: s.due, ready: now, prio: s.prio, job: job})
		q.waiters.Wake(1)
	}
	q.countLocked(old, s.state())
	b.tasks.set(job, s)
}

// unplaceLocked takes job out of its wheel (its ready-heap item, if any,
// goes stale) and out of the counts. It leaves b.tasks to the caller. b.mu
// must be held.
func (b *Broker) unplaceLocked(job uint64, s slot) {
	switch s.state() {
	case task.Delayed:
		b.delays.Remove(job)
		delete(b.delayKeys, job)
	case task.Reserved:
		b.leases.Remove(job)
		b.unleaseLocked(job)
		if key, ok := b.taking[job]; ok {
			delete(b.taking, job)
			b.queues[s.queue()].unholdLocked(key)
		}
	case task.Dead:
		b.unburyLocked(job, b.queues[s.queue()])
	}
	q := b.queues[s.queue()]
	q.countLocked(s.state(), 0)
	if q.delayed+q.readyN+q.reserved+q.dead == 0 {
		b.emptiedOutLocked(q)
	}
}

// findLocked returns the job id, record (its payload may be nil: see meta)
// and memory slot of the live task id of queue. b.mu must be held.
func (b *Broker) findLocked(queue, id string) (uint64, store.Task, slot, error) {
	if err := b.usableLocked(); err != nil {
		return 0, store.Task{}, slot{}, err
	}
	return b.locateLocked(queue, id)
}

// locateLocked is find without its check that the broker serves, for reads
// after a failed commit (see Get). b.mu must be held.
func (b *Broker) locateLocked(queue, id string) (uint64, store.Task, slot, error) {
	job, err := b.lookupLocked(queue, id)
	if err != nil {
		return 0, store.Task{}, slot{}, err
	}
	s, ok := b.tasks.get(job)
	if !ok {
		return 0, store.Task{}, slot{}, task.ErrNotFound
	}
	rec, err := b.metaLocked(job)
	if err != nil {
		return 0, store.Task{}, slot{}, err
	}
	return job, rec, s, nil
}

// answerGroupLocked drops the queues left holding nothing (tidy) and
// returns the group an operation waits for before it answers: the newest
// with writes, its own or those it saw (barrier). b.mu must be held.
// O(queues noted by emptiedOutLocked).
func (b *Broker) answerGroupLocked() *group {
	g := b.barrierLocked()
	b.tidyLocked()
	return g
}

// wait waits for g, the group holding an operation's writes (or its
// barrier), unless ctx ends first: then the writes still commit, but the
// caller is told ctx's error. b.mu is not held: the caller takes g with
// answerGroupLocked, releases b.mu, then waits, so that operations waiting
// for one group commit share its fsync.
func (b *Broker) wait(ctx context.Context, g *group) error {
	select {
	case <-g.done:
		if g.err != nil {
			return failed(g.err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// view turns a record and its slot into the Task the API reports.
func view(t store.Task, s slot) task.Task {
	v := task.Task{
		ID:          t.ID,
		JobID:       t.JobID,
		Queue:       t.Queue,
		State:       s.state(),
		Payload:     t.Payload,
		Priority:    t.Priority,
		Due:         time.Unix(0, t.Due).UTC(),
		TTR:         t.TTR,
		Attempts:    int(t.Attempts),
		MaxAttempts: int(t.MaxAttempts),
		Created:     time.Unix(0, t.Created).UTC(),
		Timeouts:    int(t.Timeouts),
		Releases:    int(t.Releases),
		Buries:      int(t.Buries),
		Kicks:       int(t.Kicks),
		LastError:   t.LastError,
		Trace:       task.Trace{Parent: t.TraceParent, State: t.TraceState},
		Key:         t.Key,
	}
	if t.State == store.Reserved {
		v.LeaseUntil = time.Unix(0, t.LeaseUntil).UTC()
	}
	return v
}

var _ service.Engine = (*Broker)(nil)
var _ service.LeaseEnder = (*Broker)(nil)
