package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/store"
	"github.com/hourglass-go/hourglass/task"
)

// The methods in this file name tasks by job id, as beanstalkd's protocol
// does; a reservation is named by its lease, which the protocol adapter
// keeps per connection.

// jobLocked returns the record and slot of job. b.mu must be held.
func (b *Broker) jobLocked(job uint64) (store.Task, slot, error) {
	if err := b.usableLocked(); err != nil {
		return store.Task{}, slot{}, err
	}
	s, ok := b.tasks.get(job)
	if !ok {
		return store.Task{}, slot{}, task.ErrNotFound
	}
	rec, err := b.metaLocked(job)
	if err != nil {
		return store.Task{}, slot{}, err
	}
	return rec, s, nil
}

// withPayloadLocked returns rec with its payload, read from the store if
// meta left it out. b.mu must be held.
func (b *Broker) withPayloadLocked(rec store.Task) (store.Task, error) {
	if rec.Payload != nil {
		return rec, nil
	}
	full, err := b.recordLocked(rec.JobID)
	if err != nil {
		return store.Task{}, err
	}
	rec.Payload = full.Payload
	return rec, nil
}

// showLocked returns job as it is, payload included: Read by job id; the
// caller answers once what it shows is durable. b.mu must be held.
func (b *Broker) showLocked(job uint64) (task.Task, error) {
	rec, s, err := b.jobLocked(job)
	if err == nil {
		rec, err = b.withPayloadLocked(rec)
	}
	if err != nil {
		return task.Task{}, err
	}
	return view(rec, s), nil
}

// buryLocked records job as dead in memory and in q's buried list. b.mu
// must be held.
func (b *Broker) buryLocked(job uint64, s slot, q *queueState) {
	q.countLocked(s.state(), task.Dead)
	s.set(task.Dead)
	b.tasks.set(job, s)
	if len(q.buried) >= 64 && len(q.buried) > 2*q.dead {
		live := b.buriedJobsLocked(q, len(q.buried))
		copy(q.buried, live)
		clear(q.buried[len(live):])
		q.buried = q.buried[:len(live)]
		q.reburied = nil
	}
	q.buried = append(q.buried, job)
}

// unburyLocked notes that the dead job of q is leaving the dead state with
// its entry still in q's buried list (a kick, a reserve by job id, a
// delete): if it dies again, that entry is stale. b.mu must be held.
func (b *Broker) unburyLocked(job uint64, q *queueState) {
	if q.reburied == nil {
		q.reburied = map[uint64]int{}
	}
	q.reburied[job]++
}

// touchLocked renews job's lease and returns the task; the caller waits for
// the write. b.mu must be held.
func (b *Broker) touchLocked(job uint64, rec store.Task, s slot, lease string) task.Task {
	rec.LeaseUntil = time.Now().Add(rec.TTR).UnixNano()
	rec.Payload = nil
	b.writeTaskLocked(store.UpdateTask, rec)
	b.leased[job] = rec
	b.leases.Set(job, rec.TTR)
	if full, err := b.withPayloadLocked(rec); err == nil {
		rec = full
	}
	t := view(rec, s)
	t.Lease = lease
	return t
}

// buriedJobsLocked returns up to n of q's dead tasks, oldest death first:
// each at its last entry in q.buried, skipping those from before a kick
// (q.reburied). It takes O(n + the entries skipped). b.mu must be held.
func (b *Broker) buriedJobsLocked(q *queueState, n int) []uint64 {
	var out []uint64
	var stale map[uint64]int // q.reburied's counts left to skip
	seen := make(map[uint64]bool)
	for _, j := range q.buried {
		if len(out) == n {
			break
		}
		if k, ok := q.reburied[j]; ok {
			if stale == nil {
				stale = map[uint64]int{}
			}
			if _, ok := stale[j]; !ok {
				stale[j] = k
			}
			if stale[j] > 0 {
				stale[j]--
				continue
			}
		}
		if s, ok := b.tasks.get(j); ok && s.state() == task.Dead && s.queue() == q.index && !seen[j] {
			seen[j] = true
			out = append(out, j)
		}
	}
	return out
}

