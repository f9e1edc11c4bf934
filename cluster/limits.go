package cluster

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// A queue's rate and concurrency limits (task.Policy's Rate and
// Concurrency, and PerKey's concurrency and rate) hold across every node:
// its row of hourglass_queues is the one place the nodes meet. The reservation statement (sqlReserve) leaves
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
//     per-key concurrency less the key's tasks reserved now, nor than
//     the whole tokens of the key's bucket of a per-key rate (a row of
//     hourglass_key_buckets, 016; no row: full), a key without one being
//     passed over until its next token (a queue that uses keys is taken
//     in service.KeyCompare's order across them);
//  4. takes from each bucket as many tokens as tasks it reserved, writes
//     the buckets (the keys' in the statement of 3, sqlKeySpend, which
//     also deletes the keys' buckets full again, sqlKeySweep) and commits (without waiting for the WAL flush, as a
//     reservation does: a crash within it gives back tasks and tokens
//     together).
//
// So a limited queue's reserves are serialised on its row, cluster-wide,
// for the few milliseconds of the transaction; unlimited queues keep the
// one-statement path. A reserve that finds a limit reached waits within
// its wait: for the next token (Bucket.Take's next; a key's, sqlKeyNext), or for a reserved
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
// per-key limit ($4[i] > 0: its per-key concurrency; $5[i] > 0: its
// per-key rate) is taken in the order of service.KeyCompare's doc, as
// sqlReserveFair takes it: of the keys its limits let through (fewer
// tasks reserved than the per-key concurrency, a whole token of the
// per-key rate), those whose first ready task has the first priority
// among them make the round, one task each, by name after the queue's
// cursor (hourglass_key_cursors), "" after every other key and only
// when the queue has a ready task of another key; then the fill, in
// delivery order, each key up to its per-key concurrency less what it
// has reserved and its whole tokens. The cursor moves to the last key
// of the round taken (sqlKeyCursor, under the queue's row lock). The
// keys are the queue's turn rows, and those of its first ready tasks
// that have none (moved in by a dead letter, say), which get one
// (sqlTurn: the rows say that the queue uses keys and which keys it
// has; their turns order nothing). The fill reads the round's keys and
// the n keys whose first task comes first in delivery order, n the most
// the queue may hand (cap): a task of any other key has n tasks of
// those before it. The tasks go round first, by priority, then place in
// the round, due time and job id, then the fills and the queues without
// keys in delivery order. O(keys of the queue) index probes a reserve.
// It returns a row per task taken as sqlReserve does, and a
// row per queue whose concurrency limit is reached (job id 0, the
// queue's name, the last column 0). Its update finds the tasks picked by
// their primary key as sqlReserve's does, whatever the estimates
// (reserve.go); likewise its test that a queue has a ready task of a
// key is ordered as hourglass_tasks_key_ready and fenced (OFFSET 0), so
// that a generic plan over an analyzed table probes that index rather
// than scanning the table (TestReserve_PlanAfterAnalyze).
const sqlReserveLimited = `WITH lim AS MATERIALIZED (
		SELECT q.name, q.allow, coalesce(p.concurrency, 0) AS concurrency, CASE WHEN p.concurrency > 0 THEN
			(SELECT count(*) FROM (SELECT 1 FROM hourglass_tasks r
				WHERE r.queue = q.name AND r.state = 2 LIMIT p.concurrency) c) ELSE 0 END AS busy, q.perkey,
			q.perkey > 0 OR q.krate > 0 OR EXISTS (SELECT 1 FROM hourglass_key_turns u WHERE u.queue = q.name) AS keyed,
			NOT EXISTS (SELECT 1 FROM hourglass_queues pp
				WHERE pp.queue = q.name AND pp.paused_until > hourglass_now()) AS running
		, q.krate, q.kper, q.kburst,
			coalesce((SELECT kc.task_key FROM hourglass_key_cursors kc WHERE kc.queue = q.name), '') AS cur
		FROM unnest($1::text[], $3::int[], $4::int[], $5::bigint[], $6::bigint[], $7::bigint[])
			AS q(name, allow, perkey, krate, kper, kburst) LEFT JOIN hourglass_queues p ON p.queue = q.name
	), capped AS MATERIALIZED (
		SELECT lim.*, greatest(CASE WHEN lim.concurrency > 0 THEN least(lim.allow, lim.concurrency - lim.busy)
			ELSE lim.allow END, 0) AS cap FROM lim
	), picked AS (
		SELECT c.* FROM capped
		CROSS JOIN LATERAL (
			SELECT job_id, priority, due, ready_at, queue, task_key, 1 AS rank, 0::bigint AS turn FROM hourglass_tasks
			WHERE NOT capped.keyed AND capped.running AND queue = capped.name AND state = 1 AND fire_at IS NULL
			ORDER BY ` + sqlDeliveryOrder + `
			LIMIT capped.cap
			FOR UPDATE SKIP LOCKED
		) c
		UNION ALL
		SELECT c.* FROM capped
		CROSS JOIN LATERAL (
			WITH kk AS MATERIALIZED (
				SELECT k0.task_key, b.busy, kr.avail, fp.priority, fp.due, fp.job_id,
					capped.cur <> '' AND (k0.task_key = '' OR k0.task_key > capped.cur) AS after
				FROM (
					SELECT kt.task_key FROM hourglass_key_turns kt WHERE kt.queue = capped.name
					UNION ALL
					SELECT DISTINCT g.task_key FROM (SELECT task_key FROM hourglass_tasks
						WHERE queue = capped.name AND state = 1 AND fire_at IS NULL
						ORDER BY ` + sqlDeliveryOrder + ` LIMIT capped.cap) g
					WHERE NOT EXISTS (SELECT 1 FROM hourglass_key_turns x WHERE x.queue = capped.name AND x.task_key = g.task_key)
				) k0
				CROSS JOIN LATERAL (SELECT CASE WHEN capped.perkey > 0 THEN (SELECT count(*) FROM (SELECT 1 FROM hourglass_tasks r
					WHERE r.queue = capped.name AND r.task_key = k0.task_key AND r.state = 2 LIMIT capped.perkey) c)
					ELSE 0 END AS busy) b
				CROSS JOIN LATERAL (SELECT CASE WHEN capped.krate = 0 THEN capped.cap ELSE coalesce((SELECT floor(least(capped.kburst::float8,
						kb.tokens + greatest($8 - kb.tokens_at, 0)::float8 / (capped.kper::float8 / capped.krate::float8)))::bigint
					FROM hourglass_key_buckets kb WHERE kb.queue = capped.name AND kb.task_key = k0.task_key), capped.kburst) END AS avail) kr
				CROSS JOIN LATERAL (SELECT e.priority, e.due, e.job_id FROM hourglass_tasks e
					WHERE e.queue = capped.name AND e.task_key = k0.task_key AND e.state = 1 AND e.fire_at IS NULL
					ORDER BY ` + sqlDeliveryOrder + ` LIMIT 1) fp
				WHERE capped.keyed AND capped.running AND (capped.perkey = 0 OR b.busy < capped.perkey) AND kr.avail >= 1
			), rk AS MATERIALIZED (
				SELECT kk.task_key, row_number() OVER (ORDER BY kk.after DESC, kk.task_key = '', kk.task_key) AS turn
				FROM kk WHERE kk.priority = (SELECT min(m.priority) FROM kk m)
					AND (kk.task_key <> '' OR EXISTS (SELECT 1 FROM hourglass_tasks o WHERE o.queue = capped.name AND o.task_key <> ''
						AND o.state = 1 AND o.fire_at IS NULL ORDER BY task_key, ` + sqlDeliveryOrder + ` OFFSET 0))
				ORDER BY kk.after DESC, kk.task_key = '', kk.task_key
				LIMIT capped.cap
			), ks AS (
				SELECT rk.task_key, rk.turn FROM rk
				UNION ALL
				(SELECT kk.task_key, 0::bigint FROM kk WHERE NOT EXISTS (SELECT 1 FROM rk WHERE rk.task_key = kk.task_key)
					ORDER BY ` + sqlDeliveryOrder + ` LIMIT capped.cap)
			)
			SELECT * FROM (
				SELECT f.job_id, f.priority, f.due, f.ready_at, capped.name AS queue, ks.task_key,
					CASE WHEN ks.turn > 0 AND f.n = 1 THEN 0 ELSE 1 END AS rank,
					CASE WHEN ks.turn > 0 AND f.n = 1 THEN ks.turn ELSE 0 END AS turn
				FROM ks JOIN kk ON kk.task_key = ks.task_key
				CROSS JOIN LATERAL (
					SELECT x.*, row_number() OVER (ORDER BY ` + sqlDeliveryOrder + `) AS n FROM (
						SELECT job_id, priority, due, ready_at FROM hourglass_tasks
						WHERE queue = capped.name AND task_key = ks.task_key AND state = 1 AND fire_at IS NULL
						ORDER BY ` + sqlDeliveryOrder + `
						LIMIT least(kk.avail, CASE WHEN capped.perkey > 0 THEN least(capped.cap, capped.perkey - kk.busy) ELSE capped.cap END)
						FOR UPDATE SKIP LOCKED
					) x
				) f
			) u
			ORDER BY u.rank, u.turn, ` + sqlDeliveryOrder + `
			LIMIT capped.cap
		) c
	), ordered AS MATERIALIZED (
		SELECT job_id, ready_at, queue, task_key, rank, turn FROM picked ORDER BY rank, priority, turn, due, job_id LIMIT $2
	), now AS (SELECT hourglass_now() AS ns, set_config('synchronous_commit', 'off', true)),
	taken AS (
		UPDATE hourglass_tasks t SET state = 2, attempts = t.attempts + 1,
			lease = $9` + sqlLease + `,
			lease_until = now.ns + t.ttr, fire_at = now.ns + t.ttr, reserved = now.ns, tries = t.tries + 1, ready_at = NULL
		FROM ordered, now
		WHERE t.job_id = ordered.job_id AND t.job_id = ANY(ARRAY(SELECT job_id FROM ordered))
		RETURNING ` + returnTask + `, now.ns, ordered.ready_at
	), moved AS (
		SELECT DISTINCT ON (queue) queue, task_key FROM ordered WHERE rank = 0 ORDER BY queue, turn DESC
	), ` + sqlKeyCursor + `, turned AS (
		` + sqlTurn + `
	), spent AS (
		` + sqlKeySpend + `
	), swept AS (
		` + sqlKeySweep + `
	)
	SELECT *, NULL::bigint FROM taken
	UNION ALL
	SELECT 0::bigint, lim.name, '', 0::smallint, 0::bigint, 0::bigint, NULL::bigint, 0::bigint, 0::bigint, 0::bigint,
		0::bigint, '', 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint, ''::bytea, 0, '', '', '', '', 0::bigint, NULL::bigint, 0::bigint
	FROM lim WHERE lim.concurrency > 0 AND lim.busy >= lim.concurrency`

