package broker

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/store"
	"github.com/hourglass-go/hourglass/task"
)

// Read returns the task r names, payload included (service.Engine), or
// ErrNotFound (never put, deleted or acked). It reports what is durable:
// a task whose put is still being committed is returned once it is. By
// queue and id, after a failed commit (see [Broker.Err]) it still
// answers, from memory and the store, which may then show writes whose
// commit failed; by job id it answers Err's error.
func (b *Broker) Read(r service.TaskRef) (task.Task, error) {
	b.mu.Lock()
	if r.Job != 0 {
		t, err := b.showLocked(r.Job)
		if err != nil {
			b.mu.Unlock()
			return task.Task{}, err
		}
		g := b.answerGroupLocked()
		b.mu.Unlock()
		return t, b.wait(context.Background(), g)
	}
	if b.closed {
		b.mu.Unlock()
		return task.Task{}, task.ErrClosed
	}
	queue, id := r.Queue, r.ID
	job, _, s, err := b.locateLocked(queue, id)
	if err != nil {
		b.mu.Unlock()
		return task.Task{}, err
	}
	rec, err := b.recordLocked(job)
	if err != nil {
		b.mu.Unlock()
		return task.Task{}, err
	}
	t := view(rec, s)
	if b.failed != nil {
		b.mu.Unlock()
		return t, nil // nothing will be durable that is not yet
	}
	g := b.answerGroupLocked()
	b.mu.Unlock()
	if err := b.wait(context.Background(), g); err != nil {
		return task.Task{}, err
	}
	return t, nil
}

// Delete removes the task id of queue in whatever state it is, durably,
// or returns ErrNotFound, unless o refuses it (service.Engine). Under a Cancel's context (service.Cancelling)
// a reserved task's running attempt ends as cancelled and the history
// says cancelled. Once the delete of a reserved task is durable, its
// lease is reported to the functions of NotifyLeaseEnds.
func (b *Broker) Delete(ctx context.Context, queue, id string, o service.DeleteOptions) error {
	b.mu.Lock()
	job, rec, s, err := b.findLocked(queue, id)
	switch {
	case err != nil:
	case o.Job != 0 && job != o.Job:
		err = task.ErrNotFound
	case o.Unreserved && s.state() == task.Reserved:
		err = fmt.Errorf("%w: task %q is reserved", task.ErrState, id)
	}
	if err != nil {
		b.mu.Unlock()
		return err
	}
	now := time.Now().UnixNano()
	var ended string
	if _, handed := b.leased[job]; s.state() == task.Reserved && handed {
		// A task still being taken (b.taking) has no lease out yet: the
		// reserve that takes it finds it gone and hands nothing out.
		ended = rec.Lease
		if service.Cancelling(ctx) {
			b.endAttemptLocked(&rec, task.AttemptCancelled, "", now)
		}
	}
	b.leaveLocked(&rec, service.FinishedOutcome(ctx), now)
	b.removeLocked(job, s, rec)
	fs := b.leaseEnds
	g := b.answerGroupLocked()
	b.mu.Unlock()
	if err := b.wait(ctx, g); err != nil {
		return err
	}
	if ended != "" {
		for _, f := range fs {
			f(ended)
		}
	}
	return nil
}

// NotifyLeaseEnds registers f, called with the lease of a reserved task
// once its Delete is durable (service.LeaseEnder), on the deleting
// goroutine. O(1); safe for concurrent use.
func (b *Broker) NotifyLeaseEnds(f func(lease string)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.leaseEnds = append(b.leaseEnds[:len(b.leaseEnds):len(b.leaseEnds)], f)
}

// removeLocked deletes job from memory and the record. b.mu must be held.
func (b *Broker) removeLocked(job uint64, s slot, rec store.Task) {
	b.unplaceLocked(job, s)
	b.tasks.del(job)
	b.writeTaskLocked(store.DeleteTask, rec)
}

// heldLocked returns job, record and slot of the task id of queue if lease
// is its current lease. b.mu must be held.
func (b *Broker) heldLocked(queue, id, lease string) (uint64, store.Task, slot, error) {
	if job, ok := leaseJob(lease); ok {
		// The lease names its task: when it is the current lease of that
		// task, nothing need be looked up.
		if rec, ok := b.leased[job]; ok && rec.Lease == lease && rec.ID == id && rec.Queue == queue {
			if s, ok := b.tasks.get(job); ok && s.state() == task.Reserved {
				if err := b.usableLocked(); err != nil {
					return 0, store.Task{}, slot{}, err
				}
				return job, rec, s, nil
			}
		}
	}
	job, rec, s, err := b.findLocked(queue, id)
	if err != nil {
		return 0, store.Task{}, slot{}, err
	}
	if s.state() != task.Reserved || rec.Lease != lease {
		return 0, store.Task{}, slot{}, task.ErrLease
	}
	return job, rec, s, nil
}

