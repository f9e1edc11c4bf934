package service

import (
	"context"
	"time"

	"github.com/hourglass-go/hourglass/task"
)

// Commands are the operations of a Service that New's front makes of
// the engine's primitives, each a rule written once for both engines
// (jobs.go): a reserve of one queue and an ack (over ReserveQueues and
// AckMany), the ends of a reservation by key (over Engine.Settle), and
// beanstalkd's commands, which name a task by its job id (over Engine.Read
// and the operations by key).
type Commands interface {
	// Reserve hands out up to max ready tasks of queue in delivery order
	// (priority, then due time; across keys in turn, task.PutRequest.Key),
	// each under a new lease of its ttr,
	// waiting up to wait (at most task.MaxWait) for the first. A paused
	// queue hands out nothing, and a queue's rate and concurrency limits
	// (task.Policy) hold across the whole service: a reserve that meets
	// them waits within wait, or answers what it got.
	Reserve(ctx context.Context, queue string, max int, wait time.Duration) ([]task.Task, error)
	// Ack deletes a reserved task whose lease is lease, durably.
	Ack(ctx context.Context, queue, id, lease string) error
	// Delete deletes a task in any state, durably.
	Delete(ctx context.Context, queue, id string) error
	// Nack gives a reserved task back after a failed attempt, keeping
	// reason (cut by CutError) as its last error: ready again after delay
	// (task.RetryDelay: after the queue's retry policy's delay, at once
	// without one), or dead if its attempts are used up, and then moved
	// to the queue's dead-letter queue if it has one (AfterFailure). It
	// returns the task as it is after (its state, or its new queue),
	// without its payload.
	Nack(ctx context.Context, queue, id, lease string, delay time.Duration, reason string) (task.Task, error)
	// Release gives a reserved task back, ready after delay, without
	// counting the attempt: a worker shutting down. It returns the task,
	// without its payload.
	Release(ctx context.Context, queue, id, lease string, delay time.Duration) (task.Task, error)
	// Bury makes a reserved task dead now, whatever attempts are left
	// (moved to the queue's dead-letter queue if it has one), keeping
	// reason as its last error. It returns the task, without its
	// payload.
	Bury(ctx context.Context, queue, id, lease, reason string) (task.Task, error)
	// Kick makes a dead task ready again.
	Kick(ctx context.Context, queue, id string) error
	// Peek returns the next task of queue in state st: the first ready
	// in delivery order, the delayed one due soonest, the oldest dead.
	Peek(queue string, st task.State) (task.Task, error)
	// ReserveAny reserves one task, the first in delivery order across
	// queues, waiting up to wait; ok is false when the wait ran out.
	ReserveAny(ctx context.Context, queues []string, wait time.Duration) (t task.Task, ok bool, err error)
	// DeleteJob deletes job if it is not reserved, or reserved under
	// lease.
	DeleteJob(ctx context.Context, job uint64, lease string) error
	// ReleaseJob gives job back with priority prio after delay, as
	// beanstalkd's release: its delay is kept (no retry policy applies)
	// and it never makes the task dead, but, unlike Tasks.Release, the
	// attempt stays counted against max_attempts.
	ReleaseJob(ctx context.Context, job uint64, lease string, prio uint32, delay time.Duration) error
	// BuryJob makes job dead with priority prio.
	BuryJob(ctx context.Context, job uint64, lease string, prio uint32) error
	// TouchJob renews job's lease.
	TouchJob(ctx context.Context, job uint64, lease string) (task.Task, error)
	// KickJob makes a dead or delayed job ready.
	KickJob(ctx context.Context, job uint64) error
	// KickQueue makes up to n tasks of queue ready: dead ones first,
	// else delayed ones.
	KickQueue(ctx context.Context, queue string, n int) (int, error)
	// KickDead makes every dead task of queue ready and returns how many.
	KickDead(ctx context.Context, queue string) (int, error)
	// DeleteDead deletes every dead task of queue and returns how many.
	DeleteDead(ctx context.Context, queue string) (int, error)
	// PauseSchedule pauses a schedule, durably: it puts nothing until
	// resumed. ResumeSchedule resumes it from now, with no catch-up.
	// Either returns task.ErrNoSchedule for none.
	PauseSchedule(ctx context.Context, name string) error
	ResumeSchedule(ctx context.Context, name string) error
}

