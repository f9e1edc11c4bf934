package broker

import (
	"context"
	"strconv"
	"time"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/store"
	"github.com/hourglass-go/hourglass/task"
)

// PutBatch puts each of rs into queue, in order, and answers once all are
// durable, with one commit for the lot (service.Engine): created is false
// when r.ID names a live task, which is returned unchanged (an idempotent
// put) or, with r.Replace, replaced by a new task with a new job id. A
// task due now or earlier is ready at once. Its input is checked by
// service.New; its errors are the store's or ErrClosed. It takes O(len(rs)) time plus
// the store's commit.
func (b *Broker) PutBatch(ctx context.Context, queue string, rs []task.PutRequest) []task.PutResult {
	res := make([]task.PutResult, len(rs))
	fail := func(err error) []task.PutResult {
		for i := range res {
			if res[i].Err == nil {
				res[i] = task.PutResult{Err: err}
			}
		}
		return res
	}
	if len(rs) == 0 {
		return res
	}
	now := time.Now()
	b.mu.Lock()
	if err := b.usableLocked(); err != nil {
		b.mu.Unlock()
		return fail(err)
	}
	q, err := b.queueForLocked(queue)
	if err != nil {
		b.mu.Unlock()
		return fail(err)
	}
	for i := range rs {
		res[i].Task, res[i].Created, res[i].Err = b.putLocked(q, &rs[i], service.Due(&rs[i], now), now.UnixNano())
	}
	g := b.answerGroupLocked()
	b.mu.Unlock()
	if err := b.wait(ctx, g); err != nil {
		for i := range res {
			if res[i].Err == nil {
				res[i] = task.PutResult{Err: err}
			}
		}
	}
	return res
}

// putLocked sequences one put. b.mu must be held.
func (b *Broker) putLocked(q *queueState, r *task.PutRequest, due, now int64) (task.Task, bool, error) {
	replaced := false
	if r.ID != "" {
		job, err := b.lookupLocked(q.name, r.ID)
		switch {
		case err == task.ErrNotFound:
			if t, ok, err := b.dedupedPutLocked(q, r.ID, now); err != nil || ok {
				return t, false, err
			}
		case err != nil:
			return task.Task{}, false, err
		case !r.Replace:
			rec, err := b.recordLocked(job)
			if err != nil {
				return task.Task{}, false, err
			}
			return view(rec, b.tasks.at(job)), false, nil
		default:
			rec, err := b.recordLocked(job)
			if err != nil {
				return task.Task{}, false, err
			}
			b.unplaceLocked(job, b.tasks.at(job))
			b.tasks.del(job)
			b.leaveHistoryLocked(&rec, task.FinishedDeleted, now) // the id stays live: no dedupe record
			b.writeTaskLocked(store.DeleteTask, rec)
			replaced = true
		}
	}
	job := b.nextJob
	b.nextJob++
	b.open.batch.NextJobID = b.nextJob
	id := r.ID
	if id == "" {
		var err error
		if id, err = b.generatedIDLocked(q.name, job); err != nil {
			return task.Task{}, false, err
		}
	} else {
		b.noteNumericLocked(q.name, id)
	}
	def := *r // the queue's policy fills what the put leaves out, then the server
	service.ApplyDefaults(&def, q.policy, b.cfg.DefaultTTR)
	rec := store.Task{
		JobID:       job,
		Queue:       q.name,
		ID:          id,
		State:       store.Waiting,
		Priority:    r.Priority,
		Due:         due,
		Created:     now,
		TTR:         def.TTR,
		MaxAttempts: uint32(def.MaxAttempts),
		Payload:     r.Payload,
		TraceParent: r.Trace.Parent,
		TraceState:  r.Trace.State,
		Key:         r.Key,
	}
	if rec.Payload == nil {
		rec.Payload = []byte{}
	}
	b.writeTaskLocked(store.PutTask, rec)
	s := slot{due: due, prio: r.Priority, qs: q.index << 3}
	b.placeLocked(job, s, q, now, r.Key)
	q.puts++
	b.metrics.Put(1)
	return view(rec, b.tasks.at(job)), !replaced, nil
}

// generatedIDLocked names a task put without an id: the first of
// service.GeneratedID's tries that no live task of the queue has (its job
// id in decimal, unless a client chose that id for another task of the
// queue), or service.NoFreeID. Which all-digit ids clients chose ahead of
// the job ids is kept in b.numeric, so that the common case reads nothing
// from the store. b.mu must be held.
func (b *Broker) generatedIDLocked(queue string, job uint64) (string, error) {
	id := service.GeneratedID(job, 0)
	k := qid{queue, id}
	if _, ok := b.numeric[k]; !ok {
		return id, nil
	}
	delete(b.numeric, k) // the job ids are past it now
	for try := range service.GeneratedIDTries {
		id = service.GeneratedID(job, try)
		if _, err := b.lookupLocked(queue, id); err == task.ErrNotFound {
			return id, nil
		} else if err != nil {
			return "", err
		}
	}
	return "", service.NoFreeID(job)
}

// noteNumericLocked records a client's id if it is all digits and could be
// a job id yet to come (see generatedIDLocked). b.mu must be held.
func (b *Broker) noteNumericLocked(queue, id string) {
	if id == "" || len(id) > 20 {
		return
	}
	for i := 0; i < len(id); i++ {
		if id[i] < '0' || id[i] > '9' {
			return
		}
	}
	if n, err := strconv.ParseUint(id, 10, 64); err == nil && n >= b.nextJob {
		b.numeric[qid{queue, id}] = struct{}{}
	}
}