// AckMany completes each reserved task of acks: it is removed, durably,
// and never delivered again; the ack's lease must be its current lease
// (ErrLease otherwise: expired, or reserved again since). All under one
// hold of the broker's lock and in one group commit, and returns one error a task, in order
// (service.Engine). O(len(acks)).
func (b *Broker) AckMany(ctx context.Context, acks []task.Ack) ([]error, error) {
	errs := make([]error, len(acks))
	took := 0
	b.mu.Lock()
	now := time.Now().UnixNano()
	for i, a := range acks {
		job, rec, s, err := b.heldLocked(a.Queue, a.ID, a.Lease)
		if err != nil {
			errs[i] = err
			continue
		}
		b.endSettledLocked(ctx, &rec, task.AttemptAcked, "", now)
		b.leaveLocked(&rec, task.FinishedAcked, now)
		b.removeLocked(job, s, rec)
		b.queues[s.queue()].acks++
		took++
	}
	if took == 0 {
		b.mu.Unlock()
		return errs, nil
	}
	b.metrics.Acked(took)
	g := b.answerGroupLocked()
	b.mu.Unlock()
	if err := b.wait(ctx, g); err != nil {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
	}
	return errs, nil
}

// Kick makes the dead task id of queue ready again, or with o.Delayed a
// delayed one (ErrState if it is in another state; ErrNotFound if it is
// not of job o.Job). Its attempts are kept, so with max_attempts set it
// dies again at its next failure.
func (b *Broker) Kick(ctx context.Context, queue, id string, o service.KickOptions) error {
	b.mu.Lock()
	job, rec, s, err := b.findLocked(queue, id)
	switch {
	case err != nil:
	case o.Job != 0 && job != o.Job:
		err = task.ErrNotFound
	case s.state() != task.Dead && (!o.Delayed || s.state() != task.Delayed):
		err = fmt.Errorf("%w: task %q is %s, not dead", task.ErrState, id, s.state())
	}
	if err != nil {
		b.mu.Unlock()
		return err
	}
	b.kickJobLocked(job, s, rec)
	g := b.answerGroupLocked()
	b.mu.Unlock()
	return b.wait(ctx, g)
}

// kickJobLocked makes the dead or delayed job ready now. b.mu must be held.
func (b *Broker) kickJobLocked(job uint64, s slot, rec store.Task) {
	now := time.Now().UnixNano()
	b.unplaceLocked(job, s)
	b.queues[s.queue()].countLocked(0, s.state()) // unplace took it out; place moves it
	rec.State = store.Waiting
	rec.Kicks++
	if rec.Due > now {
		rec.Due = now
	}
	rec.Payload = nil
	b.writeTaskLocked(store.UpdateTask, rec)
	s.due = rec.Due
	b.placeLocked(job, s, b.queues[s.queue()], now, rec.Key)
}

// Queues returns every queue that holds tasks, is paused or has a
// policy, by name, with counts by state, counters since the broker
// opened, its pause and its policy; a name reservers only wait on is no
// queue. It takes O(queues) time.
func (b *Broker) Queues(ctx context.Context) ([]task.QueueStats, error) {
	b.mu.Lock()
	b.tidyLocked()
	out := make([]task.QueueStats, 0, b.real)
	now := time.Now().UnixNano()
	for _, q := range b.queues {
		if q == nil || q.delayed+q.readyN+q.reserved+q.dead == 0 && q.pausedUntil <= now && q.policy.IsZero() {
			continue
		}
		out = append(out, q.statsLocked(now))
	}
	b.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// statsLocked returns q's counts, counters, pause and policy at now. b.mu
// must be held.
func (q *queueState) statsLocked(now int64) task.QueueStats {
	st := task.QueueStats{
		Name: q.name, Delayed: q.delayed, Ready: q.readyN, Reserved: q.reserved, Dead: q.dead,
		Puts: q.puts, Deliveries: q.deliveries, Acks: q.acks,
		Policy: clonePolicy(q.policy),
	}
	if q.pausedUntil > now {
		st.PausedUntil = time.Unix(0, q.pausedUntil).UTC()
	}
	return st
}
