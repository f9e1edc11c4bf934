package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// The operations on one task. Each is one statement on the task's row,
// conditioned on its state (and lease), so concurrent nodes serialise on
// the row's lock; none needs the partition's owner, who learns of new
// timers through announce. When the statement matches no row, a read
// tells the broker's errors apart.

// Read returns the task r names, by job id or by queue and id, payload
// included, or task.ErrNotFound (service.Engine). One read by a unique
// index, bounded by jobTimeout.
func (n *Node) Read(r service.TaskRef) (task.Task, error) {
	if err := n.Err(); err != nil {
		return task.Task{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), jobTimeout)
	defer cancel()
	var row pgx.Row
	if r.Job != 0 {
		j, ok := jobArg(r.Job)
		if !ok {
			return task.Task{}, task.ErrNotFound
		}
		row = n.db.QueryRow(ctx, "SELECT "+taskColumns+" FROM hourglass_tasks WHERE job_id = $1", j)
	} else {
		row = n.db.QueryRow(ctx, "SELECT "+taskColumns+" FROM hourglass_tasks WHERE queue = $1 AND id = $2", r.Queue, r.ID)
	}
	t, err := scanRow(row)
	if err == pgx.ErrNoRows {
		return task.Task{}, task.ErrNotFound
	}
	if err != nil {
		return task.Task{}, dbErr(err)
	}
	return t.view(), nil
}

// sqlDelete deletes the tasks of hourglass_tasks t matching a condition
// (%s), and with $1 (keep the history) records them as deleted
// (history.go), oldest death first (as the embedded engine, which takes
// a queue's dead tasks in the order they died), and where the second
// %s holds, their finished-id records of dedupe windows (dedupe.go). It
// returns how many. A reserved task's running attempt ends with no
// record.
const sqlDelete = `WITH gone AS (DELETE FROM hourglass_tasks t WHERE %s
		RETURNING t.job_id, t.queue, t.id, t.attempts, t.last_error, t.died),
	fin AS (` + sqlInsertFinished + `SELECT job_id, queue, id, '` + task.FinishedDeleted + `', hourglass_now(), attempts, last_error
		FROM gone WHERE $1 ORDER BY died NULLS FIRST, job_id),
	` + sqlDedupeHead + `SELECT job_id, queue, id, '` + task.FinishedDeleted + `', hourglass_now(), attempts, last_error FROM gone WHERE %s` + sqlDedupeTail + `
	SELECT count(*) FROM gone`

// sqlDeleteReplaced is sqlDelete of the task $3 of queue $2 for a put's
// replace, whose id stays live, so without a dedupe record. Delete and
// Cancel use sqlDeleteOne.
var sqlDeleteReplaced = fmt.Sprintf(sqlDelete, "t.queue = $2 AND t.id = $3", "false")

// sqlDeleteOne deletes the task $3 of queue $2 and, with $1 (keep the
// history), records it with the outcome $6, as its finished-id record of
// a dedupe window does where its queue has one; with $4 (a Cancel) a
// reserved task's running attempt ends as cancelled, recorded by the
// node $5; a task not of job $7 (0: any), or reserved with $8, stays.
// It returns how many it deleted (0 or 1) and the lease of a reserved
// one ("" otherwise).
const sqlDeleteOne = `WITH gone AS (DELETE FROM hourglass_tasks t WHERE t.queue = $2 AND t.id = $3
		AND ($7 = 0 OR t.job_id = $7) AND NOT ($8 AND t.state = 2)
		RETURNING t.job_id, t.queue, t.id, t.state, t.lease, t.tries, t.reserved, t.attempts, t.last_error),
	now AS (SELECT hourglass_now() AS ns WHERE $1),
	att AS (` + sqlInsertAttempt + `SELECT job_id, tries, reserved, now.ns, '` + task.AttemptCancelled + `', '', 0, $5, attempts, queue
		FROM gone, now WHERE $4 AND gone.state = 2` + sqlAttemptDone + `),
	fin AS (` + sqlInsertFinished + `SELECT job_id, queue, id, $6, now.ns, attempts, last_error FROM gone, now),
	` + sqlDedupeHead + `SELECT job_id, queue, id, $6::text, hourglass_now(), attempts, last_error FROM gone` + sqlDedupeTail + `
	SELECT count(*), coalesce(max(lease) FILTER (WHERE state = 2), '') FROM gone`

