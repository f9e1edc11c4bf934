package cluster

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// A queue's rate and concurrency limits (task.Policy's Rate and
// Concurrency, and PerKey's concurrency) hold across every node: its row of hourglass_queues is the
// one place the nodes meet. The reservation statement (sqlReserve) leaves
// limited queues out (the row's generated column limited) and names them;
// the reserve then takes their tasks in a transaction of its own
// (takeLimited), which
//
//  1. locks the queues' rows FOR UPDATE, in name order (two reserves of
//     the same queues never deadlock), and reads their pauses, policies
//     and buckets, with the database's clock;
//  2. asks each rate-limited queue's bucket (service.Bucket, the row's
//     tokens and tokens_at) how many tokens it has now, on a copy;
//  3. reserves, in a statement begun after the lock (so its snapshot
//     counts every reservation committed by the reserves before it), up to
//     that many tasks of each queue, and no more than its concurrency
//     limit less its tasks reserved now, nor, of each key, than its
//     per-key concurrency less the key's tasks reserved now (a queue that
//     uses keys is taken in turn across them);
//  4. takes from each bucket as many tokens as tasks it reserved, writes
//     the buckets and commits (without waiting for the WAL flush, as a
//     reservation does: a crash within it gives back tasks and tokens
//     together).
//
// So a limited queue's reserves are serialised on its row, cluster-wide,
// for the few milliseconds of the transaction; unlimited queues keep the
// one-statement path. A reserve that finds a limit reached waits within
// its wait: for the next token (Bucket.Take's next), or for a reserved
// task of the queue to be acked, given back or expired (slotFreed wakes
// one waiter, here or on another node, through chanReady), and
// at most capPoll in any case, should that notice be lost. A reserve
// that names several queues, some of them limited, takes from all of them
// in that transaction (sqlReserve takes nothing then), so that delivery
// order holds across them; the unlimited queues' rows are not locked.

// capPoll bounds how long a reserver blocked by a concurrency limit waits
// without a notice before looking again: the notice (slotFreed) relies on
// each node's hint of which queues have a limit (policy.go), which a
// policy set a moment ago may not have reached yet.
const capPoll = time.Second

// sqlLockLimited locks the rows of the limited queues among $1, in name
// order, and reads their pauses, policies and buckets, with the
// database's clock.
// The lock is a write: the transaction's commit, like the reservation's,
// does not wait for the WAL flush (set_config(..., true) is SET LOCAL).
const sqlLockLimited = `WITH async AS MATERIALIZED (SELECT set_config('synchronous_commit', 'off', true))
	SELECT q.queue, q.paused_until, hourglass_now(), ` + policyColumns + `, q.tokens, q.tokens_at
	FROM hourglass_queues q, async WHERE q.queue = ANY($1) AND q.limited ORDER BY q.queue FOR UPDATE OF q`

