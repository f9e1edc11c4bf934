package service

import (
	"time"

	"github.com/hourglass-go/hourglass/task"
)

// A dedupe window (task.Policy.Dedupe, issue 42): for that long after a
// task of a queue finishes (acked, dead, deleted), a put of its id into
// the queue answers the finished task (state task.Done, its outcome and
// when) and puts nothing; after it the id is free again. The rule is
// here once; each engine keeps a finished-id record per (queue, id),
// written in the same commit (or statement) that makes the task leave
// its queue, looked up by a put under the same lock (or in the same
// statement) that would create the task, and pruned once expired:
//
//   - A record is written when a task leaves a queue whose policy has a
//     window at that moment, and holds until Finished + that window
//     (DedupeUntil). It is the engine's own record, not the history's:
//     the history may be off (hourglass serve --history -1) or kept for
//     less than a window, and its retention is the server's, not the
//     queue's.
//   - A put of an id with no live task is deduped by the record while
//     the queue's policy still has a window and both the record's own
//     end and Finished + the current window are ahead (Dedupes): a
//     window shortened (or set to 0) applies at once to the records
//     already written; one lengthened applies to the tasks that finish
//     after it. What a put answers does not depend on when the pruner
//     last ran.
//   - A live task of the id wins: the put answers it as usual. A put
//     with replace set is deduped too (there is no live task to
//     replace), so a retried put never runs a finished task twice.
//
// A record costs, per finished id kept: on the embedded engine a key of
// the queue and id plus about 30 bytes of times, job id, attempts and
// outcome (and the last error), and a second key of the end time, queue
// and id that pruning walks; on a cluster a row of hourglass_dedupe with
// its primary key and its entry in the index on the end time. Nothing is
// kept in memory beyond the records of groups not yet committed.

// DedupeUntil returns the end of the record of a task of a queue with
// policy p that finished at finished: zero when p has no window and no
// record is kept.
func DedupeUntil(p task.Policy, finished time.Time) time.Time {
	if p.Dedupe <= 0 {
		return time.Time{}
	}
	return finished.Add(p.Dedupe)
}

// Dedupes reports whether a put at now of the id of f, a finished-id
// record that ends at until, into a queue whose policy is now p, is
// deduped: answered with f (DedupedTask) rather than put.
func Dedupes(p task.Policy, f task.Finished, until, now time.Time) bool {
	return p.Dedupe > 0 && now.Before(until) && now.Before(f.Finished.Add(p.Dedupe))
}

// DedupedTask returns the answer of a put deduped by f: the task that
// finished, in state task.Done, with its outcome and when it left.
func DedupedTask(f task.Finished) task.Task {
	return task.Task{
		ID:        f.ID,
		JobID:     f.JobID,
		Queue:     f.Queue,
		State:     task.Done,
		Attempts:  f.Attempts,
		LastError: f.LastError,
		Outcome:   f.Outcome,
		Finished:  f.Finished.UTC(),
	}
}