// Delete removes the task id of queue in whatever state, durably, or
// returns task.ErrNotFound; the task is in the history as deleted, or
// as cancelled under a Cancel's context (service.Cancelling), which
// also ends a reserved task's running attempt as cancelled. The lease of
// a reserved task deleted is reported to every node's NotifyLeaseEnds
// functions: this node's at once, the others' through chanReady. o
// narrows it (service.Engine): a task not of job o.Job is not found, a
// reserved one with o.Unreserved is task.ErrState.
func (n *Node) Delete(ctx context.Context, queue, id string, o service.DeleteOptions) error {
	if err := n.Err(); err != nil {
		return err
	}
	j, ok := jobArg(o.Job)
	if !ok {
		return task.ErrNotFound
	}
	var k int64
	var lease string
	err := n.db.QueryRow(ctx, sqlDeleteOne, n.keep(), queue, id, service.Cancelling(ctx), n.name, service.FinishedOutcome(ctx),
		j, o.Unreserved).Scan(&k, &lease)
	if err != nil {
		return dbErr(err)
	}
	if k == 0 && o == (service.DeleteOptions{}) {
		return task.ErrNotFound
	}
	if k == 0 {
		return n.whyNot(ctx, queue, id, o.Job, "")
	}
	n.slotFreed(queue)
	if lease != "" {
		n.leaseEnded(lease)
		n.notifications.cancelled(queue, lease)
	}
	return nil
}

// NotifyLeaseEnds registers f, called with the lease of a reserved task
// deleted on any node of the cluster (service.LeaseEnder): on the
// deleting goroutine when it is this node's, on the listener's when it
// is another's (a notification's round trip later). A notification lost
// with the listen connection loses its call. O(1); safe for concurrent
// use.
func (n *Node) NotifyLeaseEnds(f func(lease string)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.leaseEnds = append(n.leaseEnds[:len(n.leaseEnds):len(n.leaseEnds)], f)
}

// leaseEnded calls the functions NotifyLeaseEnds registered with lease.
func (n *Node) leaseEnded(lease string) {
	n.mu.Lock()
	fs := n.leaseEnds
	n.mu.Unlock()
	for _, f := range fs {
		f(lease)
	}
}

var _ service.LeaseEnder = (*Node)(nil)

// why tells why a statement on the task id of queue conditioned on its
// lease matched nothing: task.ErrNotFound or task.ErrLease.
func (n *Node) why(ctx context.Context, queue, id string) error {
	var state int16
	err := n.db.QueryRow(ctx, "SELECT state FROM hourglass_tasks WHERE queue = $1 AND id = $2", queue, id).Scan(&state)
	if err == pgx.ErrNoRows {
		return task.ErrNotFound
	}
	if err != nil {
		return dbErr(err)
	}
	return task.ErrLease
}

// whyNot tells why a statement on the task id of queue conditioned on
// its job id (0: any) and its state matched nothing: task.ErrNotFound
// if there is no such task or it is of another job, else task.ErrState
// saying its state, then what ("": nothing more).
func (n *Node) whyNot(ctx context.Context, queue, id string, job uint64, what string) error {
	t, err := scanRow(n.db.QueryRow(ctx, "SELECT "+listColumns+" FROM hourglass_tasks WHERE queue = $1 AND id = $2", queue, id))
	if err == pgx.ErrNoRows || (err == nil && job != 0 && uint64(t.job) != job) {
		return task.ErrNotFound
	}
	if err != nil {
		return dbErr(err)
	}
	return fmt.Errorf("%w: task %q is %s%s", task.ErrState, id, t.stateOf(), what)
}

// ack completes the reserved task id of queue: it is deleted, durably
// (the 204 follows the commit), and never delivered again. lease must be
// its current lease (task.ErrLease otherwise). Acks that arrive on
// this node together share one statement and one commit (n.acks).
func (n *Node) ack(ctx context.Context, queue, id, lease string) error {
	if err := n.Err(); err != nil {
		return err
	}
	outcome, status := service.AttemptOutcome(ctx, task.AttemptAcked)
	if err := n.acks.do(ackReq{queue, id, lease, outcome, int32(status)}); err != nil {
		if err == errNotHeld {
			return n.why(ctx, queue, id)
		}
		return err
	}
	n.counters.count(queue, func(c *counts) { c.acks++ })
	n.metrics.Acked(1)
	n.slotFreed(queue)
	return nil
}