// sqlReserveLimited is sqlReserve for limited queues whose rows the
// transaction has locked: up to $3[i] tasks of queue $1[i] (its tokens),
// less, under a concurrency limit, what it has reserved already; $2 in
// all. A queue that uses keys (has rows in hourglass_key_turns) or has a
// per-key concurrency ($4[i] > 0, 0: none) is taken in turn across keys (the keys by turn, as sqlReserveFair, a key's tasks
// in delivery order, the n-th task of each key in the n-th round), each
// key up to $4[i] less what it has reserved already; a key whose
// ready tasks have no turn row (moved in by a dead letter, say) is found
// among the queue's first ready tasks. The keys taken get the next turns
// (sqlTurn). It returns a row per task taken as sqlReserve does, and a
// row per queue whose concurrency limit is reached (job id 0, the
// queue's name, the last column 0). Its update finds the tasks picked by
// their primary key as sqlReserve's does, whatever the estimates
// (reserve.go); likewise its test that a key has a ready task is ordered
// as hourglass_tasks_key_ready and fenced (OFFSET 0), so that a generic
// plan over an analyzed table probes that index rather than scanning the
// table (TestReserve_PlanAfterAnalyze).
const sqlReserveLimited = `WITH lim AS MATERIALIZED (
		SELECT q.name, q.allow, coalesce(p.concurrency, 0) AS concurrency, CASE WHEN p.concurrency > 0 THEN
			(SELECT count(*) FROM (SELECT 1 FROM hourglass_tasks r
				WHERE r.queue = q.name AND r.state = 2 LIMIT p.concurrency) c) ELSE 0 END AS busy, q.perkey,
			q.perkey > 0 OR EXISTS (SELECT 1 FROM hourglass_key_turns u WHERE u.queue = q.name) AS keyed,
			NOT EXISTS (SELECT 1 FROM hourglass_queues pp
				WHERE pp.queue = q.name AND pp.paused_until > hourglass_now()) AS running
		FROM unnest($1::text[], $3::int[], $4::int[]) AS q(name, allow, perkey) LEFT JOIN hourglass_queues p ON p.queue = q.name
	), capped AS MATERIALIZED (
		SELECT lim.*, greatest(CASE WHEN lim.concurrency > 0 THEN least(lim.allow, lim.concurrency - lim.busy)
			ELSE lim.allow END, 0) AS cap FROM lim
	), picked AS (
		SELECT c.* FROM capped
		CROSS JOIN LATERAL (
			SELECT job_id, priority, due, ready_at, 0::bigint AS round, 0::bigint AS turn FROM hourglass_tasks
			WHERE NOT capped.keyed AND capped.running AND queue = capped.name AND state = 1 AND fire_at IS NULL
			ORDER BY priority, due, job_id
			LIMIT capped.cap
			FOR UPDATE SKIP LOCKED
		) c
		UNION ALL
		SELECT c.* FROM capped
		CROSS JOIN LATERAL (
			SELECT f.job_id, f.priority, f.due, f.ready_at, f.round, k.turn FROM (
				SELECT k0.task_key, k0.turn, b.busy FROM (
					SELECT kt.task_key, kt.turn FROM hourglass_key_turns kt WHERE kt.queue = capped.name
					UNION ALL
					SELECT DISTINCT g.task_key, 0::bigint FROM (SELECT task_key FROM hourglass_tasks
						WHERE queue = capped.name AND state = 1 AND fire_at IS NULL
						ORDER BY priority, due, job_id LIMIT capped.cap) g
					WHERE NOT EXISTS (SELECT 1 FROM hourglass_key_turns x WHERE x.queue = capped.name AND x.task_key = g.task_key)
				) k0
				CROSS JOIN LATERAL (SELECT CASE WHEN capped.perkey > 0 THEN (SELECT count(*) FROM (SELECT 1 FROM hourglass_tasks r
					WHERE r.queue = capped.name AND r.task_key = k0.task_key AND r.state = 2 LIMIT capped.perkey) c)
					ELSE 0 END AS busy) b
				WHERE capped.keyed AND capped.running AND (capped.perkey = 0 OR b.busy < capped.perkey) AND EXISTS (SELECT 1 FROM hourglass_tasks e
					WHERE e.queue = capped.name AND e.task_key = k0.task_key AND e.state = 1 AND e.fire_at IS NULL
					ORDER BY e.priority, e.due, e.job_id OFFSET 0)
				ORDER BY k0.turn
				LIMIT capped.cap
			) k
			CROSS JOIN LATERAL (
				SELECT x.*, row_number() OVER (ORDER BY x.priority, x.due, x.job_id) AS round FROM (
					SELECT job_id, priority, due, ready_at FROM hourglass_tasks
					WHERE queue = capped.name AND task_key = k.task_key AND state = 1 AND fire_at IS NULL
					ORDER BY priority, due, job_id
					LIMIT CASE WHEN capped.perkey > 0 THEN least(capped.cap, capped.perkey - k.busy) ELSE capped.cap END
					FOR UPDATE SKIP LOCKED
				) x
			) f
			ORDER BY f.priority, f.round, k.turn, f.due, f.job_id
			LIMIT capped.cap
		) c
	), ordered AS (
		SELECT job_id, ready_at FROM picked ORDER BY priority, round, turn, due, job_id LIMIT $2
	), now AS (SELECT hourglass_now() AS ns, set_config('synchronous_commit', 'off', true)),
	taken AS (
		UPDATE hourglass_tasks t SET state = 2, attempts = t.attempts + 1,
			lease = ` + sqlLease + `,
			lease_until = now.ns + t.ttr, fire_at = now.ns + t.ttr, reserved = now.ns, tries = t.tries + 1, ready_at = NULL
		FROM ordered, now
		WHERE t.job_id = ordered.job_id AND t.job_id = ANY(ARRAY(SELECT job_id FROM ordered))
		RETURNING ` + returnTask + `, now.ns, ordered.ready_at
	), turned AS (
		` + sqlTurn + `
	)
	SELECT *, NULL::bigint FROM taken
	UNION ALL
	SELECT 0::bigint, lim.name, '', 0::smallint, 0::bigint, 0::bigint, NULL::bigint, 0::bigint, 0::bigint, 0::bigint,
		0::bigint, '', 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint, ''::bytea, 0, '', '', '', '', 0::bigint, NULL::bigint, 0::bigint
	FROM lim WHERE lim.concurrency > 0 AND lim.busy >= lim.concurrency`

