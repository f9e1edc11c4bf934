// Package store defines what the delay-queue service keeps on disk: the
// record of every task and schedule, and the [Store] interface that an
// embedded store (package pebblestore) and a database store implement.
//
// The broker (package broker) is the only writer. It keeps in memory what
// the timing wheels need and asks the store for everything else: a task's
// payload, its lease, its id. A [Store] is the record; the wheels are the
// clock. On start the broker reads every task back with [Store.Recover]
// (without payloads) and rebuilds its wheels and ready lists from the
// records' states and times.
//
// # Durability
//
// [Store.Commit] returns only once its whole batch is durable (on disk
// after fsync, or committed by a database): a crash after Commit returns
// loses nothing of it, and a crash before leaves either all of the batch or
// none. Commits are applied in the order they return. The broker groups
// the writes of concurrent requests into one batch (group commit), so a
// store need not group on its own.
//
// # Times
//
// Times in records are nanoseconds since the Unix epoch (UTC, wall clock),
// since they must mean the same after a restart. The broker converts them
// to the monotonic clock once, when it arms a wheel.
package store

import (
	"errors"
	"time"

	"github.com/hourglass-go/hourglass/task"
)

// ErrNotFound is returned for a task, index entry or schedule that is not
// in the store.
var ErrNotFound = errors.New("hourglass: not found")

// ErrCorrupt is returned (wrapped, with the place) when a record fails its
// checksum or cannot be decoded.
var ErrCorrupt = errors.New("hourglass: store corrupt")

// State is a task's state as recorded. Delayed and ready are one recorded
// state, Waiting: which one a waiting task is follows from its Due time and
// the clock, and moving from one to the other writes nothing.
type State uint8

const (
	// Waiting tasks are delayed until Due, then ready.
	Waiting State = 1
	// Reserved tasks are leased to a worker until LeaseUntil.
	Reserved State = 2
	// Dead tasks used up their attempts (or were buried) and wait for a
	// kick or a delete.
	Dead State = 3
)

// String returns the state's lower-case name.
func (s State) String() string {
	switch s {
	case Waiting:
		return "waiting"
	case Reserved:
		return "reserved"
	case Dead:
		return "dead"
	}
	return "invalid"
}

// Task is the record of one task. JobID is the primary key, unique in the
// store forever (never reused, see [Store.NextJobID]); Queue and ID are
// unique together among live tasks.
type Task struct {
	JobID       uint64
	Queue       string
	ID          string
	State       State
	Priority    uint32 // lower first
	Due         int64  // Unix ns: delayed until then
	Created     int64  // Unix ns
	TTR         time.Duration
	Attempts    uint32 // reservations so far
	MaxAttempts uint32 // 0: unlimited
	Lease       string // while Reserved: the token the holder presents
	LeaseUntil  int64  // while Reserved: Unix ns when the lease expires

	// LastError is why the last attempt failed (task.Task.LastError).
	LastError string
	// Reserved is, while Reserved, when the current reservation began
	// (Unix ns): the running attempt's start; while Dead, when the task
	// died (0 for a task that died before the broker recorded it), which
	// orders a queue's dead tasks after a restart.
	Reserved int64
	// Trace is the W3C trace context the task was put with
	// (task.Task.Trace): "" and "" for none.
	TraceParent, TraceState string
	// Key is the task's fairness key (task.Task.Key): "" for none.
	Key string

	// Counters kept for beanstalkd's stats-job.
	Timeouts uint32
	Releases uint32
	Buries   uint32
	Kicks    uint32

	// Payload is the task's body. Recover leaves it nil; Task fills it.
	Payload []byte
}

// Schedule is the record of one cron schedule. Last is the newest
// occurrence already put (Unix ns, 0 for none), written in the same batch
// as that occurrence's task, so that a restart never puts it twice.
type Schedule struct {
	Name     string
	Cron     string
	Queue    string
	Timezone string
	Payload  []byte
	Created  int64
	Last     int64
	// The options of the schedule (task.ScheduleSpec, normalised by
	// service.NormalSchedule): misfire and overlap rules, catch-up (ns),
	// the tasks' priority, ttr (ns) and max attempts, and the pause.
	Misfire, Overlap string
	CatchUp          int64
	Priority         uint32
	TTR              int64
	MaxAttempts      int
	Paused           bool
	// LastRun is the time of the newest occurrence or run put or skipped
	// (Unix ns, 0 for none), LastID the id of the newest task put: when it
	// is not LastRun's (service.LastSkipped), LastRun's was skipped. Last
	// is the cursor of the misfire rule; LastRun what is reported.
	LastRun int64
	LastID  string
}

// Queue is the record of a queue's settings: its policy and its pause.
// A queue with neither has no record.
type Queue struct {
	Name        string
	Policy      task.Policy
	PausedUntil int64 // Unix ns; 0: not paused; math.MaxInt64: until resumed
	Pauses      uint64
	// Tokens and TokensAt are the token bucket of Policy.Rate
	// (service.Bucket): Tokens left at TokensAt, Unix ns. TokensAt 0: not
	// used since the rate was set, a full bucket. The broker writes them
	// with the reservations that took the tokens, so that a restart does
	// not refill the bucket.
	Tokens   float64
	TokensAt int64
	// KeyBuckets are the buckets of Policy.PerKey.Rate that were not
	// full, written by the broker when it closes (and only then: a crash
	// refills them), so that a restart does not let a burst of every key
	// through. nil: none (every key's bucket full).
	KeyBuckets []KeyBucket
}

