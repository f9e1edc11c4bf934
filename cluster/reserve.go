package cluster

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// sqlReserve takes up to $2 ready tasks of the queues $1 in delivery
// order (priority, due time, job id), when none of them uses keys (has
// rows in hourglass_key_turns; else it takes none, and says so by a row
// whose last column is -2: then sqlReserveFair takes them in turn across
// keys, issue 42). It skips rows other reservers hold
// and queues paused (hourglass_queues), and leases them for their TTR by
// the database's clock. One statement, so one transaction, which commits
// without waiting for the WAL flush (see Reserve): set_config(...,
// true) is SET LOCAL, read at the commit, and now is evaluated whenever a
// task is taken. Each queue is read in its own index order (the lateral
// subquery), so one queue of many ready tasks costs what it did alone;
// with several queues, rows locked in one and not taken stay locked only
// until the statement commits.
//
// It returns a row per task taken (the task's columns, the database's
// now, when a flush made it ready (ready_at, or NULL: at its due time),
// and NULL), or, when it took none, a row per paused queue of $1
// with job id 0 and how long its pause has left, in ns: a reserver
// waiting on a paused queue is woken by no one when the pause ends, so it
// looks again then. Queues with a rate or concurrency limit (the row's
// limited) it leaves out, and returns a row for each (job id 0, -1 in the
// last column): their tasks are taken under their rows' locks
// (limits.go).
//
// The update finds the tasks picked by their primary key through
// job_id = ANY(ARRAY(...)) as well as the join: the generic plan estimates
// LIMIT $2 at a tenth of the ready tasks, and with the table's statistics
// showing many (after an ANALYZE of 50,000 ready tasks or more) it joined
// picked to the whole table, by a sequential scan and a hash join or by
// a merge join along the whole primary key, at every reservation
// (TestReserve_PlanAfterAnalyze).
const sqlReserve = `WITH picked AS (
		SELECT c.job_id, c.ready_at FROM unnest($1::text[]) AS q(name)
		CROSS JOIN LATERAL (
			SELECT job_id, priority, due, ready_at FROM hourglass_tasks
			WHERE queue = q.name AND state = 1 AND fire_at IS NULL
				AND NOT EXISTS (SELECT 1 FROM hourglass_queues p
					WHERE p.queue = q.name AND (p.paused_until > hourglass_now() OR p.limited))
			ORDER BY ` + sqlDeliveryOrder + `
			LIMIT $2
			FOR UPDATE SKIP LOCKED
		) c
		WHERE NOT EXISTS (SELECT 1 FROM hourglass_key_turns u WHERE u.queue = ANY($1))
			AND (cardinality($1::text[]) = 1 OR NOT EXISTS (SELECT 1 FROM hourglass_queues l
				WHERE l.queue = ANY($1) AND l.limited))
		ORDER BY ` + sqlDeliveryOrder + `
		LIMIT $2
	), now AS (SELECT hourglass_now() AS ns, set_config('synchronous_commit', 'off', true)),
	taken AS (
		UPDATE hourglass_tasks t SET state = 2, attempts = t.attempts + 1,
			lease = $3` + sqlLease + `,
			lease_until = now.ns + t.ttr, fire_at = now.ns + t.ttr, reserved = now.ns, tries = t.tries + 1, ready_at = NULL
		FROM picked, now
		WHERE t.job_id = picked.job_id AND t.job_id = ANY(ARRAY(SELECT job_id FROM picked))
		RETURNING ` + returnTask + `, now.ns, picked.ready_at
	)
	SELECT *, NULL::bigint FROM taken
	UNION ALL
	SELECT 0::bigint, p.queue, '', 0::smallint, 0::bigint, 0::bigint, NULL::bigint, 0::bigint, 0::bigint, 0::bigint,
		0::bigint, '', 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint, ''::bytea, 0, '', '', '', '', 0::bigint, NULL::bigint,
		p.paused_until - hourglass_now()
	FROM hourglass_queues p
	WHERE p.queue = ANY($1) AND p.paused_until > hourglass_now() AND NOT EXISTS (SELECT 1 FROM taken)
	UNION ALL
	SELECT 0::bigint, p.queue, '', 0::smallint, 0::bigint, 0::bigint, NULL::bigint, 0::bigint, 0::bigint, 0::bigint,
		0::bigint, '', 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint, ''::bytea, 0, '', '', '', '', 0::bigint, NULL::bigint, -1::bigint
	FROM hourglass_queues p
	WHERE p.queue = ANY($1) AND p.limited
	UNION ALL
	SELECT 0::bigint, '', '', 0::smallint, 0::bigint, 0::bigint, NULL::bigint, 0::bigint, 0::bigint, 0::bigint,
		0::bigint, '', 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint, ''::bytea, 0, '', '', '', '', 0::bigint, NULL::bigint, -2::bigint
	WHERE EXISTS (SELECT 1 FROM hourglass_key_turns u WHERE u.queue = ANY($1))`