// sqlKeySpend, a part of sqlReserveLimited, takes from the bucket of each
// key of a queue with a per-key rate (lim.krate > 0) as many tokens as it
// took tasks, refilled to the reservations' time (now.ns, the leases'
// start, as takeLimited takes the queue's bucket; the tokens were
// counted at the lock's clock, $8, no later) as service.Bucket.Take
// does, in the same floating-point steps, and writes it with the times
// it has a token and is full again.
const sqlKeySpend = `INSERT INTO hourglass_key_buckets AS kb (queue, task_key, tokens, tokens_at, full_at, next_at)
		SELECT s.queue, s.task_key, s.tokens, s.at,
			s.at + ceil((s.kburst - s.tokens) * (s.kper::float8 / s.krate::float8))::bigint,
			CASE WHEN s.tokens < 1 THEN s.at + ceil((1 - s.tokens) * (s.kper::float8 / s.krate::float8))::bigint END
		FROM (SELECT n.queue, n.task_key, lim.krate, lim.kper, lim.kburst, greatest(now.ns, coalesce(o.tokens_at, 0)) AS at,
				coalesce(least(lim.kburst::float8, o.tokens + greatest(now.ns - o.tokens_at, 0)::float8 / (lim.kper::float8 / lim.krate::float8)),
					lim.kburst::float8) - n.took AS tokens
			FROM (SELECT queue, task_key, count(*) AS took FROM taken GROUP BY queue, task_key) n
			CROSS JOIN now
			JOIN lim ON lim.name = n.queue AND lim.krate > 0
			LEFT JOIN hourglass_key_buckets o ON o.queue = n.queue AND o.task_key = n.task_key) s
		ON CONFLICT (queue, task_key) DO UPDATE SET tokens = excluded.tokens, tokens_at = excluded.tokens_at,
			full_at = excluded.full_at, next_at = excluded.next_at`

