// Package service is the delay queue's semantics as every transport sees
// them: the one interface, [Service], that the HTTP API (package httpapi),
// the beanstalkd protocol (package beanstalk), the dashboard and `hourglass
// serve` consume, and the rules both engines apply — the checks of a
// client's input and their messages (validate.go), and schedules:
// occurrence names and missed occurrences (schedule.go), delivery
// lateness (lateness.go).
//
// A Service is [New] over an [Engine]: New checks every argument of every
// operation, once for both engines, and hands the engine only what passed.
// Two engines implement Engine: package broker, over an embedded store on
// one machine, and package cluster, a node of many over PostgreSQL. A
// compile-time check in each makes a missing method a build error; an
// engine is not a Service (Service has a method only New's value has), so
// no transport can be handed one unchecked. One suite over the service
// (package servicetest) and one black-box suite (package e2e) run every
// test against both engines, so a route cannot work on one and not the
// other.
//
// The shared types (task, state, limits, errors) are package task's.
package service

import (
	"context"
	"time"

	"github.com/hourglass-go/hourglass/task"
)

// Service is the delay queue: tasks put into named queues, delayed until
// their due time, handed out under a lease, acknowledged or retried,
// dead after their last attempt; cron schedules that put tasks; and what
// an operator looks at. Every method is safe for concurrent use. Errors
// wrap the sentinels of package task (task.ErrInvalid for bad input,
// saying what is wrong; task.ErrNotFound, task.ErrLease, task.ErrState,
// task.ErrTooLarge, task.ErrClosed, task.ErrNoSchedule).
type Service interface {
	Operations
	Commands
	// CheckCron returns the next n occurrences of a cron line read in
	// timezone, as a schedule's (CheckCron in schedule.go).
	CheckCron(line, timezone string, n int) ([]time.Time, error)
	// Ready returns Err's error, or why the service cannot serve for now
	// though its process is fine (an engine's Readiness: a cluster node
	// cut off from its database), or nil while it serves: what a
	// readiness probe asks, where a liveness probe asks Err.
	Ready() error
	// Limits returns the engine's limits on a put, defaults set (its
	// default ttr is what Effective fills a policy's in with).
	Limits() Limits
	// Bulk does r's action on every task of queue that r.Filter matches,
	// in chunks, each task atomically (bulk.go), and says what it did.
	Bulk(ctx context.Context, queue string, r BulkRequest) (BulkResult, error)
	// Cancel deletes the task id of queue as Delete does, in any state,
	// and records it cancelled; a reserved task's holder is told to stop
	// (cancel.go).
	Cancel(ctx context.Context, queue, id string) error
	// CancelledLeases returns those of leases (1 to task.MaxAcks) whose
	// tasks were deleted or cancelled while reserved, within the last
	// CancelMemory: what a worker asks about the leases it holds. It
	// reads memory only (cancel.go).
	CancelledLeases(leases []string) ([]string, error)
	// WatchCancels calls f with the lease of every reserved task deleted
	// or cancelled (on any node of a cluster), until stop is called; f
	// runs on a goroutine of the engine's and must not block.
	WatchCancels(f func(lease string)) (stop func())
	// Keys returns a page of up to limit (1 to task.MaxList) keys of
	// queue's live tasks, busiest first, after the cursor after ("": the
	// first page), with their ready, reserved and delayed counts
	// (keys.go).
	Keys(ctx context.Context, queue, after string, limit int) (KeysPage, error)

	// checked is the mark of New's front: only a Service from New (or a
	// type embedding one) is a Service, so that no transport is handed
	// an engine whose input nobody checked.
	checked()
}