// Primitives are the engine's operations on one task that the front's
// Commands are made of. Each is atomic and durable on its own: one
// commit (the embedded engine) or one statement (a cluster node). The
// front has checked every name, id, lease and delay (validate.go).
type Primitives interface {
	// Delete deletes the task id of queue in any state, durably, unless
	// o refuses it: task.ErrNotFound if there is no such task or it is
	// not of job o.Job, task.ErrState if it is reserved and
	// o.Unreserved. Under a Cancel's context (Cancelling) a reserved
	// task's running attempt ends as cancelled and the history says
	// cancelled (FinishedOutcome); the lease of a reserved task deleted
	// goes to the functions of NotifyLeaseEnds (LeaseEnder).
	Delete(ctx context.Context, queue, id string, o DeleteOptions) error
	// Kick makes the dead task id of queue ready now, keeping its
	// attempts; with o.Delayed a delayed one too. task.ErrNotFound if
	// there is no such task or it is not of job o.Job, task.ErrState if
	// it is in another state.
	Kick(ctx context.Context, queue, id string, o KickOptions) error
	// Settle ends the reservation lease of the task id of queue as s
	// says, durably, and returns the task as it is after (payload or
	// not: the front drops it), or with s.Outcome Renewed renews it for
	// another ttr from now and returns the task with its payload and
	// lease. task.ErrNotFound if there is no such task, task.ErrLease if
	// it is not reserved under lease. What becomes of the task is
	// Settled's Verdict over its attempts and its queue's policy, read
	// in the same commit or statement as the verdict is written; a task
	// that dies where the policy names a dead-letter queue moves there
	// (DeadLettered), due as Verdict.Due says.
	Settle(ctx context.Context, queue, id, lease string, s Settlement) (task.Task, error)
	// Next returns up to n (1 to task.MaxList) tasks of queue in state
	// st, without payloads, in the order beanstalkd's peek and kick take
	// them: for task.Delayed the soonest due first, for task.Dead the
	// oldest death first, for task.Ready the next one delivery order
	// hands out (paused or not; one at most). None is no error.
	Next(ctx context.Context, queue string, st task.State, n int) ([]task.Task, error)
}

// DeleteOptions narrow Engine.Delete.
type DeleteOptions struct {
	// Job, if not 0, is the task's job id: a task of another job id (its
	// id deleted and put again since the caller read it) is not found.
	Job uint64
	// Unreserved refuses a reserved task (task.ErrState): a delete that
	// must not take a task from the worker holding it.
	Unreserved bool
}

// KickOptions narrow Engine.Kick.
type KickOptions struct {
	// Job is as DeleteOptions.Job.
	Job uint64
	// Delayed kicks a delayed task too, making it ready now.
	Delayed bool
}

// Renewed is the Settlement.Outcome of a touch: the reservation goes on
// under the same lease for another ttr from now; the other fields are
// not read.
const Renewed = "renewed"

// Settlement is how Engine.Settle ends a reservation: what the front
// made of a Nack, Release or Bury, or of beanstalkd's release or bury;
// or, with Renewed, a touch that does not end it.
type Settlement struct {
	// Outcome is the attempt's end: task.AttemptNacked (a failed
	// attempt; AfterFailure decides with Delay), task.AttemptReleased
	// (waiting again after Delay, never dead) or task.AttemptBuried
	// (dead now); or Renewed. A nack's and a release's count in the releases
	// (beanstalkd's stats-job), a bury's in the buries.
	Outcome string
	// Delay is a nack's (task.RetryDelay: the policy's) or a release's
	// (0 to Limits.MaxDelay).
	Delay time.Duration
	// Error, if not nil, is the task's new last error, cut by CutError,
	// and its attempt's; nil keeps the last error.
	Error *string
	// Priority, if not nil, is the task's new priority.
	Priority *uint32
	// Refund gives the attempt back (attempts−1): a release that does
	// not count against max_attempts.
	Refund bool
}
