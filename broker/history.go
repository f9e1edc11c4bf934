package broker

import (
	"context"
	"time"

	"github.com/hourglass-go/hourglass/internal/retry"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/store"
	"github.com/hourglass-go/hourglass/task"
)

// The history (service.History) is two kinds of store records, written
// by the operations that change a task, into the same group commit as the
// task's own write: a task's state and its history never disagree, and
// the history costs no fsync and no read of the store.
//
//   - store.Attempt, one per ended attempt, under the job id and N (its
//     number by reservation, see attemptN; the running attempt's start is
//     the record's Reserved, written by every reservation), the first
//     task.AttemptsKeptFirst and the last task.AttemptsKeptLast of a
//     task (putAttemptLocked), by endAttemptLocked, called before the end
//     raises the task's counters:
//     acked by AckMany (the front's Ack, and beanstalkd's delete of a
//     job reserved under the lease given); nacked by Settle (an ack or a
//     nack settling a push is pushed or push-failed, endSettledLocked);
//     released and buried by Settle;
//     expired by a lease that ran out (the lease wheel, or recovery). A
//     reservation whose caller went away before it was answered
//     (giveBack) is no attempt and writes none, nor does the Delete of a
//     reserved task, which ends an attempt without an answer.
//   - store.Finished, one each time a task leaves its queue, by leave,
//     numbered by histSeq (recovered with store.Store.HistorySeq): acked
//     (AckMany), dead (fail: its attempts used
//     up, or buried, dead in its queue or moved to a dead-letter queue,
//     recorded in the queue it left; a task whose record is damaged,
//     which dies in its queue), deleted (Delete,
//     a put that replaces a task, and a task that a dead-lettered task of
//     its id replaces: a job's attempts are pruned with its Finished
//     records, so a task that leaves without one would keep its attempts
//     for good). A task dead in its queue may leave it again later
//     (deleted, or acked after a kick): each time is a record, and the
//     newest answers for its id.
//
// With Config.History negative neither is written. The records are kept
// for Config.History after their task left: a retry.Pruner removes older
// ones, with the attempts of their jobs, through the committer (between
// groups), a batch at a time (startPruners).

// attemptN returns the number of rec's running attempt (1 for the
// first): every reservation answered counts, a released one included, as
// the cluster's tries do. It is not rec.Attempts, which a Release gives
// back. Every attempt of a live task that ended raised exactly one of
// the counters beanstalkd's stats-job shows: Releases (a nack or a
// release, Settle), Timeouts (a lease that ran out) or Buries (a bury,
// Settle); an ack or a delete ends the task. So the attempts that ended
// are their sum, and the number needs no field of its own. For example,
// a task released, then nacked, is in its third attempt: Releases 2.
func attemptN(rec *store.Task) uint32 { return rec.Releases + rec.Timeouts + rec.Buries + 1 }

// endAttemptLocked writes the record of rec's attempt ending now with
// outcome (a task.Attempt* outcome) and errText. rec is the record as it is
// when the attempt ends: its counters not yet raised nor its attempts given
// back by the end (attemptN, and the record's Attempt), in the queue it
// ran in, Reserved not changed. b.mu must be held.
func (b *Broker) endAttemptLocked(rec *store.Task, outcome, errText string, now int64) {
	b.putAttemptLocked(rec, outcome, errText, 0, now)
}

// endSettledLocked is endAttemptLocked of an Ack or a Nack made under ctx,
// outcome being task.AttemptAcked or task.AttemptNacked: the pusher's
// settlement of a push is recorded as pushed or push-failed, with the
// push's HTTP status (service.AttemptOutcome). b.mu must be held.
func (b *Broker) endSettledLocked(ctx context.Context, rec *store.Task, outcome, errText string, now int64) {
	outcome, status := service.AttemptOutcome(ctx, outcome)
	b.putAttemptLocked(rec, outcome, errText, status, now)
}