// sqlReserveFair is sqlReserve for queues that use keys (those with
// rows in hourglass_key_turns), in the order that service.KeyCompare's
// doc writes down for both engines (the rule lives there; this is its
// SQL). Of each queue it takes, in a cycle over the keys in the order of
// their names starting after the queue's cursor (hourglass_key_cursors,
// 017: the last key served; the key "" between the last key and the
// first, when the queue has a ready task of another key), the first
// ready task of each key that has one of the queue's first priority, up
// to $2 keys; then, only if that leaves $2 unfilled, the queue's first
// $2 tasks in delivery order to fill the rest. Over several queues the
// keys' tasks go first, by priority, then place in their queue's round
// (turn: the ordinal among the keys taken, not the walk's counter), due
// time and job id. The cursor moves to the last key served, one row
// write a reserve (sqlKeyCursor), whatever the number of keys: O($2)
// index descents and one write a reserve, besides the tasks' own
// updates. Its rows are sqlReserve's, without the last kind.
//
// The keys come from a walk of hourglass_tasks_key_ready (walkA: keys
// after the cursor; walkB: keys up to it), one index descent a key,
// that yields each key's first ready task; the walk reads at most
// 4 × $2 + 64 keys on either side, so that keys whose first task is of
// a lower priority or held by another reserve cost a bounded read (the
// fill then takes the queue's first tasks, of the first priority). The
// queue's first priority (best) is the first key's first task's, unless
// a ready task of a higher one exists: that probe of
// hourglass_tasks_ready reads only the entries ahead of that priority,
// not those of the tasks just taken at its head, which a probe of the
// queue's first ready task walked at every reserve until vacuumed. A
// key's first task is locked FOR UPDATE SKIP LOCKED by its primary key:
// a key whose first task another reserve holds is that reserve's, so
// reserves running at once serve the keys one after another's, and
// none waits for another but on the cursor's row at its commit. The
// cursor's order across nodes is the database's, so the round is the
// queue's whatever node reserves.
var sqlReserveFair = `WITH picked AS (
		SELECT c.job_id, c.ready_at, c.queue, c.task_key, c.rank, c.turn FROM unnest($1::text[]) AS q(name)
		CROSS JOIN LATERAL (
			WITH RECURSIVE run AS MATERIALIZED (
				SELECT NOT EXISTS (SELECT 1 FROM hourglass_queues p
						WHERE p.queue = q.name AND (p.paused_until > hourglass_now() OR p.limited)) AS ok,
					coalesce((SELECT kc.task_key FROM hourglass_key_cursors kc WHERE kc.queue = q.name), '') AS cur
			), walkA(task_key, priority, job_id, n) AS (
				(SELECT e.task_key, e.priority, e.job_id, 1 FROM hourglass_tasks e
					WHERE (SELECT ok FROM run) AND e.queue = q.name AND e.task_key > (SELECT cur FROM run) AND e.task_key <> ''
						AND e.state = 1 AND e.fire_at IS NULL
					ORDER BY e.task_key, ` + deliveryOrderOf("e") + ` LIMIT 1)
				UNION ALL
				SELECT x.task_key, x.priority, x.job_id, w.n + 1 FROM walkA w CROSS JOIN LATERAL (
					SELECT e.task_key, e.priority, e.job_id FROM hourglass_tasks e
					WHERE e.queue = q.name AND e.task_key > w.task_key AND e.task_key <> ''
						AND e.state = 1 AND e.fire_at IS NULL
					ORDER BY e.task_key, ` + deliveryOrderOf("e") + ` LIMIT 1) x
				WHERE w.n < 4 * $2 + 64
			), walkB(task_key, priority, job_id, n) AS (
				(SELECT e.task_key, e.priority, e.job_id, 2000001 FROM hourglass_tasks e
					WHERE (SELECT ok AND cur <> '' FROM run) AND e.queue = q.name AND e.task_key <> ''
						AND e.state = 1 AND e.fire_at IS NULL
					ORDER BY e.task_key, ` + deliveryOrderOf("e") + ` LIMIT 1)
				UNION ALL
				SELECT x.task_key, x.priority, x.job_id, w.n + 1 FROM walkB w, run CROSS JOIN LATERAL (
					SELECT e.task_key, e.priority, e.job_id FROM hourglass_tasks e
					WHERE e.queue = q.name AND e.task_key > w.task_key AND e.task_key <> ''
						AND e.state = 1 AND e.fire_at IS NULL
					ORDER BY e.task_key, ` + deliveryOrderOf("e") + ` LIMIT 1) x
				WHERE w.n < 2000000 + 4 * $2 + 64 AND x.task_key <= run.cur
			), walk AS (
				SELECT * FROM walkA
				UNION ALL
				SELECT '', e.priority, e.job_id, 1000000 FROM run CROSS JOIN LATERAL (
					SELECT e.priority, e.job_id FROM hourglass_tasks e
					WHERE run.ok AND e.queue = q.name AND e.task_key = '' AND e.state = 1 AND e.fire_at IS NULL
						AND (EXISTS (SELECT 1 FROM walkA) OR EXISTS (SELECT 1 FROM walkB))
					ORDER BY ` + deliveryOrderOf("e") + ` LIMIT 1) e
				UNION ALL
				SELECT * FROM walkB WHERE walkB.task_key <= (SELECT cur FROM run)
			), best AS MATERIALIZED (
				SELECT coalesce((SELECT b.priority FROM hourglass_tasks b
						WHERE b.queue = q.name AND b.state = 1 AND b.fire_at IS NULL AND b.priority < p0.priority
						ORDER BY ` + deliveryOrderOf("b") + ` LIMIT 1), p0.priority) AS priority
				FROM (SELECT priority FROM walk LIMIT 1) p0
			), keyed AS MATERIALIZED (
				SELECT t.job_id, t.priority, t.due, t.ready_at, t.queue, t.task_key, 0 AS rank, w.n AS turn
				FROM walk w CROSS JOIN LATERAL (
					SELECT job_id, priority, due, ready_at, queue, task_key FROM hourglass_tasks
					WHERE job_id = w.job_id AND state = 1 AND fire_at IS NULL
					FOR UPDATE SKIP LOCKED) t
				WHERE w.priority = (SELECT priority FROM best)
				LIMIT $2
			)
			SELECT DISTINCT ON (u.job_id) u.* FROM (
				SELECT k.job_id, k.priority, k.due, k.ready_at, k.queue, k.task_key, k.rank,
					row_number() OVER (ORDER BY k.turn) AS turn FROM keyed k
				UNION ALL
				SELECT g.job_id, g.priority, g.due, g.ready_at, g.queue, g.task_key, 1, 0 FROM (
					SELECT job_id, priority, due, ready_at, queue, task_key FROM hourglass_tasks
					WHERE queue = q.name AND state = 1 AND fire_at IS NULL
						AND (SELECT count(*) FROM keyed) < $2
						AND NOT EXISTS (SELECT 1 FROM hourglass_queues p
							WHERE p.queue = q.name AND (p.paused_until > hourglass_now() OR p.limited))
					ORDER BY ` + sqlDeliveryOrder + `
					LIMIT $2
					FOR UPDATE SKIP LOCKED
				) g
			) u
			ORDER BY u.job_id, u.rank
		) c
		WHERE (cardinality($1::text[]) = 1 OR NOT EXISTS (SELECT 1 FROM hourglass_queues l
				WHERE l.queue = ANY($1) AND l.limited))
		ORDER BY c.rank, c.priority, c.turn, c.due, c.job_id
		LIMIT $2
	), now AS (SELECT hourglass_now() AS ns, set_config('synchronous_commit', 'off', true)),
	taken AS (
		UPDATE hourglass_tasks t SET state = 2, attempts = t.attempts + 1,
			lease = $3` + sqlLease + `,
			lease_until = now.ns + t.ttr, fire_at = now.ns + t.ttr, reserved = now.ns, tries = t.tries + 1, ready_at = NULL
		FROM picked, now
		WHERE t.job_id = picked.job_id
		RETURNING ` + returnTask + `, now.ns, picked.ready_at
	), moved AS (
		SELECT DISTINCT ON (queue) queue, task_key FROM picked WHERE rank = 0 ORDER BY queue, turn DESC
	), ` + sqlKeyCursor + `
	SELECT *, NULL::bigint FROM taken
	UNION ALL
	SELECT 0::bigint, p.queue, '', 0::smallint, 0::bigint, 0::bigint, NULL::bigint, 0::bigint, 0::bigint, 0::bigint,
		0::bigint, '', 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint, ''::bytea, 0, '', '', '', '', 0::bigint, NULL::bigint,
		p.paused_until - hourglass_now()
	FROM hourglass_queues p
	WHERE p.queue = ANY($1) AND p.paused_until > hourglass_now() AND NOT EXISTS (SELECT 1 FROM taken)
	UNION ALL
	SELECT 0::bigint, p.queue, '', 0::smallint, 0::bigint, 0::bigint, NULL::bigint, 0::bigint, 0::bigint, 0::bigint,
		0::bigint, '', 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint, ''::bytea, 0, '', '', '', '', 0::bigint, NULL::bigint, -1::bigint
	FROM hourglass_queues p
	WHERE p.queue = ANY($1) AND p.limited`

