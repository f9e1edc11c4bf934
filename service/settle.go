package service

import (
	"context"
	"fmt"

	"github.com/hourglass-go/hourglass/task"
)

// The end of a reservation other than an ack — a nack, a release, a
// bury (Engine.Settle) or a lease that ran out — is decided here, once
// for both engines: Settled and Expired return a Verdict, everything
// that changes, and an engine only writes it (the embedded engine into
// the task's record, a cluster node as the arguments of its settle
// statement) and counts it (Verdict.Count). The engine's part is what
// needs its atomicity: reading the task still held under the lease with
// its queue's policy (Held), and writing the verdict in the same commit
// or statement, conditioned on that lease.
//
// A worked example. A task of a queue whose policy is {MaxAttempts: 3,
// DeadLetter: "q-dead"}, reserved for the second time (Held{Attempts: 2,
// MaxAttempts: 3}):
//
//   - nacked with reason "boom" and no delay: Verdict{Outcome: {Delay:
//     the policy's back-off after 2 attempts (DefaultRetry's, 2 s ±10 %)},
//     Attempt: "nacked", AttemptError: "boom", LastError: "boom",
//     Releases: 1, Nacked: true, Failed: true};
//   - released over HTTP (Refund): Verdict{Outcome: {Delay: its delay},
//     Attempt: "released", Attempts: −1, Releases: 1, Nacked: true}: it
//     counts no failure, and its next attempt is the second again;
//   - buried with "bad": Verdict{Outcome: {Dead: true, DeadLetter:
//     "q-dead"}, Attempt: "buried", AttemptError: "bad", LastError: "bad",
//     Buries: 1, Failed: true};
//   - its lease ran out: Verdict{Outcome: {Delay: 0}, KeepDue: true,
//     Attempt: "expired", AttemptError and LastError task.LeaseExpired,
//     Timeouts: 1, Expired: true, Failed: true}: back at once, in its old
//     place in delivery order (ExpiryDelay);
//   - its lease ran out on its third attempt (Held{Attempts: 3}): as the
//     one before, but Outcome {Dead: true, DeadLetter: "q-dead"}.

// Held is what an engine reads of a reserved task before it settles it,
// in the commit or statement that conditions the settlement on its
// lease: its attempts (this one counted) and max_attempts as the task
// records them (0: no limit), and its queue's policy.
type Held struct {
	Attempts, MaxAttempts int
	Policy                task.Policy
}

// Verdict is what becomes of a reservation that ends other than by an
// ack (Settled, Expired): every change to the task and what it counts.
type Verdict struct {
	// Outcome is AfterFailure's for a failed attempt or a bury: dead (and
	// moved to a dead-letter queue or not) or back after Delay; a release
	// is back after its delay, never dead.
	Outcome
	// KeepDue: back without a delay, the task keeps its due time, and so
	// its place in its queue's delivery order (a lease that ran out);
	// otherwise a task back is due Delay from now.
	KeepDue bool
	// Attempt is the ended attempt's outcome (a task.Attempt* outcome),
	// Status its push's HTTP status (0: none) and AttemptError its error
	// ("": none).
	Attempt      string
	Status       int
	AttemptError string
	// LastError, if not nil, is the task's new last error; nil keeps it.
	LastError *string
	// Priority, if not nil, is the task's new priority.
	Priority *uint32
	// Attempts is added to the task's attempts: −1 gives a release's
	// attempt back (Settlement.Refund), 0 otherwise.
	Attempts int
	// Releases, Buries and Timeouts are added to the task's counters
	// (beanstalkd's stats-job): a nack and a release count a release, a
	// bury a bury, a lease that ran out a timeout.
	Releases, Buries, Timeouts int
	// Nacked, Expired and Failed are the events counted (Count): a nack
	// or a release given back (hourglass_tasks_nacked_total), a lease
	// that ran out (hourglass_lease_expiries_total), and a failed attempt
	// (TaskMetrics.Failed: a retry, or dead; a release is none).
	Nacked, Expired, Failed bool
}