// putAttemptLocked is endAttemptLocked with the HTTP status of a push (0:
// none). Recording attempt n removes attempt n − task.AttemptsKeptLast when
// it is past the first task.AttemptsKeptFirst: attempts are numbered
// without gaps (attemptN), so a task keeps at most the sum of the two,
// at the cost of one delete in the same batch. b.mu must be held.
func (b *Broker) putAttemptLocked(rec *store.Task, outcome, errText string, status int, now int64) {
	if !b.keep {
		return
	}
	g := b.open
	n := attemptN(rec)
	g.batch.PutAttempt(store.Attempt{
		JobID:   rec.JobID,
		N:       n,
		Attempt: rec.Attempts,
		Queue:   rec.Queue,
		Started: rec.Reserved,
		Ended:   now,
		Outcome: outcome,
		Error:   errText,
		Status:  int32(status),
	})
	if n > task.AttemptsKeptFirst+task.AttemptsKeptLast {
		g.batch.DeleteAttempt(rec.JobID, n-task.AttemptsKeptLast)
	}
	b.last = g
	b.kickLocked()
}

// leaveLocked writes the record of rec leaving its queue now with outcome
// (a task.Finished* outcome), numbered after the last. b.mu must be held.
func (b *Broker) leaveLocked(rec *store.Task, outcome string, now int64) {
	b.noteFinishedLocked(rec, outcome, now)
	b.leaveHistoryLocked(rec, outcome, now)
}

// leaveHistoryLocked is leave without the finished-id record of a dedupe
// window: a task replaced by a put, whose id stays live. b.mu must be held.
func (b *Broker) leaveHistoryLocked(rec *store.Task, outcome string, now int64) {
	if !b.keep {
		return
	}
	b.histSeq++
	g := b.open
	g.batch.PutFinished(store.Finished{
		Seq:       b.histSeq,
		JobID:     rec.JobID,
		Queue:     rec.Queue,
		ID:        rec.ID,
		Outcome:   outcome,
		Finished:  now,
		Attempts:  rec.Attempts,
		LastError: rec.LastError,
	})
	b.last = g
	b.kickLocked()
}

// Attempts returns the attempts of the task id of queue, oldest first, at
// most the newest task.MaxAttemptsListed: for a live task its ended
// attempts and, while it is reserved, the running one (Started when its
// reservation began, no Ended nor Outcome); for a task no longer live,
// those of the newest task of that id to leave queue, while the history
// keeps it; task.ErrNotFound otherwise. What it answers is durable. It
// reads the store with b.mu released: one lookup, and the attempts of
// one job.
func (b *Broker) Attempts(ctx context.Context, queue, id string) ([]task.Attempt, error) {
	b.mu.Lock()
	if err := b.usableLocked(); err != nil {
		b.mu.Unlock()
		return nil, err
	}
	var running store.Task // the record of a reserved task
	job, err := b.lookupLocked(queue, id)
	switch {
	case err == task.ErrNotFound:
		job = 0
	case err != nil:
		b.mu.Unlock()
		return nil, err
	default:
		if s, ok := b.tasks.get(job); !ok {
			job = 0
		} else if rec, ok := b.leased[job]; ok && s.state() == task.Reserved {
			running = rec
		}
	}
	// What the store shows after the barrier includes every attempt
	// ended and every task left before this call.
	g := b.answerGroupLocked()
	b.mu.Unlock()
	if err := b.wait(ctx, g); err != nil {
		return nil, err
	}
	if job == 0 {
		f, err := b.st.LastFinished(queue, id)
		if err != nil {
			return nil, b.storeErr(err)
		}
		job = f.JobID
	}
	recs, err := b.st.Attempts(job)
	if err != nil {
		return nil, b.storeErr(err)
	}
	var run *task.Attempt
	if running.JobID != 0 {
		run = &task.Attempt{N: int(attemptN(&running)), Attempt: int(running.Attempts), Queue: running.Queue,
			Started: instant(running.Reserved)}
		if len(recs) > 0 {
			if a := recs[len(recs)-1]; a.N == attemptN(&running) && a.Started == running.Reserved {
				run = nil // it ended since
			}
		}
	}
	recs = recs[max(0, len(recs)-service.AttemptsToRead(run != nil)):]
	out := make([]task.Attempt, 0, len(recs))
	for _, a := range recs {
		out = append(out, task.Attempt{
			N:       int(a.N),
			Attempt: int(a.Attempt),
			Queue:   a.Queue,
			Started: instant(a.Started),
			Ended:   instant(a.Ended),
			Outcome: a.Outcome,
			Error:   a.Error,
			Status:  int(a.Status),
			Node:    a.Node,
		})
	}
	return service.ListAttempts(out, run), nil
}

