package cluster

import (
	"context"
	"time"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// A queue's dedupe window (the rule: service/dedupe.go) is the column
// dedupe of its row in hourglass_queues and the table hourglass_dedupe
// (migration 013): one row per (queue, id) of a task that left a queue
// with a window, written by the statement that makes the task leave
// (sqlDedupeHead, in sqlAck, sqlDelete, sqlDeleteOne, sqlSettle and
// sqlFlush: the same places as the history's rows, whether the history
// is kept or not), so that the task's leaving and its record commit
// together. A put's INSERT (sqlInsert) skips an id whose row dedupes it
// (service.Dedupes in SQL: sqlDeduped); a put that inserted nothing and
// found no live task reads the row (dedupedOf) and answers it. A put
// whose statement starts after an ack committed, so any put sent after
// the ack was answered, sees the ack's row. The rows past their end are
// pruned by the node that owns partition 0 (startPruners), in batches of
// retry.PruneBatch, soonest end first (hourglass_dedupe_until). A row costs
// the queue, the id, seven numbers and the outcome (about 70 bytes
// beside the queue and id), and an entry in each of its two indexes.

// sqlDedupeHead and sqlDedupeTail enclose the rows, (job_id, queue, id,
// outcome, finished, attempts, last_error) of each task leaving, of the
// CTE ded of a statement that makes tasks leave their queues: it records
// those of queues with a window; one leaving a queue without a window
// writes nothing.
const (
	sqlDedupeHead = `ded AS (INSERT INTO hourglass_dedupe (queue, id, job_id, outcome, finished, until, attempts, last_error)
		SELECT r.queue, r.id, r.job_id, r.outcome, r.finished, r.finished + q.dedupe, r.attempts, r.last_error
		FROM (`
	sqlDedupeTail = `) r(job_id, queue, id, outcome, finished, attempts, last_error)
		JOIN hourglass_queues q ON q.queue = r.queue AND q.dedupe > 0
		ON CONFLICT (queue, id) DO UPDATE SET job_id = EXCLUDED.job_id, outcome = EXCLUDED.outcome,
			finished = EXCLUDED.finished, until = EXCLUDED.until, attempts = EXCLUDED.attempts,
			last_error = EXCLUDED.last_error)`
)

// sqlDeduped is the condition, in sqlInsert, that the id r.id of queue
// $1, whose window is pol.dedupe, is deduped at now.ns: service.Dedupes.
const sqlDeduped = `EXISTS (SELECT 1 FROM hourglass_dedupe x WHERE x.queue = $1 AND x.id = r.id
		AND pol.dedupe > 0 AND x.until > now.ns AND x.finished + pol.dedupe > now.ns)`

// sqlPruneDeduped deletes up to $2 rows of hourglass_dedupe that ended
// before the database's clock less $1 (0), soonest end first, and
// returns how many.
const sqlPruneDeduped = `WITH d AS (
		DELETE FROM hourglass_dedupe x USING (
			SELECT queue, id FROM hourglass_dedupe WHERE until < hourglass_now() - $1::bigint ORDER BY until LIMIT $2
		) o WHERE x.queue = o.queue AND x.id = o.id RETURNING 1)
	SELECT count(*) FROM d`

// dedupedOf returns the answers of puts of ids into queue that the
// queue's dedupe window answers now (service.Dedupes), by id: one read
// of hourglass_dedupe by its primary key.
func (n *Node) dedupedOf(ctx context.Context, db querier, queue string, ids []string) (map[string]task.Task, error) {
	rows, err := db.Query(ctx, `SELECT d.id, d.job_id, d.outcome, d.finished, d.until, d.attempts, d.last_error,
			coalesce(q.dedupe, 0), hourglass_now()
		FROM hourglass_dedupe d LEFT JOIN hourglass_queues q ON q.queue = d.queue
		WHERE d.queue = $1 AND d.id = ANY($2)`, queue, ids)
	if err != nil {
		return nil, dbErr(err)
	}
	defer rows.Close()
	out := map[string]task.Task{}
	for rows.Next() {
		f := task.Finished{Queue: queue}
		var job, finished, until, attempts, window, now int64
		if err := rows.Scan(&f.ID, &job, &f.Outcome, &finished, &until, &attempts, &f.LastError, &window, &now); err != nil {
			return nil, dbErr(err)
		}
		f.JobID, f.Finished, f.Attempts = uint64(job), time.Unix(0, finished).UTC(), int(attempts)
		if service.Dedupes(task.Policy{Dedupe: time.Duration(window)}, f, time.Unix(0, until), time.Unix(0, now)) {
			out[f.ID] = service.DedupedTask(f)
		}
	}
	return out, dbErr(rows.Err())
}
