package broker

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/store"
	"github.com/hourglass-go/hourglass/task"
)

// The ends of a reservation other than an ack (Settle, and a lease that
// runs out, expiredLocked): service.Settled and service.Expired decide,
// under the queue's policy, and settleLocked writes the verdict: the task
// waiting again, dead, or moved to its queue's dead-letter queue
// (deadLetterLocked).

// Settle ends the reservation lease of the task id of queue as st says
// (service.Engine), as service.Settled decides under the queue's policy;
// a renewal (service.Renewed, a touch) runs the lease for another TTR
// from now. One group commit, waited for. It returns the task as it is
// after, without its payload but for a renewal's.
func (b *Broker) Settle(ctx context.Context, queue, id, lease string, st service.Settlement) (task.Task, error) {
	b.mu.Lock()
	job, rec, s, err := b.heldLocked(queue, id, lease)
	if err == nil && st.Outcome == service.Renewed {
		t := b.touchLocked(job, rec, s, lease)
		g := b.answerGroupLocked()
		b.mu.Unlock()
		return t, b.wait(ctx, g)
	}
	var v service.Verdict
	if err == nil {
		v, err = service.Settled(ctx, st, b.heldOfLocked(s, rec), rand.Float64())
	}
	if err != nil {
		b.mu.Unlock()
		return task.Task{}, err
	}
	b.leases.Remove(job)
	rec, s = b.settleLocked(job, s, rec, v, time.Now().UnixNano())
	t := view(rec, s)
	g := b.answerGroupLocked()
	b.mu.Unlock()
	return t, b.wait(ctx, g)
}

// heldOfLocked returns what service.Settled and service.Expired decide
// on for the reserved task rec in slot s: its attempts and its queue's
// policy. b.mu must be held.
func (b *Broker) heldOfLocked(s slot, rec store.Task) service.Held {
	return service.Held{Attempts: int(rec.Attempts), MaxAttempts: int(rec.MaxAttempts), Policy: b.queues[s.queue()].policy}
}

// settleLocked writes v, the verdict on job's reservation (the caller has
// taken it off the lease wheel, or the wheel fired), into the open group:
// the attempt ended, the task's counters, last error and priority, and
// the task waiting again, or dead, or moved to the queue's dead-letter
// queue; and counts v (service.Verdict.Count). It returns the record and
// slot as they are after. b.mu must be held.
func (b *Broker) settleLocked(job uint64, s slot, rec store.Task, v service.Verdict, now int64) (store.Task, slot) {
	q := b.queues[s.queue()]
	b.putAttemptLocked(&rec, v.Attempt, v.AttemptError, v.Status, now)
	rec.Attempts = uint32(int64(rec.Attempts) + int64(v.Attempts))
	rec.Releases += uint32(v.Releases)
	rec.Buries += uint32(v.Buries)
	rec.Timeouts += uint32(v.Timeouts)
	if v.LastError != nil {
		rec.LastError = *v.LastError
	}
	if v.Priority != nil {
		rec.Priority, s.prio = *v.Priority, *v.Priority
	}
	b.unleaseLocked(job)
	rec.Lease, rec.LeaseUntil, rec.Payload = "", 0, nil
	if !v.Dead {
		rec.State = store.Waiting
		rec.Due = v.Due(rec.Due, now)
		b.writeTaskLocked(store.UpdateTask, rec)
		s.due = rec.Due
		b.placeLocked(job, s, q, now, rec.Key)
		v.Count(b.metrics.TaskMetrics, q.name, false)
		return rec, b.tasks.at(job)
	}
	b.leaveLocked(&rec, task.FinishedDead, now)
	if v.DeadLetter != "" {
		moving := rec
		moving.Due = v.Due(rec.Due, now)
		if moved, ms, ok := b.deadLetterLocked(job, s, moving, v.DeadLetter, now); ok {
			v.Count(b.metrics.TaskMetrics, q.name, true)
			return moved, ms
		}
	}
	v.Count(b.metrics.TaskMetrics, q.name, false)
	rec.State = store.Dead
	rec.Reserved = now // while dead: when it died, for Recover's order
	b.writeTaskLocked(store.UpdateTask, rec)
	b.buryLocked(job, s, q)
	return rec, b.tasks.at(job)
}

// deadLetterLocked moves job, reserved (or being settled) in its queue and
// dead now, to the queue named to, ready at rec.Due (service.Verdict.Due),
// with its job id, id, payload, last error and priority, and with no
// attempts and to's max_attempts and ttr (service.DeadLettered); a task
// of the same id there is replaced. The move is one put of the whole record
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
	b.moveTaskLocked(old, rec)
	b.noteNumericLocked(dq.name, rec.ID)
	s = slot{due: rec.Due, prio: s.prio, qs: dq.index << 3}
	b.placeLocked(job, s, dq, now, rec.Key)
	rec.Payload = nil
	return rec, b.tasks.at(job), true
}
