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

// FindTasks returns up to limit tasks of queue that f matches, in due
// order after after (service.Cursor), without payloads, and the cursor of
// the next page (zero when there is none). It walks the queue's due order
// in memory (dueOrder), at most service.FindScan tasks, findRead at a
// time under b.mu: the state and due bounds are matched there, from the
// slots; the others need the records, which it reads from the store with
// b.mu released (store.Records), at most findRecords a page, and matches
// under b.mu again against the overlay and the slots as they are then.
// O(FindScan + log n) in memory and O(findRecords) reads of the store at
// most, the lock held for one batch at a time.
func (b *Broker) FindTasks(ctx context.Context, queue string, f service.Filter, after service.Cursor, limit int) ([]task.Task, service.Cursor, error) {
	if d := unixNano(f.DueAfter); after.IsZero() || after.Due < d-1 {
		// Start at DueAfter (or 0): every task due before it is passed
		// over without a look.
		after = service.Cursor{Due: d - 1, Job: ^uint64(0)}
	}
	var out []task.Task
	var keys []dueKey
	var jobs []uint64
	budget, reads := service.FindScan, findRecords
	for budget > 0 && reads > 0 && len(out) < limit {
		if err := ctx.Err(); err != nil {
			return nil, service.Cursor{}, err
		}
		var done bool
		want := findRead
		if !recordFilter(f) {
			// Every task walk keeps matches: read only the page's.
			want = limit - len(out)
		}
		keys, after, done = b.walk(queue, f, after, min(budget, findRead), min(want, reads), keys[:0])
		budget -= findRead
		reads -= len(keys)
		jobs = jobs[:0]
		for _, k := range keys {
			jobs = append(jobs, k.job)
		}
		recs, err := b.st.Records(jobs)
		if err != nil {
			return nil, service.Cursor{}, b.storeErr(err)
		}
		for i := 0; i < len(recs) && len(out) < limit; i += task.MaxList {
			var n int
			out, n = b.match(queue, f, recs[i:min(i+task.MaxList, len(recs))], out, limit)
			if len(out) == limit {
				// The page is full at the n-th record: the next one starts
				// after it, even if the rest of this walk matches more.
				k := keys[i+n-1]
				return out, service.Cursor{Due: k.due, Job: k.job}, nil
			}
		}
		if done {
			return out, service.Cursor{}, nil
		}
	}
	return out, after, nil
}

// unixNano is t in Unix ns, 0 for the zero time (no bound).
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// findRead is the number of tasks FindTasks walks in memory under b.mu at
// a time.
const findRead = 5000

// findRecords bounds the records a page of FindTasks reads from the
// store, below service.FindScan: in due order the records are scattered
// through the store, so that each read costs a block of its own (a few
// µs: a read from the OS's cache and a decompression) where a walk in
// job id order read a block for tens of records. A filter on the state
// or the due time alone reads only the page's records; one on a record's
// field (recordFilter) answers at most this many tasks' worth a page.
const findRecords = service.FindScan / 4

// recordFilter reports whether f has a condition that only a task's
// record can answer (the others, state and due time, are in memory).
func recordFilter(f service.Filter) bool {
	return f.Error != "" || f.IDPrefix != "" || f.Key != "" || !f.CreatedAfter.IsZero() || !f.CreatedBefore.IsZero()
}

// walk appends to keys, under b.mu, the places of the tasks of queue
// after c in due order whose state and due time f matches, looking at up
// to n tasks and keeping up to want, and returns them, the cursor of the
// last task it looked at, and whether it reached the end of the queue
// (or of f's due bound).
func (b *Broker) walk(queue string, f service.Filter, c service.Cursor, n, want int, keys []dueKey) ([]dueKey, service.Cursor, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.byName[queue]
	if q == nil {
		return keys, c, true
	}
	seen := 0
	done := true
	b.tasks.order.after(q.index, c, unixNano(f.DueBefore), func(due int64, job uint64) bool {
		if seen == n || len(keys) == want {
			done = false
			return false
		}
		seen++
		c = service.Cursor{Due: due, Job: job}
		if f.State == 0 || b.tasks.at(job).state() == f.State {
			keys = append(keys, dueKey{due, job})
		}
		return true
	})
	return keys, c, done
}

// match appends to out the tasks of recs, records read for walk's places
// in due order, that f matches, up to limit, and returns out and how many
// of recs it looked at. A record whose task has gone, or left queue,
// since walk is passed over; one the overlay has newer is taken from
// there. It takes b.mu.
func (b *Broker) match(queue string, f service.Filter, recs []store.Task, out []task.Task, limit int) ([]task.Task, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, rec := range recs {
		if rec.JobID == 0 {
			continue // gone since walk
		}
		s, ok := b.tasks.get(rec.JobID)
		if !ok || (f.State != 0 && s.state() != f.State) {
			continue
		}
		if p, ok := b.over.tasks[rec.JobID]; ok && !p.gone {
			rec = p.t
			rec.Payload = nil
		}
		if rec.Queue != queue {
			continue // moved to another queue
		}
		if t := view(rec, s); f.Match(t) {
			out = append(out, t)
			if len(out) == limit {
				return out, i + 1
			}
		}
	}
	return out, len(recs)
}

// MoveTask moves job, a task of queue not reserved, into queue to,
// durably, keeping its id, job id, payload, priority, due time, attempts
// and state (service.Engine): one put of the whole record under its job
// id, which the store writes with the removal of its old index and list
// entries in one commit, so a crash leaves it in one queue or the other.
// The payload is read from the store: O(payload) besides the lookups.
func (b *Broker) MoveTask(ctx context.Context, queue string, job uint64, to string) error {
	b.mu.Lock()
	rec, s, err := b.jobLocked(job)
	if err == nil && rec.Queue != queue {
		err = task.ErrNotFound
	}
	if err == nil && s.state() == task.Reserved {
		err = fmt.Errorf("%w: task %q is reserved", task.ErrState, rec.ID)
	}
	var dq *queueState
	if err == nil {
		dq, err = b.queueForLocked(to)
	}
	if err == nil {
		if _, lerr := b.lookupLocked(to, rec.ID); lerr == nil {
			err = service.ErrClash
		} else if lerr != task.ErrNotFound {
			err = lerr
		}
	}
	if err == nil {
		rec, err = b.withPayloadLocked(rec)
	}
	if err != nil {
		b.mu.Unlock()
		return err
	}
	now := time.Now().UnixNano()
	st := s.state()
	b.unplaceLocked(job, s)
	old := qid{rec.Queue, rec.ID}
	rec.Queue = dq.name
	b.moveTaskLocked(old, rec)
	b.noteNumericLocked(dq.name, rec.ID)
	ns := slot{due: rec.Due, prio: s.prio, qs: dq.index << 3}
	if st == task.Dead {
		b.buryLocked(job, ns, dq)
	} else {
		b.placeLocked(job, ns, dq, now, rec.Key)
	}
	g := b.answerGroupLocked()
	b.mu.Unlock()
	return b.wait(ctx, g)
}