// sqlKeyCursor is the CTE that moves the cursors of queues that use keys
// (hourglass_key_cursors) to the keys of the CTE moved (queue, task_key:
// the last key served of each queue, in the round's order), which the
// statement defines before it: one row write a queue. A reserve running
// at the same time waits for the row at its own write, for the other's
// commit, and then writes its own key, which comes after the other's
// in the round (the other held the keys before it). Taken last in the
// statement (no CTE reads it), so the row is held only while the
// statement ends and commits.
const sqlKeyCursor = `cursored AS (
		INSERT INTO hourglass_key_cursors AS kc (queue, task_key)
		SELECT queue, task_key FROM moved
		ON CONFLICT (queue) DO UPDATE SET task_key = excluded.task_key
	)`

// sqlTurn gives the keys of the tasks taken (the CTE taken, with queue
// and task_key) the next turns, behind every other key of their queues:
// a key's row is made if it has none (a key moved in, say), but the key
// "" gets one only in a queue that uses keys, so that a queue without
// them writes nothing. Under the queue's row lock (limits.go), so no
// other reserve of the queue writes the rows meanwhile.
const sqlTurn = `INSERT INTO hourglass_key_turns AS kt (queue, task_key, turn, seen)
		SELECT s.queue, s.task_key, nextval('hourglass_key_turn'), hourglass_now()
		FROM (SELECT DISTINCT queue, task_key FROM taken) s
		WHERE s.task_key <> '' OR EXISTS (SELECT 1 FROM hourglass_key_turns x WHERE x.queue = s.queue)
		ON CONFLICT (queue, task_key) DO UPDATE SET turn = excluded.turn, seen = excluded.seen`

