package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// The history (service.History) is two tables of migration 006, written
// by the statements that change the tasks, in the same statement, so that
// a task's state and its history never disagree and no write costs a
// round trip more:
//
//   - hourglass_attempts: a row per ended attempt, by job id and N, with
//     its start (hourglass_tasks.reserved, written by every reservation),
//     its end and outcome, the error given and the node that ended it.
//     sqlSettle adds it for a nack, release, bury or a lease run out in a
//     queue with a policy, sqlFlush for the other leases run out, sqlAck
//     for an ack (and a beanstalkd delete of a reserved job) past attempt
//     attemptsInRow only: an ack's attempt is in the task's history row
//     (below). N is the task's tries (its
//     reservations, a given-back one included), not its attempts, which a
//     release gives back; the row's attempt and queue (migration 011) are
//     its attempts and queue while it ran, the number task.Attempt
//     answers, so that the records agree with the task's count.
//   - hourglass_history: a row per task that left its queue: acked (sqlAck,
//     beanstalkd's delete of a reserved job), dead (sqlSettle, sqlFlush: dead in its
//     queue or moved to a dead-letter queue) or deleted (Delete's
//     sqlDeleteOne, and a task of a dead-lettered task's id
//     already in the dead-letter queue, which sqlSettle deletes). The
//     row of an acked task carries the attempt that acked it (migration
//     018: its N, start, outcome, status and node; its end is the row's
//     finished, its number the row's attempts, its queue the row's), so
//     that an ack, the common end of a task, writes one row, not two:
//     Attempts reads it as a row of hourglass_attempts.
//
// Each statement takes a flag, keep (Options.History not negative):
// without it the inserts select nothing. The rows are kept for the
// retention: the node that owns partition 0 prunes (startPruners), so one node
// at a time, the next owner after a takeover.
//
// The running attempt is not a row: Attempts reads it from the task
// (reserved, tries), with no Node. An ended attempt's Node is the node
// that ended it (task.Attempt.Node): the node that handed it out is not
// recorded, which would take a column written by every reserve.

// sqlInsertAttempt and sqlInsertFinished begin the inserts of the
// history's two tables; the statements that end an attempt or a task
// follow them with their SELECT. An attempt already recorded under its
// job and N (none is, unless a reservation was given back by an older
// binary) is kept. Each SELECT ends with the attempt's number as the
// task's attempts count it and the queue it ran in (migration 011): the
// task's attempts and queue before the statement changes them.
// sqlInsertFinishedAttempt begins an insert of a history row that
// carries its task's last attempt (sqlAck): sqlInsertFinished's columns,
// then the attempt's N, start, outcome, status and node (NULL: none).
const (
	sqlInsertAttempt         = `INSERT INTO hourglass_attempts (job_id, n, started, ended, outcome, error, status, node, attempt, queue) `
	sqlAttemptDone           = ` ON CONFLICT (job_id, n) DO NOTHING`
	sqlInsertFinished        = `INSERT INTO hourglass_history (job_id, queue, id, outcome, finished, attempts, last_error) `
	sqlInsertFinishedAttempt = `INSERT INTO hourglass_history (job_id, queue, id, outcome, finished, attempts, last_error,
		attempt_n, attempt_started, attempt_outcome, attempt_status, attempt_node) `
)

// attemptsInRow is the last attempt (N) an ack records in its task's
// history row, task.AttemptsKeptFirst + task.AttemptsKeptLast: past it,
// recording attempt N removes attempt N - task.AttemptsKeptLast
// (migration 008's trigger on hourglass_attempts), so the ack writes a
// row of hourglass_attempts. TestAttemptsInRow checks the sum.
const attemptsInRow = "105"

// retention returns how long the history is kept, and whether it is
// kept at all (Options.History).
func (o *Options) retention() (time.Duration, bool) {
	switch {
	case o.History == 0:
		return task.DefaultHistory, true
	case o.History < 0:
		return 0, false
	}
	return o.History, true
}

// keep says whether the statements write the history.
func (n *Node) keep() bool {
	_, ok := n.opts.retention()
	return ok
}

// attemptColumns are the columns of hourglass_attempts that
// scanAttempt reads, in its order.
const attemptColumns = `n, started, ended, outcome, error, status, node, coalesce(attempt, n), coalesce(queue, '')`

// sqlAttempts reads the newest $2 attempt records of job $1, whose
// task's id is $3, oldest first: its rows of hourglass_attempts, and the
// attempt its acked history row carries (migration 018), unless a row of
// hourglass_attempts has its N (written by an older binary). A job keeps
// its id, so its history rows are a range of hourglass_history_id. Two
// reads by index.
const sqlAttempts = `SELECT * FROM (
		(SELECT ` + attemptColumns + ` FROM hourglass_attempts WHERE job_id = $1 ORDER BY n DESC LIMIT $2)
		UNION ALL
		SELECT h.attempt_n, h.attempt_started, h.finished, h.attempt_outcome, '', h.attempt_status, h.attempt_node, h.attempts, h.queue
		FROM hourglass_history h
		WHERE h.id = $3 AND h.job_id = $1 AND h.attempt_n IS NOT NULL
			AND NOT EXISTS (SELECT 1 FROM hourglass_attempts x WHERE x.job_id = $1 AND x.n = h.attempt_n)
		ORDER BY 1 DESC LIMIT $2) a
	ORDER BY 1`

// scanAttempt reads a row of attemptColumns.
func scanAttempt(r pgx.CollectableRow) (task.Attempt, error) {
	var a task.Attempt
	var n, started, ended, attempt int64
	var status int32
	if err := r.Scan(&n, &started, &ended, &a.Outcome, &a.Error, &status, &a.Node, &attempt, &a.Queue); err != nil {
		return a, err
	}
	a.N, a.Attempt, a.Status = int(n), int(attempt), int(status)
	a.Started, a.Ended = time.Unix(0, started).UTC(), time.Unix(0, ended).UTC()
	return a, nil
}