// Engine is what runs below the service: storage and the primitives
// only it can do atomically, on input New's front has already checked.
// Package broker is the embedded engine, package cluster the PostgreSQL
// one. Only New calls an engine's methods from outside its package, and
// it calls each one only after the checks of this package passed
// (validate.go, acks.go, policy.go, schedule.go), so an engine does not
// check a client's input again: a bad argument gets the same answer on
// either engine because one piece of code gives it, and reaches no
// engine. Every operation of Service that is not one of these is the
// front's, written once over them: Commands (commands.go, jobs.go), Put
// (PutBatch of one), Get and Job (Read), Touch (Settle of Renewed),
// LastFinished (FinishedTasks of one id), Schedule (Schedules of one
// name), RunSchedule (PutBatch, then SetSchedule's Run), SetPolicy,
// DeletePolicy and PauseQueue (SetQueue) (validate.go, finished.go).
//
// The contract, for every method: it is one commit (the embedded engine)
// or one statement or transaction (a cluster node), durable when it
// returns unless its comment says otherwise; it is safe for concurrent
// use; it answers with the sentinels of package task (a cluster node the
// same as the embedded engine, which TestDifferential compares); and
// where the front acts on a task it read before, the engine checks what
// the front expects (a job id, a lease) in the same commit as it acts.
// An engine applies, where it needs its atomicity, the rules of this
// package, which decide: defaults and a queue's policy at a put
// (ApplyDefaults), the end of a reservation inside Settle and a lease's
// expiry (Settled, Expired: a Verdict the engine only writes and counts),
// the buckets a policy change refills (Refills), the long-poll
// (LongPoll), schedules' occurrences (schedule.go). On a cluster every answer covers the whole cluster
// unless its comment says otherwise.
type Engine interface {
	// Err returns the error that stops the engine from serving (a failed
	// commit, a lost database), or nil while it serves.
	Err() error
	// Limits returns the engine's limits on a put, defaults set: what New
	// checks puts, delays and pauses against, and what the engine
	// applies itself (DefaultTTR at a put).
	Limits() Limits

	// PutBatch puts rs (0 to task.MaxBatch, each checked by CheckPut)
	// into queue (a valid name) in one commit, in order, answering each
	// alone once it is durable: created is false where a live task had
	// the request's id (kept, or replaced under r.Replace with a new job
	// id); a request without an id gets the first free GeneratedID. The
	// queue's policy and the engine's defaults apply (ApplyDefaults).
	PutBatch(ctx context.Context, queue string, rs []task.PutRequest) []task.PutResult
	// Read returns one task with its payload, addressed by r: by job id
	// (r.Job, not 0) or by queue and id (valid), task.ErrNotFound if it
	// is not live. What it answers is durable.
	Read(r TaskRef) (task.Task, error)
	// ReserveQueues hands out up to max (1 to task.MaxReserve) ready
	// tasks of queues (at least one, valid names), the first in
	// delivery order across them, each under a new lease of its ttr and
	// saying its queue, waiting up to wait (0 to task.MaxWait) for the
	// first; a paused queue hands out nothing, and a queue's rate and
	// concurrency limits (task.Policy) hold across the engine.
	ReserveQueues(ctx context.Context, queues []string, max int, wait time.Duration) ([]task.Task, error)
	// ReserveJob reserves job if it is ready, delayed or dead, whatever
	// its queue's pause and limits (beanstalkd's reserve-job), and
	// returns it with its lease and payload; task.ErrNotFound otherwise.
	ReserveJob(ctx context.Context, job uint64) (task.Task, error)
	// AckMany acks each of acks (1 to task.MaxAcks, each checked by
	// checkHeld): deletes each reserved task whose lease is the ack's,
	// in one commit (the embedded engine) or one statement (a cluster
	// node), and returns one error a task, in order: nil where the ack
	// took, task.ErrLease or task.ErrNotFound where it did not. It
	// returns once every ack is durable or refused.
	AckMany(ctx context.Context, acks []task.Ack) ([]error, error)
	Primitives

	// Queues counts every queue that holds tasks, is paused or has a
	// policy, by name, with its pause and policy; on a cluster the
	// counters are summed over the nodes' reports.
	Queues(ctx context.Context) ([]task.QueueStats, error)
	// Queue returns one queue's counts and details (a valid name; a
	// queue never used reports zeros); on a cluster the counters and
	// Waiting are this node's.
	Queue(queue string) (task.QueueDetail, error)
	// KeyCounts counts the ready, reserved and delayed tasks of queue
	// (a valid name) by key, one entry a key that has any, in no order
	// (Service.Keys orders and pages them); the key "" counts the tasks
	// put without one. Dead tasks are not counted.
	KeyCounts(ctx context.Context, queue string) ([]task.KeyCount, error)
	// SetQueue changes the settings of queue (a valid name), durably, as
	// c says (QueueChange), and returns its policy as recorded; on a
	// cluster every node applies the change.
	SetQueue(ctx context.Context, queue string, c QueueChange) (task.Policy, error)
	// Policy returns queue's policy as recorded: the zero Policy when
	// none was set.
	Policy(ctx context.Context, queue string) (task.Policy, error)

	// Attempts returns the attempts of the task id of queue (valid),
	// oldest first (at most the newest task.MaxAttemptsListed): its
	// ended ones and, while it is reserved, the running one. A task no
	// longer live answers from the history (its newest incarnation of
	// that id) while kept; task.ErrNotFound after.
	Attempts(ctx context.Context, queue, id string) ([]task.Attempt, error)
	// FinishedTasks returns up to limit (1 to task.MaxList) records of
	// tasks that left queue, newest first, that f matches (checked by
	// CheckFinished), below the cursor after (0: the newest), and the
	// cursor of the next page (0: none). With f.ID it answers the newest
	// record of that id at most, and no next page.
	FinishedTasks(ctx context.Context, queue string, f FinishedFilter, after uint64, limit int) ([]task.Finished, uint64, error)

	// SetSchedule writes the schedule name, durably, as c says
	// (ScheduleChange): creates or replaces it (created is false for a
	// replacement; it answers the schedule as set), pauses or resumes
	// it, or records a run the front put. Every change but a Spec
	// answers task.ErrNoSchedule if there is no such schedule, and the
	// zero ScheduleInfo.
	SetSchedule(ctx context.Context, name string, c ScheduleChange) (info task.ScheduleInfo, created bool, err error)
	// Schedules returns every schedule by name, or with name not "" that
	// one only (none if there is none), with its next and last
	// occurrences and its last task's outcome.
	Schedules(ctx context.Context, name string) ([]task.ScheduleInfo, error)
	// DeleteSchedule deletes the schedule name, or answers
	// task.ErrNoSchedule; the tasks it put stay.
	DeleteSchedule(ctx context.Context, name string) error

	// MoveTask moves job, a task of queue in any state but reserved, into
	// queue to, in one commit (the embedded engine) or one statement (a
	// cluster node), durably: it keeps its id, job id, payload, priority,
	// due time, attempts and state, and leaves queue. It returns
	// task.ErrNotFound if job is not a task of queue, task.ErrState if it
	// is reserved, and ErrClash, moving nothing, if to has a task of its
	// id. to is a valid queue name other than queue (CheckBulk).
	MoveTask(ctx context.Context, queue string, job uint64, to string) error
	// FindTasks is Service.FindTasks, its arguments checked
	// (CheckFilter, Cursor).
	FindTasks(ctx context.Context, queue string, f Filter, after Cursor, limit int) ([]task.Task, Cursor, error)
	// Lateness is Service.Lateness: on a cluster the nodes' reports,
	// merged (MergeLateness).
	Lateness(ctx context.Context) ([]task.LatenessWindow, error)
	// DueHistogram is Service.DueHistogram, its arguments checked
	// (CheckDueHistogram).
	DueHistogram(ctx context.Context, queue string, width time.Duration, n int) (start time.Time, counts []int, err error)
}