// AckMany acks each of acks as ack does, in one statement (runAcks, so
// one commit), and returns one error a task, in order (service.Engine).
// A single ack is ack's, whose statement is shared with the acks that
// arrive on this node at the same time.
func (n *Node) AckMany(ctx context.Context, acks []task.Ack) ([]error, error) {
	if len(acks) == 1 {
		return []error{n.ack(ctx, acks[0].Queue, acks[0].ID, acks[0].Lease)}, nil
	}
	errs := make([]error, len(acks))
	if err := n.Err(); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs, nil
	}
	outcome, status := service.AttemptOutcome(ctx, task.AttemptAcked)
	cs := make([]call[ackReq], len(acks))
	calls := make([]*call[ackReq], len(acks))
	for i, a := range acks {
		cs[i].req = ackReq{a.Queue, a.ID, a.Lease, outcome, int32(status)}
		calls[i] = &cs[i]
	}
	n.runAcks(calls)
	// acked: the tasks this batch acked, by queue and id, and the index of
	// the call that did, so that a call refused before it is answered as
	// when the calls run one by one: the task was there, under another
	// lease.
	var acked map[[2]string]int
	for _, c := range calls {
		if c.err == errNotHeld {
			acked = make(map[[2]string]int, len(calls))
			break
		}
	}
	if acked != nil {
		for k, c := range calls {
			if c.err == nil {
				acked[[2]string{c.req.queue, c.req.id}] = k
			}
		}
	}
	for k, c := range calls {
		switch j, ok := acked[[2]string{c.req.queue, c.req.id}]; {
		case c.err == errNotHeld && ok && j > k:
			errs[k] = task.ErrLease
		case c.err == errNotHeld:
			errs[k] = n.why(ctx, c.req.queue, c.req.id)
		case c.err != nil:
			errs[k] = c.err
		default:
			n.counters.count(c.req.queue, func(c *counts) { c.acks++ })
			n.metrics.Acked(1)
			n.slotFreed(c.req.queue)
		}
	}
	return errs, nil
}

// ackReq is one Ack's task and lease, and the outcome and HTTP status
// its attempt is recorded with (service.AttemptOutcome: a push's, or
// acked).
type ackReq struct {
	queue, id, lease string
	outcome          string
	status           int32
}

// errNotHeld: the acked task was not found reserved under that lease.
var errNotHeld = errors.New("hourglass: task not held under that lease")

