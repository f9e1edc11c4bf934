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

// The methods in this file name tasks by job id, as beanstalkd's protocol
// does (service.Jobs), with the semantics and errors of the embedded
// engine's methods of the same names (broker/jobs.go), so that package
// beanstalk serves either engine. As in ops.go, each write is one statement on the
// task's row, conditioned on its state (and lease); a statement that
// matches nothing answers task.ErrNotFound, as beanstalkd answers
// NOT_FOUND. A reservation is named by its lease, which the protocol
// adapter keeps per connection.
//
// Where a broker keeps counters in its memory, a node keeps them for what
// it served itself (QueueDetail's Puts, Deliveries, Acks and Waiting);
// the counts by state, pauses and the order of deaths are the database's,
// the same on every node.

// jobTimeout bounds the reads that take no context.
const jobTimeout = 30 * time.Second

// jobArg is job as a statement's argument; ok is false for an id no task
// can have (over the bigint range), which is not found.
func jobArg(job uint64) (int64, bool) { return int64(job), job <= 1<<63-1 }

// Next's statements: the first ready task in delivery order (priority,
// due time, job id) across keys, their turns aside, as service.Jobs.Peek
// says and the embedded engine answers (broker's peekFirst), the
// delayed tasks due soonest, the oldest deaths (deaths before migration
// 003 first, by job id), up to $2 of queue $1, with the columns %s.
const (
	sqlNextReady = `SELECT %s FROM hourglass_tasks WHERE queue = $1 AND state = 1 AND fire_at IS NULL
		ORDER BY ` + sqlDeliveryOrder + ` LIMIT least($2, 1)`
	sqlNextDelayed = `SELECT %s FROM hourglass_tasks WHERE queue = $1 AND state = 1 AND fire_at IS NOT NULL
		ORDER BY due, job_id LIMIT $2`
	sqlNextDead = `SELECT %s FROM hourglass_tasks WHERE queue = $1 AND state = 3
		ORDER BY died NULLS FIRST, job_id LIMIT $2`
)