// TaskRef names one task for Engine.Read: by job id when Job is not 0,
// else by Queue and ID.
type TaskRef struct {
	Queue, ID string
	Job       uint64
}

// FinishedFilter narrows Engine.FinishedTasks.
type FinishedFilter struct {
	// Outcome, if not "", is the only outcome answered (one of the
	// task.Finished* outcomes).
	Outcome string
	// ID, if not "", answers the newest record of that task id only
	// (what LastFinished reads): the history indexes a task's newest
	// record, not the older ones.
	ID string
}

// QueueChange is what Engine.SetQueue changes of a queue's settings,
// which live in one record (the embedded engine) or row (a cluster
// node): its policy, its pause, or both.
type QueueChange struct {
	// Policy, if not nil, is the queue's new policy, checked and
	// normalised (CheckPolicy, NormalPolicy); it applies to the tasks
	// already in the queue too. A new rate starts with a full bucket.
	// The zero Policy makes the queue's policy the default again, and
	// on a queue that has none changes nothing and makes no record.
	Policy *task.Policy
	// Pause, if not nil, stops the queue from handing out tasks for
	// *Pause (task.PauseIndefinitely: until resumed; 0 resumes it) and
	// counts in its Pauses. Puts go on; reservers wait.
	Pause *time.Duration
}

