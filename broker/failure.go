package broker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/store"
	"github.com/hourglass-go/hourglass/task"
)

// The ends of a reservation other than an ack (Settle, and a lease that
// runs out): a failed attempt or a bury, decided by service.AfterFailure
// under the queue's policy (fail), and a task given back (a release). A
// task that dies in a queue whose policy names a dead-letter queue moves
// there (deadLetterLocked).

// Settle ends the reservation lease of the task id of queue as st says
// (service.Engine): a failed attempt (task.AttemptNacked) or a bury is
// decided by fail under the queue's policy; a release waits again after
// st.Delay, never dead; a renewal (service.Renewed, a touch) runs the
// lease for another TTR from now. One group commit, waited for. It
// returns the task as it is after, without its payload but for a
// renewal's.
func (b *Broker) Settle(ctx context.Context, queue, id, lease string, st service.Settlement) (task.Task, error) {
	b.mu.Lock()
	job, rec, s, err := b.heldLocked(queue, id, lease)
	if err == nil && st.Outcome == service.Renewed {
		t := b.touchLocked(job, rec, s, lease)
		g := b.answerGroupLocked()
		b.mu.Unlock()
		return t, b.wait(ctx, g)
	}
	if err == nil && st.Outcome != task.AttemptNacked && st.Outcome != task.AttemptReleased && st.Outcome != task.AttemptBuried {
		err = fmt.Errorf("%w: no settlement %q", task.ErrInvalid, st.Outcome)
	}
	if err != nil {
		b.mu.Unlock()
		return task.Task{}, err
	}
	b.leases.Remove(job)
	now := time.Now().UnixNano()
	if st.Priority != nil {
		rec.Priority, s.prio = *st.Priority, *st.Priority
	}
	reason := ""
	if st.Error != nil {
		reason = *st.Error
	}
	switch st.Outcome {
	case task.AttemptReleased:
		b.unleaseLocked(job)
		b.metrics.Nacked()
		b.endAttemptLocked(&rec, task.AttemptReleased, "", now)
		if st.Refund && rec.Attempts > 0 {
			rec.Attempts--
		}
		rec.Releases++
		rec.State = store.Waiting
		rec.Lease, rec.LeaseUntil, rec.Payload = "", 0, nil
		rec.Due = addSat(now, st.Delay)
		b.writeTaskLocked(store.UpdateTask, rec)
		s.due = rec.Due
		b.placeLocked(job, s, b.queues[s.queue()], now, rec.Key)
		s = b.tasks.at(job)
	case task.AttemptBuried:
		b.endAttemptLocked(&rec, task.AttemptBuried, reason, now)
		rec.Buries++
		if st.Error != nil {
			rec.LastError = reason
		}
		rec, s = b.failLocked(job, s, rec, now, 0, true, false)
	default:
		b.metrics.Nacked()
		b.endSettledLocked(ctx, &rec, task.AttemptNacked, reason, now)
		rec.Releases++
		if st.Error != nil {
			rec.LastError = reason
		}
		rec, s = b.failLocked(job, s, rec, now, st.Delay, false, false)
	}
	t := view(rec, s)
	g := b.answerGroupLocked()
	b.mu.Unlock()
	return t, b.wait(ctx, g)
}