// Settled returns the verdict of Engine.Settle's s (not Renewed) on the
// task h: a nack (task.AttemptNacked) fails the attempt and AfterFailure
// decides with s.Delay; a release (task.AttemptReleased) is back after
// s.Delay, never dead, its attempt given back with s.Refund; a bury
// (task.AttemptBuried) is dead now, whatever attempts are left. A nack
// made under a push's ctx records the push's outcome and status
// (AttemptOutcome). u is a uniform draw in [0, 1) for the back-off's
// jitter. An outcome of none of these is task.ErrInvalid. O(1).
func Settled(ctx context.Context, s Settlement, h Held, u float64) (Verdict, error) {
	v := Verdict{Priority: s.Priority, Attempt: s.Outcome}
	switch s.Outcome {
	case task.AttemptNacked:
		v.Outcome = AfterFailure(h.Policy, h.Attempts, h.MaxAttempts, s.Delay, false, u)
		v.Attempt, v.Status = AttemptOutcome(ctx, task.AttemptNacked)
		v.Releases, v.Nacked, v.Failed = 1, true, true
		v.LastError = s.Error
	case task.AttemptReleased:
		v.Outcome = Outcome{Delay: s.Delay}
		if s.Refund && h.Attempts > 0 {
			v.Attempts = -1
		}
		v.Releases, v.Nacked = 1, true
		return v, nil // a release keeps the last error and records none
	case task.AttemptBuried:
		v.Outcome = AfterFailure(h.Policy, h.Attempts, h.MaxAttempts, 0, true, u)
		v.Buries, v.Failed = 1, true
		v.LastError = s.Error
	default:
		return Verdict{}, fmt.Errorf("%w: no settlement %q", task.ErrInvalid, s.Outcome)
	}
	if s.Error != nil {
		v.AttemptError = *s.Error
	}
	return v, nil
}

// Expired returns the verdict on the task h whose lease ran out: a
// failed attempt, expired, with task.LeaseExpired as its error and the
// task's last error; AfterFailure decides with ExpiryDelay (the retry
// policy's back-off, at once without one), and a task back at once
// keeps its due time (KeepDue). u is as Settled's. O(1).
func Expired(h Held, u float64) Verdict {
	out := AfterFailure(h.Policy, h.Attempts, h.MaxAttempts, ExpiryDelay(h.Policy), false, u)
	return Verdict{
		Outcome: out, KeepDue: !out.Dead && out.Delay <= 0,
		Attempt: task.AttemptExpired, AttemptError: task.LeaseExpired, LastError: &leaseExpired,
		Timeouts: 1, Expired: true, Failed: true,
	}
}

// ExpiryByCounters returns Expired's verdicts on a lease that ran out in
// a queue of policy p when they depend on the task's counters alone:
// left on a task whose attempts are left, usedUp on one that has used
// them up (UsedUp). ok is false when p needs more than the counters: a
// retry back-off with jitter (a delay drawn for each task) or a
// dead-letter queue (a move that needs that queue's policy). A cluster's
// flush settles the leases that ran out in queues without a retry
// back-off or a dead-letter queue in its one statement by these
// verdicts, comparing only each row's counters (cluster.sqlDies), so that
// the decision is this file's on both engines. O(1).
func ExpiryByCounters(p task.Policy) (left, usedUp Verdict, ok bool) {
	left = Expired(Held{Attempts: 1, Policy: p}, 0)
	usedUp = Expired(Held{Attempts: 1, MaxAttempts: 1, Policy: p}, 0)
	ok = left == Expired(Held{Attempts: 1, Policy: p}, 1-0x1p-53) && !(usedUp.Dead && usedUp.DeadLetter != "")
	return left, usedUp, ok
}

// leaseExpired is the last error of every Expired verdict, shared (an
// engine only reads a Verdict): an expiry allocates nothing for it.
var leaseExpired = task.LeaseExpired

// Due returns the due time, in Unix ns, of a task settled by v whose
// due time was due, at now: dead in its queue, due; moved to its
// dead-letter queue, ready there, the earlier of due and now, as a kick
// makes it (a task reserved by its job id while delayed does not carry
// its delay along); back with KeepDue, due; else now + v.Delay,
// saturating at the largest time. A cluster node's settle statement
// does the same with the database's clock (cluster/failure.go). O(1).
func (v Verdict) Due(due, now int64) int64 {
	switch {
	case v.Dead && v.DeadLetter != "":
		return min(due, now)
	case v.Dead, v.KeepDue:
		return due
	case v.Delay > 0 && now > 1<<63-1-int64(v.Delay):
		return 1<<63 - 1
	}
	return now + int64(v.Delay)
}

// Count counts v's events in m, for a task settled in queue, which when
// dead moved to its dead-letter queue if deadLettered (an engine may
// fail to move it, and the task then stays dead in queue). O(1).
func (v Verdict) Count(m TaskMetrics, queue string, deadLettered bool) {
	if v.Nacked {
		m.Nacked()
	}
	if v.Expired {
		m.Expired(1)
	}
	if v.Failed {
		m.Failed(queue, 1, v.Dead, v.Dead && deadLettered)
	}
}