// sqlLease, written after the statement's parameter that holds the call
// token (newLeaseToken), as in "lease = $3" + sqlLease, is the lease of
// the row t: the token then the job id in hex, as the embedded engine's
// leases are (broker's newLease). Every lease one call makes starts with
// its token, so that what a call whose answer was lost may have leased
// is found again without its answer (giveback.go).
const sqlLease = `::text || to_hex(t.job_id)`

// returnTask is taskColumns of the row t, for RETURNING.
const returnTask = `t.job_id, t.queue, t.id, t.state, t.priority, t.due, t.fire_at, t.created, t.ttr, t.attempts,
		t.max_attempts, t.lease, t.lease_until, t.timeouts, t.releases, t.buries, t.kicks, t.payload, t.partition,
		t.last_error, coalesce(t.trace_parent, '') AS trace_parent, coalesce(t.trace_state, '') AS trace_state, t.task_key`

// ReserveQueues hands out up to max ready tasks of queues, from any partition,
// in priority order, then due time, then job id (in turn across keys in
// a queue that uses them, sqlReserveFair), each leased for its TTR,
// as the embedded engine (ReserveQueues) does. When none is ready it waits up to wait
// for the first one: the node listens to chanReady, where the owners
// announce the tasks they make ready, queue by queue (notifications.go),
// and looks again when woken.
// Every task it hands out is durable (its put committed); the
// reservation itself commits without waiting for the WAL flush
// (synchronous_commit off), as the broker commits a reservation with its
// next group without waiting: a database crash within that flush makes
// the task ready again as if its lease had run out (an ack under the lost
// lease fails; an ack that committed flushed the reservation before it).
// A paused queue (PauseQueue)
// hands out nothing until its pause ends, and a queue's rate and
// concurrency limits hold across every node (limits.go): a reserve that
// meets them waits within its wait.
func (n *Node) ReserveQueues(ctx context.Context, queues []string, max int, wait time.Duration) ([]task.Task, error) {
	return n.reserve(ctx, queues, max, wait)
}