// ScheduleChange is what Engine.SetSchedule writes: exactly one of its
// fields.
type ScheduleChange struct {
	// Spec creates or replaces the schedule (Spec.Name is the name),
	// checked by ParseSchedule and checkNewSchedule; a replacement keeps
	// the last occurrence, and one that unpauses starts from now.
	Spec *task.ScheduleSpec
	// Paused pauses the schedule (true), so that it puts nothing, or
	// resumes it from now: the occurrences that fell due while it was
	// paused are not put. Setting what is already set changes nothing.
	Paused *bool
	// Run records a task the front put for the schedule (RunSchedule) as
	// its last: its last run at Run.At unless a later one is recorded,
	// its last task Run.ID; the next occurrence stays. It counts in the
	// schedule's puts (hourglass_schedule_puts_total).
	Run *LastRun
}

// LastRun is a run of a schedule put by the front: when, and the id
// of its task (RunID).
type LastRun struct {
	At time.Time
	ID string
}

// Operations are what a Service does and an Engine runs below it.
type Operations interface {
	Tasks
	Jobs
	Policies
	History
	Schedules
	Observer
	// Err returns the error that stops the service from serving (a
	// failed commit, a lost database), or nil while it serves.
	Err() error
}

// Readiness is implemented by an engine that can be unable to serve for
// a while and come back by itself: a cluster node that cannot reach its
// database. Ready returns why it cannot serve, nil while it can; an
// engine without it is ready while its Err is nil.
type Readiness interface {
	Ready() error
}

// Ready is Service.Ready: Err's error, else the engine's Readiness.
func (f *front) Ready() error {
	if err := f.e.Err(); err != nil {
		return err
	}
	if r, ok := f.e.(Readiness); ok {
		return r.Ready()
	}
	return nil
}

// Tasks addresses tasks by queue and the id the client chose (or the
// service made): what the HTTP API does.
type Tasks interface {
	// Put puts one task into queue; created is false when a task of that
	// id existed (and was kept, or replaced with r.Replace). It returns
	// once the task is durable.
	Put(ctx context.Context, queue string, r task.PutRequest) (t task.Task, created bool, err error)
	// PutBatch puts up to task.MaxBatch tasks into queue in one commit,
	// answering each alone.
	PutBatch(ctx context.Context, queue string, rs []task.PutRequest) []task.PutResult
	// Get returns a task with its payload.
	Get(queue, id string) (task.Task, error)
	// ReserveQueues is Reserve over several queues: the first max ready
	// tasks in delivery order across them, each saying its queue.
	ReserveQueues(ctx context.Context, queues []string, max int, wait time.Duration) ([]task.Task, error)
	// AckMany acks each of acks (1 to task.MaxAcks, checked by CheckAcks):
	// deletes each reserved task whose lease is the ack's, durably, in one commit (the embedded engine) or one statement
	// (a cluster node), and returns one error a task, in order: nil
	// where the ack took. It returns once every ack is durable or
	// refused.
	AckMany(ctx context.Context, acks []task.Ack) ([]error, error)
	// Touch renews a lease for another ttr.
	Touch(ctx context.Context, queue, id, lease string) (task.Task, error)
	// Queues counts every queue's tasks by state.
	Queues(ctx context.Context) ([]task.QueueStats, error)
}

// Jobs addresses tasks by job id and watches several queues at once:
// what the beanstalkd protocol does.
type Jobs interface {
	// PutBatch is Tasks.PutBatch.
	PutBatch(ctx context.Context, queue string, rs []task.PutRequest) []task.PutResult
	// Job returns the task with job id job, payload included.
	Job(job uint64) (task.Task, error)
	// ReserveJob reserves job if it is ready, delayed or dead.
	ReserveJob(ctx context.Context, job uint64) (task.Task, error)
	// Queue returns one queue's counts and details.
	Queue(queue string) (task.QueueDetail, error)
	// Queues is Tasks.Queues.
	Queues(ctx context.Context) ([]task.QueueStats, error)
}