// sqlHeldBack returns those of the queues $1 (concurrency limits $2) that
// have a ready task, and whether each is full: as many tasks reserved as
// its limit. Run in takeLimited's transaction after its reservations,
// which it sees.
const sqlHeldBack = `SELECT q.name, q.conc > 0 AND (SELECT count(*) FROM (SELECT 1 FROM hourglass_tasks r
		WHERE r.queue = q.name AND r.state = 2 LIMIT q.conc) c) >= q.conc
	FROM unnest($1::text[], $2::int[]) AS q(name, conc)
	WHERE EXISTS (SELECT 1 FROM hourglass_tasks t WHERE t.queue = q.name AND t.state = 1 AND t.fire_at IS NULL)`

// heldBack returns the queues of qs, not paused at dbNow, that a reserve
// which took fewer tasks than it asked for leaves with ready tasks because
// of a limit, and which limit: its concurrency if full, else its rate if
// the reserve left it no whole token (q.tokens less what it took: a
// queue held back by its per-key limits alone counts nothing). That is
// the broker's count of hourglass_reserves_throttled_total (its take),
// so that both engines count alike. One statement.
func heldBack(ctx context.Context, tx pgx.Tx, qs []*limitedQueue, dbNow int64, took map[string]int) ([][2]string, error) {
	var names []string
	var concs []int32
	rates := map[string]bool{}
	for _, q := range qs {
		if q.paused <= dbNow {
			names, concs = append(names, q.name), append(concs, int32(q.policy.Concurrency))
			rates[q.name] = q.policy.Rate != nil && q.tokens-took[q.name] <= 0
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	rows, err := tx.Query(ctx, sqlHeldBack, names, concs)
	if err != nil {
		return nil, err
	}
	var out [][2]string
	for rows.Next() {
		var name string
		var full bool
		if err := rows.Scan(&name, &full); err != nil {
			rows.Close()
			return nil, err
		}
		switch {
		case full:
			out = append(out, [2]string{name, service.ThrottledConcurrency})
		case rates[name]:
			out = append(out, [2]string{name, service.ThrottledRate})
		}
	}
	rows.Close()
	return out, rows.Err()
}

// limitedQueue is a limited queue's row as sqlLockLimited reads it.
type limitedQueue struct {
	name   string
	paused int64
	policy task.Policy
	bucket service.Bucket
	// tokens is how many whole tokens the bucket had at the lock, up to
	// one more than the reserve asked for.
	tokens int
}

// takeLimited reserves up to max ready tasks of the limited queues among
// queues within their limits, in one transaction (see the top of this
// file). It returns the rows reserved and the database's clock; when it
// reserved none, retry is how long until a limit it met may let a task
// through (0: none met, the queues have no ready task).
func (n *Node) takeLimited(ctx context.Context, queues []string, max int) (got []row, dbNow int64, retry time.Duration, err error) {
	// throttled counts the queues a limit held back, by reason, for the
	// metrics once the transaction commits.
	var throttled [][2]string
	err = pgx.BeginFunc(ctx, n.db, func(tx pgx.Tx) error {
		got, dbNow, retry, throttled = nil, 0, 0, nil
		rows, err := tx.Query(ctx, sqlLockLimited, queues)
		if err != nil {
			return err
		}
		var qs []*limitedQueue
		for rows.Next() {
			q := &limitedQueue{}
			var p policyRow
			dest := append([]any{&q.name, &q.paused, &dbNow}, p.dest()...)
			if err := rows.Scan(append(dest, &q.bucket.Tokens, &q.bucket.At)...); err != nil {
				rows.Close()
				return err
			}
			q.policy = p.policy()
			qs = append(qs, q)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		var names []string
		var allows, perKeys []int32
		soon := func(d time.Duration) {
			if retry == 0 || d < retry {
				retry = d
			}
		}
		for _, q := range qs {
			allow := max
			switch {
			case q.paused > dbNow:
				allow = 0
				soon(time.Duration(q.paused-dbNow) + time.Millisecond)
			case q.policy.Rate != nil:
				probe := q.bucket
				took, next := probe.Take(*q.policy.Rate, dbNow, max+1)
				allow, q.tokens = min(took, max), took
				if took == 0 {
					soon(next)
				}
			}
			if allow > 0 {
				names, allows = append(names, q.name), append(allows, int32(allow))
				perKey := 0
				if k := q.policy.PerKey; k != nil {
					perKey = k.Concurrency
				}
				perKeys = append(perKeys, int32(perKey))
			}
		}
		// The queues without limits among them (a reserve over several,
		// see take) take up to max, in the same statement, so that
		// delivery order holds across all; their pauses are the
		// statement's to check.
		locked := make(map[string]bool, len(qs))
		for _, q := range qs {
			locked[q.name] = true
		}
		for _, name := range queues {
			if !locked[name] {
				names, allows, perKeys = append(names, name), append(allows, int32(max)), append(perKeys, 0)
			}
		}
		if len(names) == 0 {
			throttled, err = heldBack(ctx, tx, qs, dbNow, nil)
			return err
		}
		rows, err = tx.Query(ctx, sqlReserveLimited, names, max, allows, perKeys)
		if err != nil {
			return err
		}
		var now int64
		for rows.Next() {
			var left, ready *int64
			t, err := scanRow(rows, &now, &ready, &left)
			if err != nil {
				rows.Close()
				return err
			}
			if ready != nil {
				t.readyAt = *ready
			}
			if left != nil {
				soon(capPoll) // full: woken by slotFreed, or looks again then
				continue
			}
			got = append(got, t)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		took := map[string]int{}
		for i := range got {
			took[got[i].queue]++
		}
		if len(got) < max {
			if throttled, err = heldBack(ctx, tx, qs, dbNow, took); err != nil {
				return err
			}
		}
		if len(got) == 0 {
			return nil
		}
		dbNow = now
		var bq []string
		var tokens []float64
		var at []int64
		for _, q := range qs {
			if k := took[q.name]; k > 0 && q.policy.Rate != nil {
				q.bucket.Take(*q.policy.Rate, dbNow, k)
				bq, tokens, at = append(bq, q.name), append(tokens, q.bucket.Tokens), append(at, q.bucket.At)
			}
		}
		if len(bq) > 0 {
			_, err = tx.Exec(ctx, `UPDATE hourglass_queues q SET tokens = b.tokens, tokens_at = b.at
				FROM unnest($1::text[], $2::float8[], $3::bigint[]) AS b(queue, tokens, at)
				WHERE q.queue = b.queue`, bq, tokens, at)
		}
		return err
	})
	if err != nil {
		return nil, 0, 0, dbErr(err)
	}
	for _, th := range throttled {
		n.metrics.Throttled.WithLabelValues(th[0], th[1]).Inc()
	}
	if len(got) > 0 {
		retry = 0
	}
	return got, dbNow, retry, nil
}