// KeyBucket is one key's bucket of a per-key rate (service.Bucket):
// Tokens left at At, Unix ns.
type KeyBucket struct {
	Key    string
	Tokens float64
	At     int64
}

// Attempt is the record of one ended attempt of a task (task.Attempt),
// kept under its task's job id after the task is gone, until the history
// is pruned.
type Attempt struct {
	JobID   uint64
	N       uint32
	Attempt uint32 // the task's attempts while it ran (task.Attempt); 0: a record from before it was kept
	Queue   string // the queue it ran in; "": a record from before it was kept
	Started int64  // Unix ns
	Ended   int64  // Unix ns
	Outcome string
	Error   string
	Status  int32
	Node    string
}

// Finished is the record of a task that left its queue (task.Finished).
// Seq orders the history: given by the broker in increasing order (see
// Store.HistorySeq), it is the cursor of a page.
type Finished struct {
	Seq       uint64
	JobID     uint64
	Queue     string
	ID        string
	Outcome   string
	Finished  int64 // Unix ns
	Attempts  uint32
	LastError string
}

// Deduped is the finished-id record of a task that left a queue with a
// dedupe window (task.Policy.Dedupe; the rule is service.Dedupes): one
// per (Queue, ID), the newest replacing the one before, kept until Until
// and then pruned (Store.PruneDeduped).
type Deduped struct {
	Queue     string
	ID        string
	JobID     uint64
	Outcome   string // a task.Finished* outcome
	Finished  int64  // Unix ns: when the task left
	Until     int64  // Unix ns: when the record ends
	Attempts  uint32
	LastError string
}

// Store keeps tasks and schedules durably. Implementations are safe for
// concurrent use; the broker commits from one goroutine at a time and reads
// from many.
type Store interface {
	// Commit applies b atomically and durably: it returns nil only once
	// every write of b would survive a crash. An empty batch is a no-op.
	Commit(b *Batch) error

	// Task returns the task with jobID, payload included, or ErrNotFound.
	Task(jobID uint64) (Task, error)

	// Lookup returns the job id of the live task named id in queue, or
	// ErrNotFound.
	Lookup(queue, id string) (uint64, error)

	// List returns up to limit tasks of queue with job ids above after,
	// in job id order, without payloads: a page of the queue.
	List(queue string, after uint64, limit int) ([]Task, error)

	// Records returns the records of jobs, without payloads, in the
	// order of jobs: one point read each, for a listing whose order is
	// not the store's. A job not in the store answers a Task whose JobID
	// is 0.
	Records(jobs []uint64) ([]Task, error)

	// Recover calls fn for every task in job id order, without payloads,
	// stopping at the first error fn returns.
	Recover(fn func(Task) error) error

	// Schedules returns every schedule, by name.
	Schedules() ([]Schedule, error)

	// Queues returns every queue record, by name.
	Queues() ([]Queue, error)

	// Attempts returns the attempt records of job, by N.
	Attempts(job uint64) ([]Attempt, error)

	// LastFinished returns the newest Finished record of the task named
	// id in queue, or ErrNotFound.
	LastFinished(queue, id string) (Finished, error)

	// History returns up to limit Finished records of queue with Seq
	// below before (0: any), newest first, whose Outcome is outcome (""
	// any).
	History(queue, outcome string, before uint64, limit int) ([]Finished, error)

	// HistorySeq returns the highest Seq of any Finished record ever
	// committed (0 for none), pruned ones included.
	HistorySeq() (uint64, error)

	// PruneHistory removes, durably, up to max Finished records whose
	// Finished time is before before, oldest first, with the attempt
	// records of their jobs (unless the job is live again, which cannot
	// be: job ids are never reused), and returns how many it removed. Its
	// cost is bounded by max.
	PruneHistory(before int64, max int) (int, error)

	// Deduped returns the finished-id record of (queue, id), or
	// ErrNotFound; one that ended but is not yet pruned is returned too.
	Deduped(queue, id string) (Deduped, error)

	// PruneDeduped removes, durably, up to max Deduped records whose
	// Until is before before, soonest first, and returns how many. Its
	// cost is bounded by max.
	PruneDeduped(before int64, max int) (int, error)

	// NextJobID returns the lowest job id never used: one above the
	// highest ever committed, deleted tasks included.
	NextJobID() (uint64, error)

	// Close releases the store. It does not commit anything.
	Close() error
}

// Pipeliner is a Store whose commits can overlap: Apply applies a batch
// (after every batch applied before it, and visible to reads) and returns
// a wait for its durability, so that the caller can apply the next batch
// while this one's fsync runs, and one fsync can cover both. Calls of
// Apply must not be concurrent; waits may run on any goroutine. A batch
// is durable when its wait returns nil, as when Commit returns nil.
type Pipeliner interface {
	Store
	Apply(b *Batch) (wait func() error, err error)
}