// sqlKeySweep, a part of sqlReserveLimited, deletes the buckets of the
// queues with a per-key rate that are full at $8, soonest first, up to
// $2 (the reserve's max, the most buckets sqlKeySpend may write) and 64
// more, so that the rows stay bounded by the keys handed a task within a
// refill; a key taken from in the statement keeps its row (sqlKeySpend
// writes it).
const sqlKeySweep = `DELETE FROM hourglass_key_buckets d WHERE (d.queue, d.task_key) IN (
		SELECT x.queue, x.task_key FROM lim CROSS JOIN LATERAL (SELECT kb.queue, kb.task_key FROM hourglass_key_buckets kb
			WHERE kb.queue = lim.name AND kb.full_at <= $8 ORDER BY kb.full_at LIMIT $2 + 64) x
		WHERE lim.krate > 0)
		AND NOT EXISTS (SELECT 1 FROM taken WHERE taken.queue = d.queue AND taken.task_key = d.task_key)`

// sqlKeyNext returns, of the queues $1 with a per-key rate, the first
// time after $2 a key that has a ready task and no whole token left gets
// one (NULL: none): a reserve that took nothing waits that long at most.
// It walks each queue's spent keys by next_at (016's index), so it reads
// only the spent keys without a ready task that come first, not every
// bucket.
const sqlKeyNext = `SELECT min(n.next_at) FROM unnest($1::text[]) AS q(name)
	CROSS JOIN LATERAL (SELECT kb.next_at FROM hourglass_key_buckets kb
		WHERE kb.queue = q.name AND kb.next_at > $2
			AND EXISTS (SELECT 1 FROM hourglass_tasks e WHERE e.queue = kb.queue AND e.task_key = kb.task_key
				AND e.state = 1 AND e.fire_at IS NULL ORDER BY ` + sqlDeliveryOrder + ` OFFSET 0)
		ORDER BY kb.next_at LIMIT 1) n`

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
// of a limit, and which limit (service.HeldBy: whether the queue is full,
// and whether the reserve left its rate no whole token, q.tokens less
// what it took), as the broker's take asks. One statement.
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
		if why := service.HeldBy(full, rates[name]); why != "" {
			out = append(out, [2]string{name, why})
		}
	}
	rows.Close()
	return out, rows.Err()
}