// Next returns up to k tasks of queue in state st, without payloads
// (service.Engine): for task.Ready the next one Reserve would hand out
// (paused or not), for task.Delayed the soonest due, for task.Dead the
// oldest deaths. One indexed read of k rows.
func (n *Node) Next(ctx context.Context, queue string, st task.State, k int) ([]task.Task, error) {
	var q string
	switch st {
	case task.Ready:
		q = sqlNextReady
	case task.Delayed:
		q = sqlNextDelayed
	case task.Dead:
		q = sqlNextDead
	default:
		return nil, fmt.Errorf("%w: cannot peek %s tasks", task.ErrInvalid, st)
	}
	if err := n.Err(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, jobTimeout)
	defer cancel()
	rows, err := n.db.Query(ctx, fmt.Sprintf(q, listColumns), queue, k)
	if err != nil {
		return nil, dbErr(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (task.Task, error) {
		t, err := scanRow(r)
		v := t.view()
		v.Payload = nil
		return v, err
	})
	if err != nil {
		return nil, dbErr(err)
	}
	return out, nil
}

// ReserveJob reserves job if it is ready, delayed or dead, whatever its
// queue, and returns it with its lease; else task.ErrNotFound.
func (n *Node) ReserveJob(ctx context.Context, job uint64) (task.Task, error) {
	if err := n.Err(); err != nil {
		return task.Task{}, err
	}
	j, ok := jobArg(job)
	if !ok {
		return task.Task{}, task.ErrNotFound
	}
	var dbNow int64
	// A leasing call (giveback.go): if its answer is lost, the task is
	// given back, ready (as if its lease had run out at once, without
	// spending an attempt).
	rows, err := n.db.leaseQuery(ctx, n.giveBacks.callJob(j), `WITH now AS (SELECT hourglass_now() AS ns)
		UPDATE hourglass_tasks t SET state = 2, attempts = t.attempts + 1, lease = $2`+sqlLease+`,
			lease_until = now.ns + t.ttr, fire_at = now.ns + t.ttr, died = NULL, reserved = now.ns, tries = t.tries + 1, ready_at = NULL
		FROM now
		WHERE t.job_id = $1 AND t.state IN (1, 3)
		RETURNING `+returnTask+`, now.ns`, j)
	if err != nil {
		return task.Task{}, dbErr(err)
	}
	t, err := pgx.CollectExactlyOneRow(rows, func(r pgx.CollectableRow) (row, error) { return scanRow(r, &dbNow) })
	if errors.Is(err, pgx.ErrNoRows) {
		return task.Task{}, task.ErrNotFound
	}
	if err != nil {
		return task.Task{}, dbErr(err)
	}
	n.announce(job, t.leaseUntil, dbNow)
	n.counters.count(t.queue, func(c *counts) { c.deliveries++ })
	v := t.view()
	v.Lease = t.lease
	return v, nil
}

// pause stops queue from handing out tasks for d
// (task.PauseIndefinitely: until resumed; 0 ends a pause), on every node
// (SetQueue's Pause), and returns the queue's policy as recorded:
// reservers wait, puts go on. The pause is a row of hourglass_queues that
// the reserve statement checks, ending at service.PausedUntil of this
// node's reading of the database's clock; a reserver waiting on a paused
// queue looks again when the pause ends, and every waiting reserver of
// the queue, on every node, looks again at once.
func (n *Node) pause(ctx context.Context, queue string, d time.Duration) (task.Policy, error) {
	ctx, cancel := context.WithTimeout(ctx, jobTimeout)
	defer cancel()
	// The end is reckoned on the database's clock in the statement
	// (service.PausedUntil's rule: 0 resumes, saturating for
	// task.PauseIndefinitely), not from this node's estimate of it, which
	// is off by up to half a round trip.
	var p policyRow
	err := n.db.QueryRow(ctx, `INSERT INTO hourglass_queues AS q (queue, paused_until, pauses)
		VALUES ($1, CASE WHEN $2::bigint <= 0 THEN 0
			WHEN $2::bigint > 9223372036854775807 - hourglass_now() THEN 9223372036854775807
			ELSE hourglass_now() + $2::bigint END, 1)
		ON CONFLICT (queue) DO UPDATE SET paused_until = EXCLUDED.paused_until, pauses = q.pauses + 1
		RETURNING `+policyColumnsOf("q"),
		queue, int64(d)).Scan(p.dest()...)
	if err != nil {
		return task.Policy{}, dbErr(err)
	}
	n.lookAgain(queue)
	return p.policy(), nil
}

// Queue returns the detail of queue; a queue never used reports zeros.
// The counts by state, the urgent count (service.UrgentBelow), the pause and the policy are the
// database's (one read of the queue's tasks: O(tasks of the queue));
// Puts, Deliveries, Acks and Waiting count what this node served since
// it started.
func (n *Node) Queue(queue string) (task.QueueDetail, error) {
	if err := n.Err(); err != nil {
		return task.QueueDetail{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), jobTimeout)
	defer cancel()
	d := task.QueueDetail{QueueStats: task.QueueStats{Name: queue}}
	var left, until int64
	var p policyRow
	err := n.db.QueryRow(ctx, `SELECT c.*, coalesce(greatest(q.paused_until - hourglass_now(), 0), 0),
			CASE WHEN q.paused_until > hourglass_now() THEN q.paused_until ELSE 0 END, coalesce(q.pauses, 0),
			`+policyColumnsOf("q")+`
		FROM (SELECT
			count(*) FILTER (WHERE state = 1 AND fire_at IS NOT NULL),
			count(*) FILTER (WHERE state = 1 AND fire_at IS NULL),
			count(*) FILTER (WHERE state = 2),
			count(*) FILTER (WHERE state = 3),
			count(*) FILTER (WHERE state = 1 AND fire_at IS NULL AND priority < $2)
			FROM hourglass_tasks WHERE queue = $1) c
		LEFT JOIN hourglass_queues q ON q.queue = $1`, queue, int64(service.UrgentBelow)).Scan(
		append([]any{&d.Delayed, &d.Ready, &d.Reserved, &d.Dead, &d.Urgent, &left, &until, &d.Pauses}, p.dest()...)...)
	if err != nil {
		return task.QueueDetail{}, dbErr(err)
	}
	d.PauseLeft = time.Duration(left)
	if until > 0 {
		d.PausedUntil = time.Unix(0, until).UTC()
	}
	d.Policy = p.policy()
	n.counters.count(queue, func(c *counts) { d.Puts, d.Deliveries, d.Acks = c.puts, c.deliveries, c.acks })
	n.mu.Lock()
	if q := n.queues[queue]; q != nil {
		d.Waiting = q.Len()
	}
	n.mu.Unlock()
	return d, nil
}
