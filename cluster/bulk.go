package cluster

import (
	"context"
	"errors"
	"fmt"
	"math"
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
// reads: the first $4 tasks after the cursor ($2, $3) in due order, due
// before $5, their count and the place of the last. The queue's tasks in
// due order are two index ranges (migration 019), merged: those of
// hourglass_tasks_queue_due (every task but the reserved ones without a
// key) and the reserved tasks of the empty key in
// hourglass_tasks_key_reserved. Both are index-only ranges whose bounds
// are row comparisons, so that the index condition stops each range at
// $5 rather than a filter reading on to the end of the queue.
const sqlFindWindow = `SELECT count(*), coalesce((array_agg(due ORDER BY due DESC, job_id DESC))[1], 0),
		coalesce((array_agg(job_id ORDER BY due DESC, job_id DESC))[1], 0)
	FROM (SELECT due, job_id FROM (
		(SELECT due, job_id FROM hourglass_tasks
			WHERE queue = $1 AND ` + sqlDueIndexed + ` AND (due, job_id) > ($2, $3) AND (due, job_id) < ($5, 0)
			ORDER BY due, job_id LIMIT $4)
		UNION ALL
		(SELECT due, job_id FROM hourglass_tasks
			WHERE queue = $1 AND task_key = '' AND state = 2 AND (due, job_id) > ($2, $3) AND (due, job_id) < ($5, 0)
			ORDER BY due, job_id LIMIT $4)
	) u ORDER BY due, job_id LIMIT $4) w`

// sqlDueIndexed is the predicate of hourglass_tasks_queue_due (migration
// 019), written as the index's so that the planner knows a statement's
// rows are in it.
const sqlDueIndexed = `(state <> 2 OR task_key <> '')`

// sqlFind is the page of FindTasks in the window of queue $1 after
// ($2, $3) up to ($12, $13) in due order: each filter given (” or 0 when
// not) in its condition, the state's in %s. It reads the window's ranges
// of the two indexes sqlFindWindow reads, merged.
const sqlFind = `(SELECT ` + "%[1]s" + ` FROM hourglass_tasks
	WHERE queue = $1 AND ` + sqlDueIndexed + ` AND (due, job_id) > ($2, $3) AND (due, job_id) <= ($12, $13) AND ` + "%[2]s" + sqlFindFilters + `
	ORDER BY due, job_id LIMIT $10)
	UNION ALL
	(SELECT ` + "%[1]s" + ` FROM hourglass_tasks
	WHERE queue = $1 AND task_key = '' AND state = 2 AND (due, job_id) > ($2, $3) AND (due, job_id) <= ($12, $13) AND ` + "%[2]s" + sqlFindFilters + `
	ORDER BY due, job_id LIMIT $10)
	ORDER BY due, job_id LIMIT $10`

// sqlFindFilters are the conditions of FindTasks's filters in sqlFind.
const sqlFindFilters = `
		AND ($4::text = '' OR strpos(last_error, $4) > 0) AND ($5::text = '' OR starts_with(id, $5))
		AND ($6::bigint = 0 OR due >= $6) AND ($7::bigint = 0 OR due < $7)
		AND ($8::bigint = 0 OR created >= $8) AND ($9::bigint = 0 OR created < $9)
		AND ($11::text = '' OR task_key = $11)`

// findWindow bounds the rows a page of FindTasks reads, below
// service.FindScan: in due order a queue's rows are scattered through the
// table (it is written in job id order), so that each row of the window
// costs a heap page of its own where a window in job id order read a
// page for tens of rows.
const findWindow = service.FindScan / 4

// FindTasks returns up to limit tasks of queue that f matches, in due
// order after after (service.Cursor), without payloads, and the cursor of
// the next page (zero when there is none). Two statements over the
// indexes that hold a queue's tasks in due order (sqlFindWindow): the
// window of at most findWindow tasks after after (from DueAfter, when it
// is later), then the matching tasks in it; O(findWindow) rows at most
// whatever the queue's size.
func (n *Node) FindTasks(ctx context.Context, queue string, f service.Filter, after service.Cursor, limit int) ([]task.Task, service.Cursor, error) {
	if err := n.Err(); err != nil {
		return nil, service.Cursor{}, err
	}
	fromJob, ok := jobArg(after.Job)
	if !ok {
		return nil, service.Cursor{}, nil
	}
	fromDue := after.Due
	if d := unixNano(f.DueAfter); after.IsZero() || fromDue < d-1 {
		// Start at DueAfter (or 0): the window holds no task due before.
		fromDue, fromJob = d-1, 1<<63-1
	}
	var scanned, hiDue, hiJob int64
	before := int64(math.MaxInt64)
	if !f.DueBefore.IsZero() {
		before = f.DueBefore.UnixNano()
	}
	if err := n.db.QueryRow(ctx, sqlFindWindow, queue, fromDue, fromJob, findWindow, before).
		Scan(&scanned, &hiDue, &hiJob); err != nil {
		return nil, service.Cursor{}, dbErr(err)
	}
	if scanned == 0 {
		return nil, service.Cursor{}, nil
	}
	rows, err := n.db.Query(ctx, fmt.Sprintf(sqlFind, listColumns, stateWhere[f.State]), queue, fromDue, fromJob,
		f.Error, f.IDPrefix, unixNano(f.DueAfter), unixNano(f.DueBefore),
		unixNano(f.CreatedAfter), unixNano(f.CreatedBefore), limit+1, f.Key, hiDue, hiJob)
	if err != nil {
		return nil, service.Cursor{}, dbErr(err)
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) { return scanRow(r) })
	if err != nil {
		return nil, service.Cursor{}, dbErr(err)
	}
	var next service.Cursor
	switch {
	case len(got) > limit:
		got = got[:limit]
		last := got[limit-1].view()
		next = service.Cursor{Due: last.Due.UnixNano(), Job: last.JobID}
	case scanned == findWindow:
		next = service.Cursor{Due: hiDue, Job: uint64(hiJob)}
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
