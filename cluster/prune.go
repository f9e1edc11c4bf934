package cluster

import (
	"context"
	"time"

	"github.com/hourglass-go/hourglass/internal/retry"
)

// sqlPrune deletes those of the $2 oldest rows of hourglass_history (by
// seq, the order they were written in, each finished by the database's
// clock as it was written: migration 018 dropped the index on finished)
// that finished before the database's clock less $1 (ns), and the
// attempts of their jobs, unless the job is live again (a dead task
// kicked, or moved to a dead-letter queue) or has a row that stays (it
// left again later): a job keeps its id, so its rows are counted by
// hourglass_history_id, and it has one that stays when it has more than
// the batch deletes. It returns how many rows it deleted. O(batch log
// n).
//
// The count is a scalar subquery, run per job by the index: written as
// NOT EXISTS (a row of the job whose seq is not in the batch),
// PostgreSQL plans a hash anti-join over a sequential scan of the
// whole table, O(n) a batch, and the pruning falls behind a steady load
// of finished tasks, the tables growing. The delete
// finds the batch's rows by seq = ANY(ARRAY(...)), an index condition
// whatever the estimates: joined to h, the generic plan over an analyzed
// history of 50,000 rows hashed h and scanned the whole table
// (TestPrune_PlanBySeq).
const sqlPrune = `WITH h AS MATERIALIZED (
		SELECT seq, job_id, id FROM (SELECT seq, job_id, id, finished FROM hourglass_history ORDER BY seq LIMIT $2) o
		WHERE finished < hourglass_now() - $1
	), d AS (
		DELETE FROM hourglass_history x WHERE x.seq = ANY(ARRAY(SELECT seq FROM h)) RETURNING x.seq
	), g AS MATERIALIZED (
		SELECT job_id, id, count(*) AS n FROM h GROUP BY job_id, id
	), j AS MATERIALIZED (
		SELECT DISTINCT g.job_id FROM g
		WHERE NOT EXISTS (SELECT 1 FROM hourglass_tasks t WHERE t.job_id = g.job_id)
			AND (SELECT count(*) FROM hourglass_history y WHERE y.id = g.id AND y.job_id = g.job_id) = g.n
	), a AS (
		DELETE FROM hourglass_attempts a USING j WHERE a.job_id = j.job_id
	)
	SELECT count(*) FROM d`

// keySeenRenew (ns) is how old a key's turn row's seen is when a put of
// the key writes it again (sqlKeyed); keyIdle is how long a row is kept
// unwritten: twice that, so that a key being put is never pruned.
const (
	keySeenRenew = "30000000000" // 30 s
	keyIdle      = 60 * time.Second
)

// sqlPruneKeys deletes the rows of hourglass_key_turns among the $2 not
// written for longest, if not for $1 (ns), whose key has no live task in
// their queue: a key's turn lives while the key has tasks. Each of those
// rows is probed on its own (hourglass_tasks_keyed, whose predicate the
// probe of a key but "" repeats; a lateral subquery, so that the planner
// cannot make it a hash anti-join over every task),
// and the rows whose keys have tasks get seen = now, so that the next
// prune looks at other rows (reserves do not write the rows: a backlog
// of keys would otherwise stay at the head of the index on seen, and the
// rows behind it would never be looked at). A put of the key meanwhile
// renews the row's seen (sqlKeyed), which the delete checks again on the
// row it locks. O($2 log n). With them it deletes up to $2 cursors
// (hourglass_key_cursors, reserve.go) of queues without turn rows left,
// as the statement began: a queue's cursor goes a round after its last
// key's row.
const sqlPruneKeys = `WITH cand AS MATERIALIZED (
		SELECT c.queue, c.task_key, l.live FROM (SELECT queue, task_key FROM hourglass_key_turns
			WHERE seen < hourglass_now() - $1 ORDER BY seen LIMIT $2) c
		CROSS JOIN LATERAL (SELECT count(*) > 0 AS live FROM (
			(SELECT 1 FROM hourglass_tasks t WHERE c.task_key <> '' AND t.queue = c.queue AND t.task_key = c.task_key
				AND t.task_key <> '' LIMIT 1)
			UNION ALL
			(SELECT 1 FROM hourglass_tasks t WHERE c.task_key = '' AND t.queue = c.queue AND t.task_key = '' LIMIT 1)) x) l
	), d AS (
		DELETE FROM hourglass_key_turns k USING cand
		WHERE k.queue = cand.queue AND k.task_key = cand.task_key AND NOT cand.live
			AND k.seen < hourglass_now() - $1
		RETURNING 1
	), kept AS (
		UPDATE hourglass_key_turns k SET seen = hourglass_now() FROM cand
		WHERE k.queue = cand.queue AND k.task_key = cand.task_key AND cand.live
	), c AS (
		DELETE FROM hourglass_key_cursors c WHERE c.queue IN (SELECT x.queue FROM hourglass_key_cursors x
			WHERE NOT EXISTS (SELECT 1 FROM hourglass_key_turns k WHERE k.queue = x.queue) LIMIT $2))
	SELECT count(*) FROM d`

// pruneWith returns the primitive of a retry.Pruner that runs sql, a
// statement that deletes up to $2 rows older than $1 (ns) by the
// database's clock and returns how many: sqlPrune, sqlPruneDeduped or
// sqlPruneKeys. The loop (when, how many, back-off, logs) is the
// Pruner's; the node starts one per statement (startPruners).
func (n *Node) pruneWith(sql string) retry.PruneFunc {
	return func(ctx context.Context, age time.Duration, max int) (int, error) {
		var k int
		err := n.db.QueryRow(ctx, sql, int64(age), max).Scan(&k)
		return k, err
	}
}

// startPruners starts the node's pruners, on the node that owns
// partition 0 (leadsPruning), so on one node at a time but for a
// takeover's overlap, which costs nothing worse than two deletes of the
// same rows (the second finds them gone): the history older than
// retention with the attempts of its jobs, the dedupe records whose
// window ended, the turns of keys idle for keyIdle, and the dead
// versions of tasks (vacuum.go).
func (n *Node) startPruners(retention time.Duration) {
	n.pruners = []*retry.Pruner{
		{What: "the history", Retention: retention, Prune: n.pruneWith(sqlPrune)},
		{What: "the dedupe records", Prune: n.pruneWith(sqlPruneDeduped)},
		{What: "the turns of idle keys", Retention: keyIdle, Prune: n.pruneWith(sqlPruneKeys)},
		n.vacuumer(),
	}
	for _, p := range n.pruners {
		p.Leads, p.Log = n.leadsPruning, n.log
		p.Start()
	}
}

// leadsPruning says whether this node prunes the history: it owns
// partition 0.
func (n *Node) leadsPruning() bool {
	_, ok := n.members.holds(0)
	return ok
}