// Policies are queues' policies and pauses (policy.go for the rules).
// Both are durable, and on a cluster every node applies the same.
type Policies interface {
	// SetPolicy checks p (CheckPolicy) and makes it queue's policy,
	// durably; it applies to the tasks already in the queue too. It
	// returns the policy as recorded (NormalPolicy).
	SetPolicy(ctx context.Context, queue string, p task.Policy) (task.Policy, error)
	// Policy returns queue's policy: the zero Policy when none was set.
	Policy(ctx context.Context, queue string) (task.Policy, error)
	// DeletePolicy makes queue's policy the default again, durably.
	DeletePolicy(ctx context.Context, queue string) error
	// PauseQueue stops queue from handing out tasks for d
	// (task.PauseIndefinitely: until resumed), durably; a pause of 0
	// resumes it. Puts go on; reservers wait.
	PauseQueue(ctx context.Context, queue string, d time.Duration) error
}

// History is what became of tasks: every attempt of a task, and the
// tasks that left their queues (acked, dead or deleted), kept for the
// server's retention (hourglass serve --history, task.DefaultHistory by
// default; 0 keeps none). Both are durable, and on a cluster cover every
// node.
type History interface {
	// Attempts returns the attempts of the task id of queue, oldest
	// first (at most the newest task.MaxAttemptsListed): its ended ones
	// and, while it is reserved, the running one. A task no longer live
	// answers from the history (its newest incarnation of that id) while
	// kept; task.ErrNotFound after.
	Attempts(ctx context.Context, queue, id string) ([]task.Attempt, error)
	// FinishedTasks returns up to limit (1 to task.MaxList) tasks that
	// left queue, newest first, whose outcome is outcome ("" any), from
	// the cursor after (0: the newest), and the cursor of the next page
	// (0: none).
	FinishedTasks(ctx context.Context, queue, outcome string, after uint64, limit int) ([]task.Finished, uint64, error)
	// LastFinished returns the newest record of a task id that left
	// queue, while the history keeps it; task.ErrNotFound otherwise. It
	// does not look at live tasks: see [GetOrFinished].
	LastFinished(ctx context.Context, queue, id string) (task.Finished, error)
}

// Schedules are cron schedules that put a task into a queue at each
// occurrence (see schedule.go for the rules).
type Schedules interface {
	// SetSchedule creates or replaces a schedule, durably; created is
	// false for a replacement.
	SetSchedule(ctx context.Context, s task.ScheduleSpec) (info task.ScheduleInfo, created bool, err error)
	// Schedule returns one schedule, or task.ErrNoSchedule.
	Schedule(ctx context.Context, name string) (task.ScheduleInfo, error)
	// Schedules returns every schedule by name.
	Schedules(ctx context.Context) ([]task.ScheduleInfo, error)
	// DeleteSchedule deletes a schedule; the tasks it put stay.
	DeleteSchedule(ctx context.Context, name string) error
	// RunSchedule puts a task of a schedule now (id service.RunID), paused
	// or not, and makes it the schedule's last; its next occurrence stays.
	RunSchedule(ctx context.Context, name string) (task.Task, error)
}

// Observer is what the dashboard looks at. On a cluster every answer
// covers the whole cluster, except Lateness, which covers the nodes'
// reports (see lateness.go).
type Observer interface {
	// FindTasks returns up to limit (1 to task.MaxList) tasks of queue
	// that f matches (checked by CheckFilter), in due order after after
	// (Cursor), without payloads, and the cursor of the next page (the
	// zero Cursor: none). A page
	// reads at most FindScan tasks of the queue, so that it takes bounded
	// time whatever the queue's size: with a selective filter it may hold
	// fewer than limit, none even, and still have a next page.
	FindTasks(ctx context.Context, queue string, f Filter, after Cursor, limit int) ([]task.Task, Cursor, error)
	// Lateness returns delivery lateness per 10-second window over the
	// last 15 minutes, oldest first.
	Lateness(ctx context.Context) ([]task.LatenessWindow, error)
	// DueHistogram counts the delayed tasks of queue (every queue for
	// "") falling due in each of n windows of width from now.
	DueHistogram(ctx context.Context, queue string, width time.Duration, n int) (start time.Time, counts []int, err error)
}