// reserve is Reserve over several queues: service.LongPoll over the
// node's look (poller.Look). A waiting reserver is on the waiting list of
// each of its queues; a task made ready in any of them wakes it. A
// reserver waiting on one queue may instead be handed tasks that the
// owner's flush reserved for it in the statement that made them ready
// (see timers.flush), a round trip sooner.
func (n *Node) reserve(ctx context.Context, queues []string, max int, wait time.Duration) ([]task.Task, error) {
	return service.LongPoll(ctx, &n.mu, (*poller)(n), queues, max, wait)
}

// poller is the node as service.LongPoll sees it.
type poller Node

// Look is one look of a reservation (service.Poller): one statement
// (take). With a waiter, the node puts w on the queues' waiting lists
// before it looks, so that a task made ready while it looks wakes w (the
// node listens to chanReady from its start: notifications.go); finding
// nothing, w is marked waiting, and the flush may hand it tasks from then
// on.
//
// A waiter on one queue sends no statement when a look of that queue
// found it empty less than emptyFor ago and no signal of a task made
// ready there came since that look began (queueWait.knownEmpty): the
// statement would find what that look found, and the waiter is where a
// waiter of that look would be, woken by the same signals. It looks
// again when that look stops standing (its retry), so that a task made
// ready with no signal (a notification lost with the listen connection,
// before the resync's wake) waits at most emptyFor longer for it. On a
// busy queue whose reservers come back at once from each hand-over, this
// is most of their empty reserve statements (issue 40's 1M row).
func (p *poller) Look(ctx context.Context, queues []string, max int, w *service.Waiter[handed]) ([]task.Task, time.Duration, error) {
	n := (*Node)(p)
	if err := n.Err(); err != nil {
		return nil, 0, err
	}
	// one is the waiting state of a waiter's one queue, whose empty
	// look stands for the next ones (queueWait.knownEmpty); gen is its
	// count of signals as this look began.
	var one *queueWait
	var gen uint64
	if w != nil {
		n.mu.Lock()
		for _, queue := range queues {
			n.queueWait(queue).Add(w)
		}
		if len(queues) == 1 {
			one = n.queues[queues[0]]
			gen = one.gen
			if now := time.Now(); one.knownEmpty(now) {
				w.MarkWaiting()
				left := time.Until(one.emptyUntil)
				if left < time.Millisecond {
					left = time.Millisecond // a retry of 0 would never look again
				}
				n.mu.Unlock()
				n.metrics.looksSkipped.Inc()
				return nil, left, nil
			}
		}
		n.mu.Unlock()
	}
	// A look after a wake by another node's notification closes the hop
	// notified → reserved.
	wokeAt, woken := n.metrics.wakes.looked(queues)
	path := pathReserved
	if woken {
		path = pathNotified
	}
	tasks, retry, err := n.take(ctx, queues, max, path)
	if woken && len(tasks) > 0 {
		d := time.Since(wokeAt).Seconds()
		for range tasks {
			n.metrics.hopReserved.Observe(d)
		}
	}
	if w != nil {
		n.mu.Lock()
		if err != nil || len(tasks) > 0 {
			w.Leave()
			p.Left(queues)
		} else {
			w.MarkWaiting()
			if one != nil && retry == 0 && one.gen == gen {
				d := emptyFor
				if h := n.opts.hooks.emptyFor.Load(); h != 0 {
					d = time.Duration(h)
				}
				one.emptyAt, one.emptyUntil = gen, time.Now().Add(d)
			}
		}
		n.mu.Unlock()
	}
	if err != nil && ctx.Err() != nil {
		return nil, 0, ctx.Err()
	}
	return tasks, retry, err
}