// delayedJobsLocked returns up to n of q's delayed tasks, soonest due
// first, by a scan of every live task. b.mu must be held.
func (b *Broker) delayedJobsLocked(q *queueState, n int) []uint64 {
	var h readyHeap // a max-heap by negated order would do; n is small
	b.tasks.each(func(j uint64, s slot) bool {
		if s.state() == task.Delayed && s.queue() == q.index {
			h.push(readyItem{due: s.due, job: j})
		}
		return true
	})
	var out []uint64
	for len(out) < n {
		it, ok := h.pop()
		if !ok {
			break
		}
		out = append(out, it.job)
	}
	return out
}

// ReserveJob reserves job if it is ready, delayed or dead, whatever its
// queue, and returns it with its lease; else ErrNotFound.
func (b *Broker) ReserveJob(ctx context.Context, job uint64) (task.Task, error) {
	b.mu.Lock()
	rec, s, err := b.jobLocked(job)
	if err == nil && s.state() == task.Reserved {
		err = task.ErrNotFound
	}
	if err == nil {
		rec, err = b.withPayloadLocked(rec)
	}
	if err != nil {
		b.mu.Unlock()
		return task.Task{}, err
	}
	q := b.queues[s.queue()]
	b.unplaceLocked(job, s)
	q.countLocked(0, task.Reserved)
	q.holdLocked(rec.Key)
	s.set(task.Reserved)
	b.tasks.set(job, s)
	t := b.leaseLocked(job, s, rec, time.Now())
	q.deliveries++
	g := b.answerGroupLocked()
	b.mu.Unlock()
	return t, b.wait(ctx, g)
}

// Next returns up to n tasks of queue in state st, without payloads
// (service.Engine): for task.Ready the first in delivery order across
// keys, their turns, the pause and the limits left aside (peekFirstLocked,
// as service.Jobs says and a cluster answers; one task whatever n); for
// task.Delayed the soonest due (a scan of every live task: O(live)), for
// task.Dead the oldest deaths.
func (b *Broker) Next(ctx context.Context, queue string, st task.State, n int) ([]task.Task, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.usableLocked(); err != nil {
		return nil, err
	}
	q, ok := b.byName[queue]
	if !ok {
		return nil, nil
	}
	var jobs []uint64
	switch st {
	case task.Ready:
		if it, ok := b.peekFirstLocked(q); ok {
			jobs = []uint64{it.job}
		}
	case task.Delayed:
		jobs = b.delayedJobsLocked(q, n)
	case task.Dead:
		jobs = b.buriedJobsLocked(q, n)
	default:
		return nil, fmt.Errorf("%w: cannot peek %s tasks", task.ErrInvalid, st)
	}
	out := make([]task.Task, 0, len(jobs))
	for _, job := range jobs {
		rec, err := b.metaLocked(job)
		if err != nil {
			return nil, err
		}
		rec.Payload = nil
		out = append(out, view(rec, b.tasks.at(job)))
	}
	return out, nil
}

// Queue returns the detail of queue; a queue never used reports zeros.
// It takes O(ready) time.
func (b *Broker) Queue(queue string) (task.QueueDetail, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	q, ok := b.byName[queue]
	if !ok {
		return task.QueueDetail{QueueStats: task.QueueStats{Name: queue}}, nil
	}
	now := time.Now().UnixNano()
	d := task.QueueDetail{
		QueueStats: q.statsLocked(now),
		Waiting:    q.waiters.Len(),
		Pauses:     q.pauses,
	}
	// The heap may hold stale entries of a task (made ready again since),
	// so each task is counted once.
	seen := make(map[uint64]bool)
	q.ready.each(func(it readyItem) {
		if s, ok := b.tasks.get(it.job); ok && s.state() == task.Ready && s.queue() == q.index && service.Urgent(s.prio) && !seen[it.job] {
			seen[it.job] = true
			d.Urgent++
		}
	})
	if left := q.pausedUntil - now; left > 0 {
		d.PauseLeft = time.Duration(left)
	}
	return d, nil
}