// runAcks deletes the tasks of calls that are reserved under their
// leases, in one statement (so one commit), and sets errNotHeld on the
// others: each is deleted by one call at most, as if the calls ran one
// by one.
func (n *Node) runAcks(calls []*call[ackReq]) {
	queues := make([]string, len(calls))
	ids := make([]string, len(calls))
	leases := make([]string, len(calls))
	outcomes := make([]string, len(calls))
	statuses := make([]int32, len(calls))
	for i, c := range calls {
		queues[i], ids[i], leases[i] = c.req.queue, c.req.id, c.req.lease
		outcomes[i], statuses[i] = c.req.outcome, c.req.status
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := n.db.Query(ctx, sqlAck, queues, ids, leases, n.keep(), n.name, outcomes, statuses)
	// ords: the places of the calls whose task was deleted, as the
	// statement names them (1-based); jobs: their jobs.
	var ords, jobs []int64
	if err == nil {
		ords, jobs = make([]int64, 0, len(calls)), make([]int64, 0, len(calls))
		var ord, job int64
		for rows.Next() {
			if err = rows.Scan(&ord, &job); err != nil {
				break
			}
			if ord < 1 || ord > int64(len(calls)) {
				err = fmt.Errorf("hourglass: ack: the database named task %d of %d", ord, len(calls))
				break
			}
			ords, jobs = append(ords, ord), append(jobs, job)
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	if err == nil {
		n.timers.disarm(jobs)
		n.notifications.cancelLater(jobs)
	}
	switch {
	case err != nil:
		for _, c := range calls {
			c.err = dbErr(err)
		}
	case len(ords) == len(calls):
		// A row a task deleted, and each call names one task: every
		// call deleted its own (no two name the same task), and each is
		// answered so without a look-up.
		for _, c := range calls {
			c.err = nil
		}
	default:
		// deleted: the requests whose task was deleted; of calls with
		// equal requests, the first is answered as the one that deleted
		// it.
		deleted := make(map[ackReq]bool, len(ords))
		for _, ord := range ords {
			deleted[calls[ord-1].req] = true
		}
		for _, c := range calls {
			if deleted[c.req] {
				delete(deleted, c.req)
				c.err = nil
			} else {
				c.err = errNotHeld
			}
		}
	}
}

// sqlAck deletes the tasks named by ($1[i], $2[i]) that are reserved
// under the lease $3[i], and returns the i (1-based) of each, and its
// job (whose lease's timer is then disarmed): numbers to read, where the
// task's names were four strings to allocate. With
// $4 (keep the history) it records the task as acked and, in the same
// row (migration 018), its attempt as ended by node $5 with the outcome
// $6[i] (acked, or a push's) and status $7[i], in the same statement (history.go): one insert more, no round trip. An
// attempt past the number attemptsInRow is a row of hourglass_attempts
// instead, whose trigger keeps the bound of migration 008. The dedupe
// windows' records (sqlDedupeHead) are written only after a test, run
// once (a one-time filter, uncorrelated), that a queue of $1 has a
// window: without it the join to hourglass_queues looked up the queue's
// row once per task acked (TestAck_DedupeLookupOnce).
const sqlAck = `WITH acked AS (
		DELETE FROM hourglass_tasks t
		USING unnest($1::text[], $2::text[], $3::text[], $6::text[], $7::int[]) WITH ORDINALITY AS a(queue, id, lease, outcome, status, ord)
		WHERE t.queue = a.queue AND t.id = a.id AND ` + sqlReservedByKey + ` AND t.lease = a.lease
		RETURNING t.job_id, t.queue, t.id, t.lease, t.tries, t.reserved, t.attempts, t.last_error, a.outcome, a.status, a.ord,
			t.tries <= ` + attemptsInRow + ` AS in_row
	), now AS (SELECT hourglass_now() AS ns WHERE $4),
	att AS (` + sqlInsertAttempt + `SELECT job_id, tries, reserved, now.ns, outcome, '', status, $5, attempts, queue
		FROM acked, now WHERE NOT in_row` + sqlAttemptDone + `
	), fin AS (` + sqlInsertFinishedAttempt + `SELECT job_id, queue, id, '` + task.FinishedAcked + `', now.ns, attempts, last_error,
			CASE WHEN in_row THEN tries END, CASE WHEN in_row THEN reserved END, CASE WHEN in_row THEN outcome END,
			CASE WHEN in_row THEN status END, CASE WHEN in_row THEN $5::text END
		FROM acked, now ORDER BY ord),
	` + sqlDedupeHead + `SELECT job_id, queue, id, '` + task.FinishedAcked + `', hourglass_now(), attempts, last_error FROM acked
		WHERE EXISTS (SELECT 1 FROM hourglass_queues w WHERE w.queue = ANY($1::text[]) AND w.dedupe > 0)` + sqlDedupeTail + `
	SELECT ord, job_id FROM acked`

// sqlReservedByKey is the condition that the task t is reserved, for a
// statement that finds t by its unique (queue, id): state + 0 = 2, which
// the partial index hourglass_tasks_key_reserved (queue, task_key, due,
// job_id) WHERE state = 2 (migrations 014, 019)
// cannot serve, so that the planner takes the unique index. With
// state = 2 it can take the partial index on statistics that lag a busy
// queue and walk every reserved task of the queue (and the dead entries
// of those acked since the last vacuum) for each task: O(reserved) an
// ack rather than one descent.
const sqlReservedByKey = `t.state + 0 = 2`

// touch renews the lease of the reserved task id of queue for another
// TTR from now (the database's clock) and returns the task: Settle of
// service.Renewed. The owner's timer for the old lease fires first,
// finds the lease running and is armed again for the new end: no
// announcement is needed. One statement.
func (n *Node) touch(ctx context.Context, queue, id, lease string) (task.Task, error) {
	if err := n.Err(); err != nil {
		return task.Task{}, err
	}
	t, err := scanRow(n.db.QueryRow(ctx, `WITH now AS (SELECT hourglass_now() AS ns)
		UPDATE hourglass_tasks t SET lease_until = now.ns + t.ttr, fire_at = now.ns + t.ttr FROM now
		WHERE t.queue = $1 AND t.id = $2 AND `+sqlReservedByKey+` AND t.lease = $3
		RETURNING `+taskColumns, queue, id, lease))
	if err == pgx.ErrNoRows {
		return task.Task{}, n.why(ctx, queue, id)
	}
	if err != nil {
		return task.Task{}, dbErr(err)
	}
	v := t.view()
	v.Lease = lease
	return v, nil
}

// Kick makes the dead task id of queue ready again, or with o.Delayed a
// delayed one (task.ErrState if it is in another state; task.ErrNotFound
// if it is not of job o.Job), keeping its attempts (service.Engine).
func (n *Node) Kick(ctx context.Context, queue, id string, o service.KickOptions) error {
	if err := n.Err(); err != nil {
		return err
	}
	j, ok := jobArg(o.Job)
	if !ok {
		return task.ErrNotFound
	}
	tag, err := n.db.Exec(ctx, `UPDATE hourglass_tasks SET state = 1, kicks = kicks + 1,
			due = least(due, hourglass_now()), fire_at = NULL, ready_at = hourglass_now()
		WHERE queue = $1 AND id = $2 AND ($3 = 0 OR job_id = $3)
			AND (state = 3 OR ($4 AND state = 1 AND fire_at IS NOT NULL))`, queue, id, j, o.Delayed)
	if err != nil {
		return dbErr(err)
	}
	if tag.RowsAffected() == 0 {
		return n.whyNot(ctx, queue, id, o.Job, ", not dead")
	}
	n.readied(queue, 1)
	return nil
}