// keyNext tells soon how long until the next token of a key of qs that
// has ready tasks and no whole token of its queue's per-key rate at
// dbNow, when one has (sqlKeyNext): the wait of a reserve that took
// nothing. One statement, none without a per-key rate.
func keyNext(ctx context.Context, tx pgx.Tx, qs []*limitedQueue, dbNow int64, soon func(time.Duration)) error {
	var names []string
	for _, q := range qs {
		if k := q.policy.PerKey; k != nil && k.Rate != nil && q.paused <= dbNow {
			names = append(names, q.name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	var next *int64
	if err := tx.QueryRow(ctx, sqlKeyNext, names, dbNow).Scan(&next); err != nil {
		return err
	}
	if next != nil {
		soon(time.Duration(*next-dbNow) + time.Millisecond)
	}
	return nil
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
	// call is the reservation's leasing call, given back if its commit's
	// outcome is unknown (giveback.go).
	call := n.giveBacks.call(queues)
	body := func(tx pgx.Tx) error {
		got, dbNow, retry, throttled = nil, 0, 0, nil
		b, err := backendOf(ctx, tx, tx.Conn().PgConn())
		if err != nil {
			return err
		}
		call.pid, call.start = b.pid, b.start
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
		var kRates, kPers, kBursts []int64
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
				var kr task.Rate
				if k := q.policy.PerKey; k != nil {
					perKey = k.Concurrency
					if k.Rate != nil {
						kr = *k.Rate
						if kr.Burst == 0 {
							kr.Burst = kr.Limit
						}
					}
				}
				perKeys = append(perKeys, int32(perKey))
				kRates, kPers, kBursts = append(kRates, int64(kr.Limit)), append(kPers, int64(kr.Per)), append(kBursts, int64(kr.Burst))
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
				kRates, kPers, kBursts = append(kRates, 0), append(kPers, 0), append(kBursts, 0)
			}
		}
		if len(names) == 0 {
			throttled, err = heldBack(ctx, tx, qs, dbNow, nil)
			return err
		}
		rows, err = tx.Query(ctx, sqlReserveLimited, names, max, allows, perKeys, kRates, kPers, kBursts, dbNow, call.tok)
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
			return keyNext(ctx, tx, qs, dbNow, soon)
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
	}
	var committing bool
	err = pgx.BeginFunc(ctx, n.db, func(tx pgx.Tx) error {
		committing = false
		err := body(tx)
		committing = err == nil
		return err
	})
	n.giveBacks.committed(call, committing, err)
	if err != nil {
		return nil, 0, 0, dbErr(err)
	}
	for _, th := range throttled {
		n.metrics.HeldBack(th[0], th[1])
	}
	if len(got) > 0 {
		retry = 0
	}
	return got, dbNow, retry, nil
}
