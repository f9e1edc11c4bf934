package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/store"
	"github.com/hourglass-go/hourglass/task"
)

// The methods in this file are the embedded engine's part of the
// operator's console (service/bulk.go): a filtered page of a queue's
// tasks, and moving a task into another queue.

// FindTasks returns up to limit tasks of queue that f matches, by job id
// above after, without payloads, and the cursor for the next page (0 when
// there is none). It reads the queue's records from the store in job id
// order, at most service.FindScan of them, findRead at a time, and
// matches them task.MaxList at a time under b.mu: O(FindScan) time at
// most, the lock held for one batch of task.MaxList at a time.
func (b *Broker) FindTasks(ctx context.Context, queue string, f service.Filter, after uint64, limit int) ([]task.Task, uint64, error) {
	var out []task.Task
	budget := service.FindScan
	for budget > 0 && len(out) < limit {
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		recs, err := b.st.List(queue, after, min(budget, findRead))
		if err != nil {
			return nil, 0, b.storeErr(err)
		}
		if len(recs) == 0 {
			return out, 0, nil
		}
		budget -= len(recs)
		for len(recs) > 0 && len(out) < limit {
			n := min(len(recs), task.MaxList)
			out, after = b.match(queue, f, recs[:n], out, limit)
			recs = recs[n:]
		}
	}
	return out, after, nil
}

// findRead is the number of records FindTasks reads from the store at a
// time: one snapshot and one seek for many, matched task.MaxList at a
// time under b.mu.
const findRead = 5000

// match appends to out the tasks of recs, records of queue's list, that f
// matches, up to limit, and returns out and the job id of the last record
// it looked at. It takes b.mu.
func (b *Broker) match(queue string, f service.Filter, recs []store.Task, out []task.Task, limit int) ([]task.Task, uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var last uint64
	for _, rec := range recs {
		last = rec.JobID
		s, ok := b.tasks.get(rec.JobID)
		if !ok || (f.State != 0 && s.state() != f.State) {
			continue
		}
		if p, ok := b.over.tasks[rec.JobID]; ok && !p.gone {
			rec = p.t
			rec.Payload = nil
			if rec.Queue != queue {
				continue // moved to another queue, not yet committed
			}
		}
		if t := view(rec, s); f.Match(t) {
			out = append(out, t)
			if len(out) == limit {
				break
			}
		}
	}
	return out, last
}

// MoveTask moves job, a task of queue not reserved, into queue to,
// durably, keeping its id, job id, payload, priority, due time, attempts
// and state (service.Engine): one put of the whole record under its job
// id, which the store writes with the removal of its old index and list
// entries in one commit, so a crash leaves it in one queue or the other.
// The payload is read from the store: O(payload) besides the lookups.
func (b *Broker) MoveTask(ctx context.Context, queue string, job uint64, to string) error {
	b.mu.Lock()
	rec, s, err := b.job(job)
	if err == nil && rec.Queue != queue {
		err = task.ErrNotFound
	}
	if err == nil && s.state() == task.Reserved {
		err = fmt.Errorf("%w: task %q is reserved", task.ErrState, rec.ID)
	}
	var dq *queueState
	if err == nil {
		dq, err = b.queueFor(to)
	}
	if err == nil {
		if _, lerr := b.lookup(to, rec.ID); lerr == nil {
			err = service.ErrClash
		} else if lerr != task.ErrNotFound {
			err = lerr
		}
	}
	if err == nil {
		rec, err = b.withPayload(rec)
	}
	if err != nil {
		b.mu.Unlock()
		return err
	}
	now := time.Now().UnixNano()
	st := s.state()
	b.unplace(job, s)
	old := qid{rec.Queue, rec.ID}
	rec.Queue = dq.name
	b.moveTask(old, rec)
	b.noteNumeric(dq.name, rec.ID)
	ns := slot{due: rec.Due, prio: s.prio, qs: dq.index << 3}
	if st == task.Dead {
		b.bury(job, ns, dq)
	} else {
		b.place(job, ns, dq, now, rec.Key)
	}
	return b.commitWait(ctx, b.barrier())
}
