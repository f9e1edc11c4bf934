package broker

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/hourglass-go/hourglass/store"
	"github.com/hourglass-go/hourglass/task"
)

// recover rebuilds memory from the store (see Open). Leases that ran out
// while the broker was down are settled as the lease wheel would have
// settled them, and those writes are committed before Open returns.
func (b *Broker) recover() error {
	start := time.Now()
	b.recent.readAhead = b.readAhead
	next, err := b.st.NextJobID()
	if err != nil {
		return fmt.Errorf("hourglass: recovery: %w", err)
	}
	if next == 0 {
		next = 1
	}
	seq, err := b.st.HistorySeq()
	if err != nil {
		return fmt.Errorf("hourglass: recovery: history: %w", err)
	}
	b.mu.Lock()
	b.nextJob = next
	b.histSeq = seq
	now := time.Now().UnixNano()
	if err := b.recoverQueuesLocked(now); err != nil {
		b.mu.Unlock()
		return fmt.Errorf("hourglass: recovery: queues: %w", err)
	}
	n := 0
	// Leases that ran out are settled after the scan: a dead-lettered
	// task reads its payload and replaces a task of its id in another
	// queue, which the scan may not have reached yet.
	var expired []store.Task
	// Dead tasks are buried after the scan, in the order they died (the
	// scan goes by job id), as a cluster node orders them.
	var dead []deadTask
	err = b.st.Recover(func(t store.Task) error {
		n++
		if t.JobID >= b.nextJob {
			b.nextJob = t.JobID + 1
		}
		q := b.queueLocked(t.Queue)
		b.noteNumericLocked(t.Queue, t.ID)
		s := slot{due: t.Due, prio: t.Priority, qs: q.index << 3}
		switch t.State {
		case store.Waiting:
			b.placeLocked(t.JobID, s, q, now, t.Key)
		case store.Reserved:
			if t.LeaseUntil > now {
				s.set(task.Reserved)
				q.countLocked(0, task.Reserved)
				q.holdLocked(t.Key)
				b.tasks.set(t.JobID, s)
				b.leased[t.JobID] = t
				b.leases.Set(t.JobID, time.Duration(t.LeaseUntil-now))
				return nil
			}
			s.set(task.Reserved)
			q.countLocked(0, task.Reserved)
			b.tasks.set(t.JobID, s)
			expired = append(expired, t)
		case store.Dead:
			dead = append(dead, deadTask{job: t.JobID, died: t.Reserved, s: s})
		default:
			return fmt.Errorf("%w: job %d has state %d", store.ErrCorrupt, t.JobID, t.State)
		}
		return nil
	})
	if err != nil {
		b.mu.Unlock()
		return fmt.Errorf("hourglass: recovery: %w", err)
	}
	slices.SortStableFunc(dead, func(a, b deadTask) int { return cmp.Compare(a.died, b.died) })
	for _, d := range dead {
		b.buryLocked(d.job, d.s, b.queues[d.s.queue()])
	}
	dead = nil
	for _, t := range expired {
		if s, ok := b.tasks.get(t.JobID); ok && s.state() == task.Reserved {
			b.expiredLocked(t.JobID, s, t, now) // else replaced by a dead-lettered task
		}
	}
	b.tasks.compact()
	schedules, err := b.recoverSchedulesLocked()
	if err != nil {
		b.mu.Unlock()
		return err
	}
	g := b.barrierLocked()
	b.mu.Unlock()
	if err := g.wait(); err != nil {
		return fmt.Errorf("hourglass: recovery: committing expired leases: %w", err)
	}
	// The occurrences missed while the broker was down that the misfire
	// rule keeps are put, and committed, before Open returns.
	b.runner.Sync(context.Background(), schedules)
	b.mu.Lock()
	g = b.barrierLocked()
	b.mu.Unlock()
	if err := g.wait(); err != nil {
		return fmt.Errorf("hourglass: recovery: committing missed occurrences: %w", err)
	}
	b.log.Info("hourglass: recovered", "tasks", n, "queues", len(b.queues),
		"schedules", len(b.schedules), "took", time.Since(start).String())
	return nil
}

// deadTask is a dead task found by Recover, buried once the scan is over.
type deadTask struct {
	job  uint64
	died int64 // store.Task.Reserved of a dead task
	s    slot  // not yet dead: bury counts it in
}
