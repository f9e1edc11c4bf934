package broker

import (
	"context"
	"time"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/store"
	"github.com/hourglass-go/hourglass/task"
)

// A queue's dedupe window (the rule: service/dedupe.go) is kept as
// store.Deduped records, one per (queue, id), written by leave into the
// same group commit as the task's own write, whether the history is kept
// or not, when the queue's policy has a window at that moment. Until its
// group commits a record is in the overlay (b.over.deduped), so that a
// put sequenced after an ack under b.mu sees it: no put answered after
// the ack can create a second task. A put of an id with no live task
// reads the record (overlay, then one Get of the store) only when its
// queue has a window. dedupePruner removes the records past their end,
// a batch of retry.PruneBatch at a time, on the committer between groups.

// noteFinishedLocked writes the finished-id record of rec leaving its queue
// now with outcome, if its queue has a dedupe window. b.mu must be held.
func (b *Broker) noteFinishedLocked(rec *store.Task, outcome string, now int64) {
	q, ok := b.byName[rec.Queue]
	if !ok {
		return
	}
	until := service.DedupeUntil(q.policy, time.Unix(0, now))
	if until.IsZero() {
		return
	}
	d := store.Deduped{
		Queue:     rec.Queue,
		ID:        rec.ID,
		JobID:     rec.JobID,
		Outcome:   outcome,
		Finished:  now,
		Until:     until.UnixNano(),
		Attempts:  rec.Attempts,
		LastError: rec.LastError,
	}
	g := b.open
	g.batch.PutDeduped(d)
	k := qid{d.Queue, d.ID}
	b.over.deduped[k] = pendingDeduped{g, d}
	g.wrote.deduped = append(g.wrote.deduped, k)
	b.last = g
	b.kickLocked()
}

// dedupedPutLocked returns the answer of a put of id into q at now (Unix
// ns), when no task of id is live, if the queue's dedupe window answers it
// (service.Dedupes): ok is false when the put goes on. It reads nothing
// for a queue without a window. b.mu must be held.
func (b *Broker) dedupedPutLocked(q *queueState, id string, now int64) (t task.Task, ok bool, err error) {
	if q.policy.Dedupe <= 0 {
		return task.Task{}, false, nil
	}
	var d store.Deduped
	if p, found := b.over.deduped[qid{q.name, id}]; found {
		d = p.d
	} else if d, err = b.st.Deduped(q.name, id); err == store.ErrNotFound {
		return task.Task{}, false, nil
	} else if err != nil {
		return task.Task{}, false, err
	}
	f := task.Finished{
		ID:        d.ID,
		JobID:     d.JobID,
		Queue:     d.Queue,
		Outcome:   d.Outcome,
		Finished:  time.Unix(0, d.Finished).UTC(),
		Attempts:  int(d.Attempts),
		LastError: d.LastError,
	}
	if !service.Dedupes(q.policy, f, time.Unix(0, d.Until), time.Unix(0, now)) {
		return task.Task{}, false, nil
	}
	return service.DedupedTask(f), true, nil
}

// pruneDeduped is the primitive of the dedupe records' retry.Pruner:
// it removes up to max finished-id records whose window ended more than
// age ago (store.Store.PruneDeduped), and returns how many
// (pruneBetween).
func (b *Broker) pruneDeduped(_ context.Context, age time.Duration, max int) (int, error) {
	before := time.Now().Add(-age).UnixNano()
	return b.pruneBetween(func() (int, error) { return b.st.PruneDeduped(before, max) })
}