// instant returns the time of ns (Unix ns), or the zero time for 0: the
// start of a reservation recorded before the history was (no Reserved).
func instant(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// FinishedTasks returns up to limit (1 to task.MaxList) tasks that left
// queue, newest first, that f matches (service.Engine), below the cursor
// after (0: from the newest), and the cursor of the next page: the last
// one's Seq when the page is full (0: none). What it answers is durable;
// it reads the store (store.Store.History, or LastFinished for f.ID) with
// b.mu released.
func (b *Broker) FinishedTasks(ctx context.Context, queue string, f service.FinishedFilter, after uint64, limit int) ([]task.Finished, uint64, error) {
	b.mu.Lock()
	if err := b.usableLocked(); err != nil {
		b.mu.Unlock()
		return nil, 0, err
	}
	g := b.answerGroupLocked()
	b.mu.Unlock()
	if err := b.wait(ctx, g); err != nil {
		return nil, 0, err
	}
	if f.ID != "" {
		return b.lastFinished(queue, f)
	}
	recs, err := b.st.History(queue, f.Outcome, after, limit)
	if err != nil {
		return nil, 0, b.storeErr(err)
	}
	out := make([]task.Finished, len(recs))
	for i, r := range recs {
		out[i] = finished(r)
	}
	var next uint64
	if len(recs) == limit {
		next = recs[len(recs)-1].Seq
	}
	return out, next, nil
}

// startPruners starts the broker's pruners (retry.Pruner, the loop
// both engines share): the history older than Config.History, with the
// attempts of its jobs (pruneHistory), and the finished-id records of
// dedupe windows that ended (pruneDeduped). shutdown stops them.
func (b *Broker) startPruners() {
	b.pruners = []*retry.Pruner{
		{What: "the history", Retention: max(b.cfg.History, 0), Prune: b.pruneHistory},
		{What: "the dedupe records", Prune: b.pruneDeduped},
	}
	for _, p := range b.pruners {
		p.Log = b.log
		p.Start()
	}
}

// pruneHistory is the primitive of the history's retry.Pruner: it
// removes up to max records of tasks that left more than age ago, with
// the attempts of their jobs (store.Store.PruneHistory), and returns how
// many (pruneBetween).
func (b *Broker) pruneHistory(_ context.Context, age time.Duration, max int) (int, error) {
	before := time.Now().Add(-age).UnixNano()
	return b.pruneBetween(func() (int, error) { return b.st.PruneHistory(before, max) })
}

// pruneBetween runs prune, a delete of up to a batch of records, on the
// committer goroutine between two groups: the store is written from one
// goroutine at a time, and the writes arriving meanwhile wait one batch.
// It does nothing, and answers 0, when the broker is shutting down or
// failed (its store may be broken; nothing is written any more).
func (b *Broker) pruneBetween(prune func() (int, error)) (n int, err error) {
	b.between(func() {
		b.mu.Lock()
		bad := b.failed != nil
		b.mu.Unlock()
		if !bad {
			n, err = prune()
		}
	})
	return n, err
}