// failLocked ends job's reservation after a failed attempt (the caller has
// taken it off the lease wheel, or the wheel fired, and set rec's
// counters and last error): service.AfterFailure decides, under the
// queue's policy, with delay the caller's or task.RetryDelay, and bury
// for a task made dead whatever its attempts. The task is waiting again,
// or dead, or moved to the queue's dead-letter queue. keepDue is for a
// lease that ran out: a task.RetryDelay is then service.ExpiryDelay's
// (the queue's retry policy, at once without one), and a task coming
// back without a delay keeps its due time, and so its place in its
// queue's delivery order. It returns the record and slot as they are
// after. b.mu must be held.
func (b *Broker) failLocked(job uint64, s slot, rec store.Task, now int64, delay time.Duration, bury, keepDue bool) (store.Task, slot) {
	q := b.queues[s.queue()]
	b.unleaseLocked(job)
	rec.Lease, rec.LeaseUntil, rec.Payload = "", 0, nil
	if keepDue && delay == task.RetryDelay {
		delay = service.ExpiryDelay(q.policy)
	}
	out := service.AfterFailure(q.policy, int(rec.Attempts), int(rec.MaxAttempts), delay, bury, rand.Float64())
	if !out.Dead {
		rec.State = store.Waiting
		if !keepDue || out.Delay > 0 {
			rec.Due = addSat(now, out.Delay)
		}
		b.writeTaskLocked(store.UpdateTask, rec)
		s.due = rec.Due
		b.placeLocked(job, s, q, now, rec.Key)
		b.metrics.Failed(q.name, 1, false, false)
		return rec, b.tasks.at(job)
	}
	b.leaveLocked(&rec, task.FinishedDead, now)
	if out.DeadLetter != "" {
		if moved, ms, ok := b.deadLetterLocked(job, s, rec, out.DeadLetter, now); ok {
			b.metrics.Failed(q.name, 1, true, true)
			return moved, ms
		}
	}
	b.metrics.Failed(q.name, 1, true, false)
	rec.State = store.Dead
	rec.Reserved = now // while dead: when it died, for Recover's order
	b.writeTaskLocked(store.UpdateTask, rec)
	b.buryLocked(job, s, q)
	return rec, b.tasks.at(job)
}

// deadLetterLocked moves job, reserved (or being settled) in its queue and
// dead now, to the queue named to, ready, with its job id, id, payload,
// last error and priority, and with no attempts and to's max_attempts
// and ttr (service.DeadLettered); a task of the same id there is
// replaced. The move is one put of the whole record
// (the payload read from the overlay or the store: a rare path) beside
// the replaced task's delete, in the open group. ok is false, and
// nothing changed, when the move cannot be made (the payload unreadable,
// too many queues): the task then stays dead in its queue. b.mu must be
// held.
func (b *Broker) deadLetterLocked(job uint64, s slot, rec store.Task, to string, now int64) (store.Task, slot, bool) {
	from := b.queues[s.queue()]
	dq, err := b.queueForLocked(to)
	if err == nil {
		rec, err = b.withPayloadLocked(rec)
	}
	var other uint64
	if err == nil {
		if other, err = b.lookupLocked(to, rec.ID); err == task.ErrNotFound {
			other, err = 0, nil
		}
	}
	var orec store.Task
	var os slot
	if err == nil && other != 0 {
		var ok bool
		if os, ok = b.tasks.get(other); !ok {
			other = 0
		} else {
			orec, err = b.metaLocked(other)
		}
	}
	if err != nil {
		b.log.Error("hourglass: moving a dead task to its dead-letter queue; it stays dead in its queue",
			"queue", from.name, "id", rec.ID, "job_id", job, "dead_letter", to, "err", err)
		return store.Task{}, slot{}, false
	}
	if other != 0 {
		b.leaveLocked(&orec, task.FinishedDeleted, now)
		b.removeLocked(other, os, orec)
	}
	from.countLocked(s.state(), 0)
	b.emptiedOutLocked(from)
	old := qid{rec.Queue, rec.ID}
	rec.Queue = dq.name
	rec.State = store.Waiting
	maxAttempts, ttr := service.DeadLettered(dq.policy)
	rec.Attempts, rec.MaxAttempts = 0, uint32(maxAttempts)
	if ttr > 0 {
		rec.TTR = ttr
	}
	rec.Due = min(rec.Due, now) // ready, in its place by due time (as a kick)
	b.moveTaskLocked(old, rec)
	b.noteNumericLocked(dq.name, rec.ID)
	s = slot{due: rec.Due, prio: s.prio, qs: dq.index << 3}
	b.placeLocked(job, s, dq, now, rec.Key)
	rec.Payload = nil
	return rec, b.tasks.at(job), true
}

// addSat returns now + d, saturating at the largest time.
func addSat(now int64, d time.Duration) int64 {
	if d > 0 && now > 1<<63-1-int64(d) {
		return 1<<63 - 1
	}
	return now + int64(d)
}
