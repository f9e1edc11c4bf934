package cluster

import "time"

// wholeFor is how long after a flush whose sqlFlushDue left jobs to
// sqlFlush the flushes run sqlFlush alone: leases ending, or tasks of a
// queue that uses keys falling due for waiters here, come in runs, and
// each flush of such a run would pay both statements.
const wholeFor = 100 * time.Millisecond

// sqlFlushDue is the common flush, of waiting tasks falling due, which a
// flush runs first (flushOn): sqlFlush's steps for waiting tasks alone,
// about two thirds of its cost in the server (BenchmarkFlush). The jobs
// it cannot flush (leases ending, see below) it leaves to sqlFlush, run
// next on those jobs only, in a transaction of its own:
//
//   - fence: sqlFlush's.
//   - waits: the queues of this node's waiting reservers ($5, each
//     taking $6), each looked up once: whether it uses keys (has rows in
//     hourglass_key_turns), and whether it is paused or limited.
//   - hand picks among the jobs $4 whose task, in a fenced-in partition,
//     is waiting and due by the database's clock, queue by queue, the
//     first in delivery order, as many as the waiters take, in queues
//     neither paused, limited nor keyed: sqlFlush's hand-over in a queue
//     without keys.
//   - fired updates the due waiting tasks of the jobs $4, found by
//     job_id = ANY($4), whose index scan locks them in job order as
//     sqlFlush's timers step does (two flushes whose jobs overlap wait
//     for each other in one order): reserved under a fresh lease (the
//     call's token $7 then the job id) for those handed, the others
//     ready, noting when (ready_at), in sqlFlush's words (sqlFiredSet).
//     The tasks of a keyed queue with a waiter here it leaves to
//     sqlFlush: a hand-over there follows the keys' round
//     (service.KeyCompare).
//
// It returns sqlFlush's rows of kinds 0 (a fenced-in partition), 1 (a
// task made ready: a = its timer's time, which for a waiting task is its
// due time), 2 (a waiting task not due after all: a = job, b = how long
// until it is) and 4 (a task handed), and one of kind 6 per job it left
// to sqlFlush (a = job): a task of the jobs named, in a fenced-in
// partition, with a timer, that is reserved (its lease's end), or due in
// a keyed queue with a waiter here. Linear in the jobs named: each is
// read by primary key by hand, fired and the report of the rest.
var sqlFlushDue = sqlFlushFence + `,
	waits AS MATERIALIZED (
		SELECT w.queue, w.lim,
			EXISTS (SELECT 1 FROM hourglass_key_turns u WHERE u.queue = w.queue) AS keyed,
			EXISTS (SELECT 1 FROM hourglass_queues p
				WHERE p.queue = w.queue AND (p.paused_until > now.ns OR p.limited)) AS held
		FROM unnest($5::text[], $6::int[]) AS w(queue, lim), now
	), hand AS MATERIALIZED (
		SELECT coalesce(array_agg(x.job_id) FILTER (WHERE x.rn <= x.lim), '{}') AS jobs,
			coalesce((SELECT array_agg(queue) FROM waits WHERE keyed), '{}') AS keyed
		FROM (
			SELECT t.job_id, w.lim, row_number() OVER (PARTITION BY t.queue ORDER BY ` + deliveryOrderOf("t") + `) AS rn
			FROM hourglass_tasks t JOIN waits w ON w.queue = t.queue, now
			WHERE cardinality($5::text[]) > 0 AND NOT w.keyed AND NOT w.held
				AND t.job_id = ANY($4::bigint[]) AND t.partition = ANY(ARRAY(SELECT partition FROM fence))
				AND t.state = 1 AND t.fire_at <= now.ns
		) x
	), fired AS (
		UPDATE hourglass_tasks t SET` + sqlFiredSet("t.job_id = ANY(h.jobs)", "false", "$7", "t.last_error") + `
		FROM now, hand h
		WHERE t.job_id = ANY($4::bigint[]) AND t.partition = ANY(ARRAY(SELECT partition FROM fence))
			AND t.state = 1 AND t.fire_at <= now.ns AND NOT t.queue = ANY(h.keyed)
		RETURNING ` + returnTask + `, t.job_id = ANY(h.jobs) AS handed
	)
	SELECT ` + zeroTask + `, 0, partition::bigint, 0::bigint, '' FROM fence
	UNION ALL
	SELECT job_id, queue, id, state, priority, due, fire_at, created, ttr, attempts, max_attempts, lease, lease_until,
		timeouts, releases, buries, kicks, CASE WHEN handed THEN payload ELSE ''::bytea END, partition, last_error,
		trace_parent, trace_state, task_key, CASE WHEN handed THEN 4 ELSE 1 END, due,
		CASE WHEN handed THEN now.ns ELSE job_id END, queue
	FROM fired, now
	UNION ALL
	SELECT ` + zeroTask + `, CASE WHEN t.state = 1 AND t.fire_at > now.ns THEN 2 ELSE 6 END, t.job_id,
		CASE WHEN t.state = 1 AND t.fire_at > now.ns THEN t.fire_at - now.ns ELSE 0 END, ''
	FROM hourglass_tasks t, now
	WHERE t.job_id = ANY($4::bigint[]) AND t.partition = ANY(ARRAY(SELECT partition FROM fence))
		AND t.fire_at IS NOT NULL AND t.job_id NOT IN (SELECT job_id FROM fired)`
