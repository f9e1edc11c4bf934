package cluster

import "time"

// wholeFor is how long after a flush whose sqlFlushDue left jobs to
// sqlFlush the flushes run sqlFlush alone: leases ending, or tasks of a
// queue that uses keys falling due for waiters here, come in runs, and
// each flush of such a run would pay both statements.
const wholeFor = 100 * time.Millisecond

// sqlFlushDue is the common flush, of delayed tasks falling due: a
// statement about a third of sqlFlush's cost in the server, which a
// flush runs first (flushOn). Its steps are sqlFlush's for waiting
// tasks alone; a timer of a reserved task (its lease's end) it leaves to
// sqlFlush, run next on those jobs only, in its own transaction:
//
//   - fence: sqlFlush's.
//   - timers reads the tasks among the jobs $4 of those partitions that
//     have a timer, once, by primary key, and locks them in job order
//     (FOR NO KEY UPDATE), as sqlFlush does. A waiting task is due when
//     its time has come by the database's clock.
//     Those of a queue that uses keys (has rows in hourglass_key_turns)
//     and that this node has waiters on it leaves to sqlFlush too: a
//     hand-over there follows the keys' round (service.KeyCompare).
//   - hand picks among the due tasks, queue by queue, the first in
//     delivery order, as many as this node's waiting reservers take ($5
//     queues, $6 how many each), in queues not paused and without a rate
//     or concurrency limit, as sqlFlush's does in a queue without keys.
//   - fired makes the due tasks ready, or reserved with a fresh lease
//     (the call's token $7 then the job id) for those handed, noting
//     when each was made ready (ready_at), as sqlFlush does for a
//     waiting task.
//
// It returns sqlFlush's rows of kinds 0 (a fenced-in partition), 1 (a
// task made ready), 2 (a waiting task not due after all: a = job, b =
// how long until it is) and 4 (a task handed), and one of kind 6 per job
// it left to sqlFlush (a = job): a task of the jobs named, in a fenced-in
// partition, with a timer, that is reserved (its lease's end), or due in
// a queue that uses keys with a waiter here. Linear in the jobs named:
// each is read once by primary key, and again by the update.
var sqlFlushDue = `WITH fence AS MATERIALIZED (
		SELECT p.partition, set_config('synchronous_commit', 'off', true) FROM hourglass_partitions p
		JOIN unnest($2::int[], $3::bigint[]) AS m(partition, epoch) ON m.partition = p.partition
		WHERE p.owner = $1 AND p.epoch = m.epoch AND p.lease_until > clock_timestamp()
		ORDER BY p.partition FOR KEY SHARE OF p
	), now AS MATERIALIZED (SELECT hourglass_now() AS ns),
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
		UPDATE hourglass_tasks t SET
			state = CASE WHEN t.job_id = ANY(h.jobs) THEN 2 ELSE 1 END,
			died = NULL,
			attempts = t.attempts + CASE WHEN t.job_id = ANY(h.jobs) THEN 1 ELSE 0 END,
			lease = CASE WHEN t.job_id = ANY(h.jobs) THEN $7` + sqlLease + ` ELSE '' END,
			lease_until = CASE WHEN t.job_id = ANY(h.jobs) THEN now.ns + t.ttr ELSE 0 END,
			fire_at = CASE WHEN t.job_id = ANY(h.jobs) THEN now.ns + t.ttr END,
			reserved = CASE WHEN t.job_id = ANY(h.jobs) THEN now.ns ELSE t.reserved END,
			tries = t.tries + CASE WHEN t.job_id = ANY(h.jobs) THEN 1 ELSE 0 END,
			ready_at = CASE WHEN t.job_id = ANY(h.jobs) THEN NULL ELSE now.ns END
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
