package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// The methods in this file are a cluster node's part of the operator's
// console (service/bulk.go): a filtered page of a queue's tasks, and
// moving a task into another queue.

// sqlFindWindow finds the window of queue $1 that a page of FindTasks
// reads: the first $3 job ids above $2, their count and the last. An
// index-only range of the index on (queue, job_id).
const sqlFindWindow = `SELECT count(*), coalesce(max(job_id), 0) FROM (SELECT job_id FROM hourglass_tasks
	WHERE queue = $1 AND job_id > $2 ORDER BY job_id LIMIT $3) w`

// sqlFind is the page of FindTasks in the window ($2, $3] of queue $1:
// each filter given (” or 0 when not) in its condition, the state's in
// %s.
const sqlFind = `SELECT ` + "%s" + ` FROM hourglass_tasks
	WHERE queue = $1 AND job_id > $2 AND job_id <= $3 AND %s
		AND ($4::text = '' OR strpos(last_error, $4) > 0) AND ($5::text = '' OR starts_with(id, $5))
		AND ($6::bigint = 0 OR due >= $6) AND ($7::bigint = 0 OR due < $7)
		AND ($8::bigint = 0 OR created >= $8) AND ($9::bigint = 0 OR created < $9)
		AND ($11::text = '' OR task_key = $11)
	ORDER BY job_id LIMIT $10`

// FindTasks returns up to limit tasks of queue that f matches, by job id
// above after, without payloads, and the cursor for the next page (0 when
// there is none). Two statements over the index on (queue, job_id): the
// window of at most service.FindScan job ids above after, then the
// matching tasks in it; O(FindScan) rows at most whatever the queue's
// size.
func (n *Node) FindTasks(ctx context.Context, queue string, f service.Filter, after uint64, limit int) ([]task.Task, uint64, error) {
	if err := n.Err(); err != nil {
		return nil, 0, err
	}
	from, ok := jobArg(after)
	if !ok {
		return nil, 0, nil
	}
	var scanned, hi int64
	if err := n.db.QueryRow(ctx, sqlFindWindow, queue, from, service.FindScan).Scan(&scanned, &hi); err != nil {
		return nil, 0, dbErr(err)
	}
	if scanned == 0 {
		return nil, 0, nil
	}
	rows, err := n.db.Query(ctx, fmt.Sprintf(sqlFind, listColumns, stateWhere[f.State]), queue, from, hi,
		f.Error, f.IDPrefix, unixNano(f.DueAfter), unixNano(f.DueBefore),
		unixNano(f.CreatedAfter), unixNano(f.CreatedBefore), limit+1, f.Key)
	if err != nil {
		return nil, 0, dbErr(err)
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) { return scanRow(r) })
	if err != nil {
		return nil, 0, dbErr(err)
	}
	var next uint64
	switch {
	case len(got) > limit:
		got = got[:limit]
		next = uint64(got[limit-1].job)
	case scanned == service.FindScan:
		next = uint64(hi)
	}
	out := make([]task.Task, len(got))
	for i := range got {
		out[i] = got[i].view()
		out[i].Payload = nil
	}
	return out, next, nil
}

// unixNano is t in Unix ns, 0 for the zero time (no bound).
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// MoveTask moves job, a task of queue not reserved, into queue to,
// durably, keeping everything else of it (service.Engine): one UPDATE of
// its queue, which the unique (queue, id) refuses when to has a task of
// its id (service.ErrClash). A ready task moved wakes to's reservers.
func (n *Node) MoveTask(ctx context.Context, queue string, job uint64, to string) error {
	if err := n.Err(); err != nil {
		return err
	}
	j, ok := jobArg(job)
	if !ok {
		return task.ErrNotFound
	}
	var ready bool
	err := n.db.QueryRow(ctx, `UPDATE hourglass_tasks SET queue = $3
		WHERE job_id = $1 AND queue = $2 AND state <> 2
		RETURNING state = 1 AND fire_at IS NULL`, j, queue, to).Scan(&ready)
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe) && pe.Code == "23505":
		return service.ErrClash
	case err == pgx.ErrNoRows:
		var state int16
		err = n.db.QueryRow(ctx, `SELECT state FROM hourglass_tasks WHERE job_id = $1 AND queue = $2`, j, queue).Scan(&state)
		if err == pgx.ErrNoRows {
			return task.ErrNotFound
		}
		if err != nil {
			return dbErr(err)
		}
		return fmt.Errorf("%w: job %d is reserved", task.ErrState, job)
	case err != nil:
		return dbErr(err)
	}
	if ready {
		n.readied(to, 1)
	}
	return nil
}

// sqlKeyCounts counts the live tasks of queue $1 that are not dead by
// key and state: ready, reserved, delayed.
const sqlKeyCounts = `SELECT task_key, count(*) FILTER (WHERE state = 1 AND fire_at IS NULL),
		count(*) FILTER (WHERE state = 2), count(*) FILTER (WHERE state = 1 AND fire_at IS NOT NULL)
	FROM hourglass_tasks WHERE queue = $1 AND state IN (1, 2) GROUP BY task_key`

// KeyCounts counts the ready, reserved and delayed tasks of queue by key
// (service.Engine): one statement over the queue's tasks, O(n) for the
// queue's n tasks.
func (n *Node) KeyCounts(ctx context.Context, queue string) ([]task.KeyCount, error) {
	if err := n.Err(); err != nil {
		return nil, err
	}
	rows, err := n.db.Query(ctx, sqlKeyCounts, queue)
	if err != nil {
		return nil, dbErr(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (task.KeyCount, error) {
		var c task.KeyCount
		err := r.Scan(&c.Key, &c.Ready, &c.Reserved, &c.Delayed)
		return c, err
	})
	if err != nil {
		return nil, dbErr(err)
	}
	return out, nil
}