// Deliver returns the tasks of rows a flush reserved and handed to a
// waiter (service.Poller).
func (p *poller) Deliver(items []handed) []task.Task {
	rows := make([]row, len(items))
	var dbNow int64
	for i, h := range items {
		rows[i] = h.row
		dbNow = max(dbNow, h.dbNow)
	}
	return (*Node)(p).deliver(rows, dbNow, pathHanded, 0)
}

// GiveBack makes ready again rows handed to a waiter whose caller had
// gone (service.Poller).
func (p *poller) GiveBack(items []handed) { (*Node)(p).giveBack(items) }

// take runs one reservation (its deliveries counted as having come by
// path) and announces the leases' timers to their
// partitions' owners: one statement for the queues without limits (a
// second, sqlReserveFair, when one of them uses keys), and,
// if that leaves max unfilled, a transaction for the limited ones
// (takeLimited). When it takes nothing it returns how long until it
// should look again though no one wakes it (0: never): the first of the
// queues' pauses to end, the next token of a rate limit, capPoll for a
// concurrency limit.
func (n *Node) take(ctx context.Context, queues []string, max int, path string) ([]task.Task, time.Duration, error) {
	gen := n.members.generation()
	rows, err := n.db.leaseQuery(ctx, n.giveBacks.call(queues), sqlReserve, queues, max)
	if err != nil {
		return nil, 0, dbErr(err)
	}
	got, dbNow, retry, limited, keyed, err := scanReserved(rows, max)
	// The rows are read by deliver, which copies what it keeps, and are
	// free again when take returns.
	defer func() { putRows(got) }()
	if err == nil && keyed {
		// A queue uses keys: the statement took nothing, and the fair
		// one takes them.
		if rows, err = n.db.leaseQuery(ctx, n.giveBacks.call(queues), sqlReserveFair, queues, max); err != nil {
			return nil, 0, dbErr(err)
		}
		got, dbNow, retry, limited, _, err = scanReserved(rows, max)
	}
	if err != nil {
		return nil, 0, dbErr(err)
	}
	if len(limited) > 0 && len(got) < max {
		// Several queues, some limited: the statement took none (its
		// picked CTE), and the transaction takes from all of them, so
		// that delivery order holds across them.
		from := limited
		if len(queues) > 1 {
			from = queues
		}
		more, now, wait, err := n.takeLimited(ctx, from, max-len(got))
		if err != nil {
			if len(got) > 0 {
				// The tasks taken stand; the limited queues wait for the
				// next reserve.
				return n.deliver(got, dbNow, path, gen), 0, nil
			}
			return nil, 0, err
		}
		got = append(got, more...)
		if now > dbNow {
			dbNow = now
		}
		if wait > 0 && (retry == 0 || wait < retry) {
			retry = wait
		}
	}
	if len(got) == 0 {
		return nil, retry, nil
	}
	return n.deliver(got, dbNow, path, gen), 0, nil
}

// scanReserved reads sqlReserve's rows: the tasks taken, the database's
// clock, when none was taken how long until the first of the queues'
// pauses ends (0 for none), the limited queues, and whether a queue uses
// keys (then sqlReserveFair takes the tasks). max is the most tasks the
// statement takes: the slice of tasks is made that large once, when the
// first task comes, rather than grown by doubling (a row is a few hundred
// bytes, so the growth of a reserve of 64 allocated about as much as the
// tasks' payloads).
func scanReserved(rows pgx.Rows, max int) (got []row, dbNow int64, pauseLeft time.Duration, limited []string, keyed bool, err error) {
	defer rows.Close()
	var left, ready *int64
	scanner := newRowScanner(&dbNow, &ready, &left)
	for rows.Next() {
		left, ready = nil, nil
		t, err := scanner.scan(rows)
		if err != nil {
			return nil, 0, 0, nil, false, err
		}
		if ready != nil {
			t.readyAt = *ready
		}
		switch {
		case left == nil:
			if got == nil {
				got = getRows(min(max, reserveCap))
			}
			got = append(got, t)
		case *left == -2:
			keyed = true
		case *left < 0:
			limited = append(limited, t.queue)
		default:
			if d := time.Duration(*left); pauseLeft == 0 || d < pauseLeft {
				pauseLeft = d
			}
		}
	}
	if len(got) > 0 {
		pauseLeft = 0
	}
	return got, dbNow, pauseLeft, limited, keyed, rows.Err()
}