// Batch is a list of writes committed together by [Store.Commit]. Writes
// apply in order; a later write of the same key wins. The zero Batch is
// empty and ready to use. A Batch is not safe for concurrent use.
type Batch struct {
	Ops []Op
	// NextJobID, when above the store's, raises it (see Store.NextJobID).
	NextJobID uint64
}

// OpKind says what an [Op] writes.
type OpKind uint8

const (
	// PutTask writes Op.Task whole (record, payload and index), replacing
	// any task with the same JobID.
	PutTask OpKind = iota + 1
	// UpdateTask writes Op.Task's record and leaves its stored payload as
	// it is (Op.Task.Payload is ignored): state changes of a task whose
	// payload is unchanged. The task must be in the store (or put earlier
	// in the batch) with the same Queue and ID: a store may write the
	// record without reading the old one, and what it does otherwise is
	// not defined.
	UpdateTask
	// DeleteTask removes the task Op.Task.JobID with its payload and its
	// index and list entries. Op.Task.Queue and Op.Task.ID must be the
	// recorded ones: a store may remove the entries they name without
	// reading the record. A delete of a task not in the store is a no-op.
	DeleteTask
	// PutSchedule writes Op.Schedule, replacing one of the same name.
	PutSchedule
	// DeleteSchedule removes the schedule Op.Schedule.Name.
	DeleteSchedule
	// PutAttempt writes Op.Attempt, replacing one of the same job and N.
	PutAttempt
	// PutFinished writes Op.Finished (and raises the history's Seq).
	PutFinished
	// PutQueue writes Op.Queue, replacing the record of the same name.
	PutQueue
	// DeleteQueue removes the record of queue Op.Queue.Name.
	DeleteQueue
	// DeleteAttempt removes the attempt record of job Op.Attempt.JobID
	// numbered Op.Attempt.N, if any: the bound on a task's attempt
	// records (task.AttemptsKeptLast).
	DeleteAttempt
	// PutDeduped writes Op.Deduped, replacing the record of the same
	// queue and id.
	PutDeduped
)

// The broker writes every update and delete from the task's current
// record, which it has at hand, so a store need not read anything back to
// commit: at a million tasks that read was the cost of a commit (a block
// read from disk for each).

// Op is one write of a [Batch].
type Op struct {
	Kind     OpKind
	Task     Task
	Schedule Schedule
	Queue    Queue
	Attempt  Attempt
	Finished Finished
	Deduped  Deduped
}

// Len returns the number of writes in b.
func (b *Batch) Len() int { return len(b.Ops) }

// Reset empties b, keeping its storage.
func (b *Batch) Reset() {
	clear(b.Ops)
	b.Ops = b.Ops[:0]
	b.NextJobID = 0
}

// Put appends a PutTask of t.
func (b *Batch) Put(t Task) { b.Ops = append(b.Ops, Op{Kind: PutTask, Task: t}) }

// Update appends an UpdateTask of t.
func (b *Batch) Update(t Task) { b.Ops = append(b.Ops, Op{Kind: UpdateTask, Task: t}) }

// Delete appends a DeleteTask of t.
func (b *Batch) Delete(t Task) { b.Ops = append(b.Ops, Op{Kind: DeleteTask, Task: t}) }

// PutSchedule appends a PutSchedule of s.
func (b *Batch) PutSchedule(s Schedule) {
	b.Ops = append(b.Ops, Op{Kind: PutSchedule, Schedule: s})
}

// DeleteSchedule appends a DeleteSchedule of the schedule named name.
func (b *Batch) DeleteSchedule(name string) {
	b.Ops = append(b.Ops, Op{Kind: DeleteSchedule, Schedule: Schedule{Name: name}})
}

// PutDeduped appends a PutDeduped of d.
func (b *Batch) PutDeduped(d Deduped) { b.Ops = append(b.Ops, Op{Kind: PutDeduped, Deduped: d}) }

// PutQueue appends a PutQueue of q.
func (b *Batch) PutQueue(q Queue) { b.Ops = append(b.Ops, Op{Kind: PutQueue, Queue: q}) }

// DeleteQueue appends a DeleteQueue of the queue record named name.
func (b *Batch) DeleteQueue(name string) {
	b.Ops = append(b.Ops, Op{Kind: DeleteQueue, Queue: Queue{Name: name}})
}

// PutAttempt appends a PutAttempt of a.
func (b *Batch) PutAttempt(a Attempt) { b.Ops = append(b.Ops, Op{Kind: PutAttempt, Attempt: a}) }

// DeleteAttempt appends a DeleteAttempt of attempt n of job.
func (b *Batch) DeleteAttempt(job uint64, n uint32) {
	b.Ops = append(b.Ops, Op{Kind: DeleteAttempt, Attempt: Attempt{JobID: job, N: n}})
}

// PutFinished appends a PutFinished of f.
func (b *Batch) PutFinished(f Finished) { b.Ops = append(b.Ops, Op{Kind: PutFinished, Finished: f}) }