// Attempts returns the attempts of the task id of queue, oldest first,
// at most the newest task.MaxAttemptsListed: for a live task its ended
// attempts and, while it is reserved, the running one (Started when its
// reservation began, no Ended nor Outcome); for a task no longer live,
// those of its newest row in the queue's history (the newest task of
// that id to leave the queue), while kept; task.ErrNotFound otherwise.
// Two or three reads by index.
func (n *Node) Attempts(ctx context.Context, queue, id string) ([]task.Attempt, error) {
	if err := n.Err(); err != nil {
		return nil, err
	}
	var job, tries, reserved, attempts int64
	var state int16
	err := n.db.QueryRow(ctx, "SELECT job_id, state, tries, reserved, attempts FROM hourglass_tasks WHERE queue = $1 AND id = $2",
		queue, id).Scan(&job, &state, &tries, &reserved, &attempts)
	running := err == nil && state == 2
	if err == pgx.ErrNoRows {
		err = n.db.QueryRow(ctx, `SELECT job_id FROM hourglass_history WHERE id = $2 AND queue = $1
			ORDER BY seq DESC LIMIT 1`, queue, id).Scan(&job)
		if err == pgx.ErrNoRows {
			return nil, task.ErrNotFound
		}
	}
	if err != nil {
		return nil, dbErr(err)
	}
	limit := service.AttemptsToRead(running)
	rows, err := n.db.Query(ctx, sqlAttempts, job, limit, id)
	if err != nil {
		return nil, dbErr(err)
	}
	out, err := pgx.CollectRows(rows, scanAttempt)
	if err != nil {
		return nil, dbErr(err)
	}
	var run *task.Attempt
	if running {
		run = &task.Attempt{N: int(tries), Attempt: int(attempts), Queue: queue, Started: time.Unix(0, reserved).UTC()}
	}
	return service.ListAttempts(out, run), nil
}

// finishedColumns are the columns of hourglass_history that
// scanFinished reads, in its order.
const finishedColumns = `seq, job_id, queue, id, outcome, finished, attempts, last_error`

// sqlFinishedOutcome pages the history of queue $1 of outcome $2, newest
// first, below seq $3: one range of hourglass_history_outcome.
const sqlFinishedOutcome = `SELECT ` + finishedColumns + ` FROM hourglass_history
	WHERE queue = $1 AND outcome = $2 AND seq < $3 ORDER BY seq DESC LIMIT $4`

// sqlFinishedAny pages the history of queue $1 of every outcome: the
// first $4 of each outcome's range, merged.
var sqlFinishedAny = `SELECT * FROM (` +
	fmt.Sprintf(`(SELECT %s FROM hourglass_history WHERE queue = $1 AND outcome = '%s' AND seq < $2 ORDER BY seq DESC LIMIT $3)
		UNION ALL `, finishedColumns, task.FinishedAcked) +
	fmt.Sprintf(`(SELECT %s FROM hourglass_history WHERE queue = $1 AND outcome = '%s' AND seq < $2 ORDER BY seq DESC LIMIT $3)
		UNION ALL `, finishedColumns, task.FinishedDead) +
	fmt.Sprintf(`(SELECT %s FROM hourglass_history WHERE queue = $1 AND outcome = '%s' AND seq < $2 ORDER BY seq DESC LIMIT $3)
		UNION ALL `, finishedColumns, task.FinishedDeleted) +
	fmt.Sprintf(`(SELECT %s FROM hourglass_history WHERE queue = $1 AND outcome = '%s' AND seq < $2 ORDER BY seq DESC LIMIT $3)`,
		finishedColumns, task.FinishedCancelled) +
	`) h ORDER BY seq DESC LIMIT $3`

// FinishedTasks returns up to limit (1 to task.MaxList) tasks that left
// queue, newest first, that f matches (service.Engine; with f.ID
// lastFinished), below the cursor after (0: from the newest),
// and the cursor of the next page: the last one's sequence number when
// the page is full (0: none). One read: a range of an index, or three
// merged for any outcome.
func (n *Node) FinishedTasks(ctx context.Context, queue string, f service.FinishedFilter, after uint64, limit int) ([]task.Finished, uint64, error) {
	if err := n.Err(); err != nil {
		return nil, 0, err
	}
	if f.ID != "" {
		return n.lastFinished(ctx, queue, f)
	}
	outcome := f.Outcome
	below := int64(1<<63 - 1)
	if after > 0 && after <= 1<<63-1 {
		below = int64(after)
	}
	var rows pgx.Rows
	var err error
	if outcome == "" {
		rows, err = n.db.Query(ctx, sqlFinishedAny, queue, below, limit)
	} else {
		rows, err = n.db.Query(ctx, sqlFinishedOutcome, queue, outcome, below, limit)
	}
	if err != nil {
		return nil, 0, dbErr(err)
	}
	var last int64
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (task.Finished, error) {
		var f task.Finished
		var job, finished, attempts int64
		err := r.Scan(&last, &job, &f.Queue, &f.ID, &f.Outcome, &finished, &attempts, &f.LastError)
		f.JobID, f.Finished, f.Attempts = uint64(job), time.Unix(0, finished).UTC(), int(attempts)
		return f, err
	})
	if err != nil {
		return nil, 0, dbErr(err)
	}
	if out == nil {
		out = []task.Finished{}
	}
	var next uint64
	if len(out) == limit {
		next = uint64(last)
	}
	return out, next, nil
}