// reserveCap bounds the room scanReserved makes ahead for a reserve's
// tasks: task.MaxReserve, the most a reserve may ask for.
const reserveCap = task.MaxReserve

// rowSlices holds the slices of rows that scanReserved read and take
// delivered, for the next reserve: a reserve of 64 tasks made 64 rows of
// a few hundred bytes each, garbage as soon as its tasks were delivered.
// putRows keeps none longer than reserveCap. Safe for concurrent use.
var rowSlices = sync.Pool{New: func() any { return new([]row) }}

// getRows returns an empty slice of rows with room for n, from rowSlices
// when one there is large enough.
func getRows(n int) []row {
	p := rowSlices.Get().(*[]row)
	if cap(*p) < n {
		return make([]row, 0, n)
	}
	return (*p)[:0]
}

// putRows gives got to rowSlices, its rows zeroed so that the pool holds
// no task's strings or payload, unless it is nil or larger than
// reserveCap.
func putRows(got []row) {
	if got == nil || cap(got) > reserveCap {
		return
	}
	got = got[:cap(got)]
	clear(got)
	got = got[:0]
	rowSlices.Put(&got)
}

// sortRows puts reserved rows in delivery order (task.DeliveredBefore).
func sortRows(got []row) {
	sort.Slice(got, func(i, j int) bool {
		a, b := &got[i], &got[j]
		return task.DeliveredBefore(uint32(a.priority), a.due, uint64(a.job), uint32(b.priority), b.due, uint64(b.job))
	})
}

// deliver turns reserved rows into the tasks a reserve returns, in
// delivery order, announces their leases' timers to their partitions'
// owners (announceLease, for statements begun at the membership's
// generation gen; 0: unknown) and counts the deliveries, which came by
// path; dbNow is the database's clock at the reservation.
func (n *Node) deliver(got []row, dbNow int64, path string, gen uint64) []task.Task {
	sortRows(got)
	out := make([]task.Task, len(got))
	dues := make([]int64, len(got))
	readies := make([]int64, len(got))
	for i := range got {
		t := &got[i]
		out[i] = t.view()
		out[i].Lease = t.lease
		dues[i], readies[i] = t.due, t.readyAt
		n.announceLease(uint64(t.job), t.leaseUntil, dbNow, gen)
	}
	n.metrics.delivered(dues, readies, dbNow, path)
	n.counters.delivered(out, dues, readies, dbNow)
	return out
}

// sqlGiveBack makes tasks reserved by a flush for waiters that had left
// ready again, undoing the reservation (its attempt and try included), where they
// are still held under the leases given ($1 job ids, $2 leases). It
// commits without waiting for the WAL flush, as the reservation did.
const sqlGiveBack = `WITH r AS (SELECT set_config('synchronous_commit', 'off', true))
	UPDATE hourglass_tasks t SET state = 1, attempts = t.attempts - 1, tries = t.tries - 1, lease = '', lease_until = 0,
		fire_at = NULL
	FROM unnest($1::bigint[], $2::text[]) AS g(job_id, lease), r
	WHERE t.job_id = g.job_id AND t.state = 2 AND t.lease = g.lease
	RETURNING t.queue`

// giveBack makes ready again the rows a flush reserved for waiters that
// then left (timed out or cancelled while the statement ran), and wakes
// the reservers of their queues. If that fails, the leases stand and
// their timers are announced: the tasks come back when the leases run
// out, an attempt spent.
func (n *Node) giveBack(rows []handed) {
	jobs := make([]int64, len(rows))
	leases := make([]string, len(rows))
	for i := range rows {
		jobs[i], leases[i] = rows[i].job, rows[i].lease
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := n.db.Query(ctx, sqlGiveBack, jobs, leases)
	if err == nil {
		var queues []string
		queues, err = pgx.CollectRows(res, pgx.RowTo[string])
		if err == nil {
			n.metrics.givenBack.Add(float64(len(queues)))
			byQueue := map[string]int{}
			for _, q := range queues {
				byQueue[q]++
			}
			for q, k := range byQueue {
				n.readied(q, k)
			}
			return
		}
	}
	n.log.Warn("hourglass: giving back tasks no reserver took failed; they come back when their leases run out", "err", err)
	for i := range rows {
		n.announce(uint64(rows[i].job), rows[i].leaseUntil, rows[i].dbNow)
	}
}
