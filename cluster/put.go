package cluster

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// sqlInsert inserts tasks given as arrays, due by the database's clock
// ($6 has_at: at $7, else $8 after the statement's now), ready at once
// (no timer) when that is not after now. A task whose queue and id are
// taken is skipped (the idempotent put), and RETURNING leaves it out. A
// task's ttr and max_attempts are service.ApplyDefaults's (sqlDefault),
// of the queue's policy read in the same statement (pol), so that every
// node applies the policy last set. A task's trace context ($13, $14) is NULL when
// it has none, and its key ($16) "" (task.PutRequest.Key). A task whose
// $15 is true and whose id the queue's dedupe window answers
// (sqlDeduped) is skipped too; $15 is false for an id the service made
// (as on the embedded engine, which looks up no record for one) and for
// a put that replaced a live task of its id, since a live task wins over
// the window.
var sqlInsert = `WITH now AS (SELECT hourglass_now() AS ns),
	pol AS (SELECT coalesce(q.ttr, 0) AS ttr, coalesce(q.max_attempts, 0) AS max_attempts,
			coalesce(q.dedupe, 0) AS dedupe
		FROM (SELECT 1) one LEFT JOIN hourglass_queues q ON q.queue = $1),
	keyed AS (` + sqlKeyed + `)
	INSERT INTO hourglass_tasks (job_id, partition, queue, id, state, priority, due, fire_at, created, ttr,
		attempts, max_attempts, lease, lease_until, timeouts, releases, buries, kicks, payload, trace_parent, trace_state, task_key)
	SELECT r.job_id, r.job_id % $2, $1, r.id, 1, r.priority, d.due, CASE WHEN d.due > now.ns THEN d.due END,
		now.ns, ` + sqlDefault("ttr", "$12") + `,
		0, greatest(` + sqlDefault("max_attempts", strconv.Itoa(service.DefaultMaxAttempts)) + `, 0), '', 0, 0, 0, 0, 0, r.payload,
		nullif(r.trace_parent, ''), nullif(r.trace_state, ''), r.task_key
	FROM unnest($3::bigint[], $4::text[], $5::bigint[], $6::bool[], $7::bigint[], $8::bigint[], $9::bigint[],
			$10::bigint[], $11::bytea[], $13::text[], $14::text[], $15::bool[], $16::text[]) WITH ORDINALITY
		AS r(job_id, id, priority, has_at, at, delay, ttr, max_attempts, payload, trace_parent, trace_state, dedupe, task_key, ord)
	CROSS JOIN now
	CROSS JOIN pol
	CROSS JOIN LATERAL (SELECT CASE WHEN r.has_at THEN r.at ELSE now.ns + r.delay END AS due) d
	WHERE NOT (r.dedupe AND ` + sqlDeduped + `)
	ORDER BY r.ord
	ON CONFLICT (queue, id) DO NOTHING
	RETURNING job_id, due, fire_at, created, (SELECT ns FROM now), ttr, max_attempts`

// sqlDefault is service.ApplyDefaults in SQL for column col of sqlInsert:
// the put's value (r) unless 0, else its queue policy's (pol) unless 0,
// else def, the server's, which comes from Go: the server's ttr ($12)
// and service.DefaultMaxAttempts. The max_attempts of
// task.UnlimitedAttempts (negative) then becomes 0, no limit, by
// greatest(…, 0) as by service.MaxAttempts. The cluster applies the rule
// in SQL rather than in Go because the policy is the one its statement
// reads: reading it first would cost a round trip per put, and a copy
// kept by the node could lag a policy set on another node.
// Its order is service.DefaultPrecedence's, the last source the CASE's
// ELSE. TestPolicies' put-defaults-rule compares every engine with
// ApplyDefaults.
func sqlDefault(col, def string) string {
	from := [3]string{service.FromPut: "r." + col, service.FromPolicy: "pol." + col, service.FromServer: def}
	order := service.DefaultPrecedence()
	sql := "CASE"
	for _, s := range order[:len(order)-1] {
		sql += " WHEN " + from[s] + " <> 0 THEN " + from[s]
	}
	return sql + " ELSE " + from[order[len(order)-1]] + " END"
}

// sqlKeyed gives each key of the put ($16) that has no turn in queue $1
// a row in hourglass_key_turns, the next turn (reserve.go's sqlReserve):
// the key "" only in a queue that uses keys (or with a put that does),
// so that a put without keys into a queue without them costs one lookup
// and writes nothing. A key with a row keeps its turn; its seen is
// renewed when older than keySeenRenew, so that the prune (sqlPruneKeys)
// does not drop the row of a key being put.
const sqlKeyed = `INSERT INTO hourglass_key_turns (queue, task_key, turn, seen)
		SELECT $1, k.task_key, nextval('hourglass_key_turn'), hourglass_now()
		FROM (SELECT DISTINCT task_key FROM unnest($16::text[]) AS u(task_key)) k
		WHERE k.task_key <> ''
			OR EXISTS (SELECT 1 FROM unnest($16::text[]) AS v(task_key) WHERE v.task_key <> '')
			OR EXISTS (SELECT 1 FROM hourglass_key_turns x WHERE x.queue = $1)
		ON CONFLICT (queue, task_key) DO UPDATE SET seen = excluded.seen
			WHERE hourglass_key_turns.seen < excluded.seen - ` + keySeenRenew + ``

// item is one request of a batch on its way to the database.
type item struct {
	i      int // index in the batch
	r      *task.PutRequest
	tm     timing
	job    uint64
	id     string
	gen    bool // id generated from the job id
	result task.PutResult
	done   bool  // result set
	fireAt int64 // after insert: the timer, 0 for none
	dbNow  int64
}

// PutBatch puts each of rs, in order, in one transaction, as the
// embedded engine does (service.Engine): created is false when r.ID names
// a live task, which is returned unchanged, or, with r.Replace, replaced
// by a new task with a new job id. A
// single INSERT of every task when no request replaces and no id repeats
// (the common case), else one statement per request. Its statements
// share one deadline (pool.bound): a put answers within the node's
// database timeout.
func (n *Node) PutBatch(ctx context.Context, queue string, rs []task.PutRequest) []task.PutResult {
	res := make([]task.PutResult, len(rs))
	fail := func(err error) []task.PutResult {
		for i := range res {
			if res[i].Err == nil {
				res[i] = task.PutResult{Err: err}
			}
		}
		return res
	}
	if err := n.Err(); err != nil {
		return fail(err)
	}
	ctx, cancel := n.db.bound(ctx)
	defer cancel()
	var items []*item
	simple := true
	seen := map[string]bool{}
	for i := range rs {
		it := &item{i: i, r: &rs[i], tm: timingOf(&rs[i]), id: rs[i].ID}
		if it.id != "" {
			if seen[it.id] || rs[i].Replace {
				simple = false
			}
			seen[it.id] = true
		}
		items = append(items, it)
	}
	if len(items) == 0 {
		return res
	}
	jobs, err := n.ids.take(ctx, n, len(items))
	if err != nil {
		return fail(err)
	}
	for k, it := range items {
		it.job = jobs[k]
		if it.id == "" {
			it.id, it.gen = strconv.FormatUint(it.job, 10), true
		}
	}
	if simple {
		err = n.putSimple(ctx, queue, items)
	} else {
		err = n.putEach(ctx, queue, items)
	}
	// Generated ids that a client had taken: the next of
	// service.GeneratedID's tries, as the broker, one statement each.
	for try := 1; err == nil && try < service.GeneratedIDTries; try++ {
		var again []*item
		for _, it := range items {
			if !it.done && it.gen {
				it.id = service.GeneratedID(it.job, try)
				again = append(again, it)
			}
		}
		if len(again) == 0 {
			break
		}
		err = n.putEach(ctx, queue, again)
	}
	if err != nil {
		return fail(err)
	}
	ready, put := 0, 0
	for _, it := range items {
		if !it.done {
			res[it.i].Err = service.NoFreeID(it.job) // every try taken (putEach answers the others)
			continue
		}
		res[it.i] = it.result
		if !it.result.Created && it.result.Task.JobID != it.job {
			continue // an existing task, returned unchanged
		}
		put++ // a new task, or one replacing: hourglass_tasks_put_total
		if it.fireAt != 0 {
			n.announce(it.job, it.fireAt, it.dbNow)
		} else {
			ready++
		}
	}
	if ready > 0 {
		n.readied(queue, ready)
	}
	n.metrics.Put(put)
	n.counters.count(queue, func(c *counts) { c.puts += uint64(len(items)) })
	return res
}

// readied announces k tasks made ready in queue, once they are
// committed: to this node's waiters first, at once, and to the other
// nodes' through chanReady only for what this node's waiters
// cannot take. Reservers on several nodes woken for the same few tasks
// would race for them (FOR UPDATE SKIP LOCKED), all but one for nothing.
func (n *Node) readied(queue string, k int) {
	n.mu.Lock()
	if q := n.queues[queue]; q != nil {
		k -= q.Wake(k)
	}
	n.mu.Unlock()
	if k > 0 {
		n.notifications.readyIn(queue, k)
	}
}

// insertArgs returns sqlInsert's arguments for items; dedupe says
// whether a dedupe window applies ($15) to those whose id a client chose.
func (n *Node) insertArgs(queue string, items []*item, dedupe bool) []any {
	k := len(items)
	jobs, prios, ats, delays, ttrs, maxAtt := make([]int64, k), make([]int64, k), make([]int64, k), make([]int64, k), make([]int64, k), make([]int64, k)
	ids, hasAt, payloads := make([]string, k), make([]bool, k), make([][]byte, k)
	parents, states, keys := make([]string, k), make([]string, k), make([]string, k)
	ded := make([]bool, k)
	for i, it := range items {
		jobs[i] = int64(it.job)
		ids[i] = it.id
		prios[i] = int64(it.r.Priority)
		hasAt[i], ats[i], delays[i] = it.tm.hasAt, it.tm.at, it.tm.delay
		ttrs[i] = int64(it.r.TTR)
		maxAtt[i] = int64(it.r.MaxAttempts)
		payloads[i] = it.r.Payload
		if payloads[i] == nil {
			payloads[i] = []byte{}
		}
		parents[i], states[i] = it.r.Trace.Parent, it.r.Trace.State
		ded[i] = dedupe && !it.gen
		keys[i] = it.r.Key
	}
	return []any{queue, n.partitions, jobs, ids, prios, hasAt, ats, delays, ttrs, maxAtt, payloads, int64(n.opts.DefaultTTR),
		parents, states, ded, keys}
}

// inserted is a RETURNING row of sqlInsert.
type inserted struct {
	job, due                      int64
	fireAt                        *int64
	created, dbNow, ttr, attempts int64
}

// dest returns the scan destinations of a RETURNING row of sqlInsert.
func (r *inserted) dest() []any {
	return []any{&r.job, &r.due, &r.fireAt, &r.created, &r.dbNow, &r.ttr, &r.attempts}
}

// created fills it's result from a RETURNING row of sqlInsert.
func (n *Node) created(queue string, it *item, ins inserted, replaced bool) {
	due, fireAt, createdAt, dbNow := ins.due, ins.fireAt, ins.created, ins.dbNow
	payload := it.r.Payload
	if payload == nil {
		payload = []byte{}
	}
	t := task.Task{
		ID: it.id, JobID: it.job, Queue: queue, State: task.Ready, Payload: payload,
		Priority: it.r.Priority, Due: time.Unix(0, due).UTC(), TTR: time.Duration(ins.ttr), MaxAttempts: int(ins.attempts),
		Created: time.Unix(0, createdAt).UTC(), Trace: it.r.Trace, Key: it.r.Key,
	}
	if fireAt != nil {
		t.State = task.Delayed
		it.fireAt = *fireAt
	}
	it.dbNow = dbNow
	it.result = task.PutResult{Task: t, Created: !replaced}
	it.done = true
}

// putSimple inserts items (distinct ids, no replace) with one statement,
// and undoes in the same transaction (sqlUndoDeduped) those that a
// dedupe window answers; those whose id is taken get the existing task,
// or the finished one. One round trip: the two statements are sent as
// one batch.
func (n *Node) putSimple(ctx context.Context, queue string, items []*item) error {
	byJob := make(map[int64]*item, len(items))
	jobs := make([]int64, 0, len(items)) // those whose id a client chose
	for _, it := range items {
		byJob[int64(it.job)] = it
		if !it.gen {
			jobs = append(jobs, int64(it.job))
		}
	}
	var b pgx.Batch
	b.Queue(sqlInsert, n.insertArgs(queue, items, true)...)
	b.Queue(sqlUndoDeduped, queue, jobs)
	br := n.db.SendBatch(ctx, &b)
	err := func() error {
		rows, err := br.Query()
		if err != nil {
			return err
		}
		for rows.Next() {
			var ins inserted
			if err := rows.Scan(ins.dest()...); err != nil {
				rows.Close()
				return err
			}
			if it := byJob[ins.job]; it != nil {
				n.created(queue, it, ins, false)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		return n.undone(br, byJob)
	}()
	if cerr := br.Close(); cerr != nil {
		err = cerr // as err, with a deadline of the pool's named (pool.check)
	}
	if err != nil {
		return dbErr(err)
	}
	var taken []string
	for _, it := range items {
		if !it.done && !it.gen {
			taken = append(taken, it.id)
		}
	}
	if len(taken) == 0 {
		return nil
	}
	existing, err := n.existing(ctx, n.db, queue, taken)
	if err != nil {
		return err
	}
	if err := n.addDeduped(ctx, n.db, queue, taken, existing); err != nil {
		return err
	}
	var vanished []*item
	for _, it := range items {
		if !it.done && !it.gen {
			t, ok := existing[it.id]
			if !ok {
				// Acked or deleted since the insert found it: put again,
				// with every other such item, after this loop (returning
				// here left the rest of the batch unanswered).
				vanished = append(vanished, it)
				continue
			}
			it.result = task.PutResult{Task: t}
			it.done = true
		}
	}
	if len(vanished) > 0 {
		return n.putEach(ctx, queue, vanished)
	}
	return nil
}

// sqlUndoDeduped deletes the tasks of queue $1 among the job ids $2,
// just inserted by the same transaction, whose id the queue's dedupe
// window answers (service.Dedupes), and returns their job ids. It is the
// statement after sqlInsert in one transaction: a statement of its own,
// so with a snapshot taken after the insert, which sees the record of an
// ack that the insert waited for (the unique index on queue and id makes
// an insert wait for the transaction deleting the task of its id) or
// that committed after the insert's snapshot. Without it a put begun
// before an ack's commit could create a second task of the id after the
// ack was answered. It finds the tasks by job id (the primary key: the
// index on queue and id, which a generic plan chose for t.queue = $1,
// made it walk the queue's tasks), after a test of the queue's row that
// PostgreSQL runs once (a one-time filter): a queue without a window
// costs that lookup.
const sqlUndoDeduped = `DELETE FROM hourglass_tasks t
	WHERE EXISTS (SELECT 1 FROM hourglass_queues w WHERE w.queue = $1 AND w.dedupe > 0)
		AND t.job_id = ANY($2::bigint[]) AND EXISTS (SELECT 1 FROM hourglass_queues q JOIN hourglass_dedupe x ON x.queue = q.queue
		WHERE q.queue = $1 AND q.dedupe > 0 AND x.id = t.id AND x.until > hourglass_now() AND x.finished + q.dedupe > hourglass_now())
	RETURNING t.job_id`

// batchQuerier is the next result of a batch.
type batchQuerier interface {
	Query() (pgx.Rows, error)
}

// undone reads sqlUndoDeduped's answer from br and marks the items of
// the job ids it deleted not done, for the caller to answer from their
// records.
func (n *Node) undone(br batchQuerier, byJob map[int64]*item) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var job int64
		if err := rows.Scan(&job); err != nil {
			return err
		}
		if it := byJob[job]; it != nil {
			it.done, it.result, it.fireAt = false, task.PutResult{}, 0
		}
	}
	return rows.Err()
}

// querier is what pool and transaction share.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// existing returns the live tasks of queue with the given ids.
func (n *Node) existing(ctx context.Context, db querier, queue string, ids []string) (map[string]task.Task, error) {
	rows, err := db.Query(ctx, "SELECT "+taskColumns+" FROM hourglass_tasks WHERE queue = $1 AND id = ANY($2)", queue, ids)
	if err != nil {
		return nil, dbErr(err)
	}
	defer rows.Close()
	out := map[string]task.Task{}
	for rows.Next() {
		t, err := scanRow(rows)
		if err != nil {
			return nil, dbErr(err)
		}
		out[t.id] = t.view()
	}
	return out, dbErr(rows.Err())
}

// addDeduped adds to found, the live tasks of ids in queue, the answers
// of the ids without one that the queue's dedupe window answers.
func (n *Node) addDeduped(ctx context.Context, db querier, queue string, ids []string, found map[string]task.Task) error {
	var rest []string
	for _, id := range ids {
		if _, ok := found[id]; !ok {
			rest = append(rest, id)
		}
	}
	if len(rest) == 0 {
		return nil
	}
	ded, err := n.dedupedOf(ctx, db, queue, rest)
	for id, t := range ded {
		found[id] = t
	}
	return err
}

// putEach puts items one after another in one transaction: a replace
// deletes the live task of its id first (in the history as deleted); an
// id taken returns the live task, or the finished one a dedupe window
// answers (a task inserted, unless it replaced one, is undone by
// sqlUndoDeduped then); a generated id taken is left not done for the
// caller.
func (n *Node) putEach(ctx context.Context, queue string, items []*item) error {
	err := pgx.BeginFunc(ctx, n.db, func(tx pgx.Tx) error {
		for _, it := range items {
			replaced := false
			if it.r.Replace && !it.gen {
				var k int64
				err := tx.QueryRow(ctx, sqlDeleteReplaced, n.keep(), queue, it.id).Scan(&k)
				if err != nil {
					return err
				}
				replaced = k > 0
			}
			var ins inserted
			err := tx.QueryRow(ctx, sqlInsert, n.insertArgs(queue, []*item{it}, !replaced)...).Scan(ins.dest()...)
			if err == nil && !replaced && !it.gen {
				// As putSimple: undone if an ack the insert raced
				// recorded the id meanwhile.
				var job int64
				switch uerr := tx.QueryRow(ctx, sqlUndoDeduped, queue, []int64{int64(it.job)}).Scan(&job); {
				case uerr == nil:
					err = pgx.ErrNoRows
				case uerr != pgx.ErrNoRows:
					return uerr
				}
			}
			switch {
			case err == nil:
				n.created(queue, it, ins, replaced)
			case err == pgx.ErrNoRows && !it.gen:
				ids := []string{it.id}
				ex, err := n.existing(ctx, tx, queue, ids)
				if err != nil {
					return err
				}
				if err := n.addDeduped(ctx, tx, queue, ids, ex); err != nil {
					return err
				}
				if t, ok := ex[it.id]; ok {
					it.result = task.PutResult{Task: t}
					it.done = true
				}
			case err == pgx.ErrNoRows:
			default:
				return err
			}
		}
		return nil
	})
	return dbErr(err)
}

// idBlock hands out job ids from the sequence hourglass_job_ids, fetched
// in blocks: one round trip per block rather than per put. Ids are unique
// across the cluster and increase on each node; across nodes they follow
// the blocks, not the order of puts.
//
// One caller at a time holds the block (turn), across the query that
// refills it; the others wait for their turn no longer than their own
// deadline, the node's database timeout at most: a database that stopped
// answering costs each put one timeout, not a place in a queue behind
// every put before it. idBlock is safe for concurrent use.
type idBlock struct {
	// turn, buffered 1, is held (sent to) by the caller using the block.
	turn chan struct{}
	// free ids, in increasing order. Guarded by turn.
	free []uint64
}

// idBlockSize is how many ids a node fetches beyond what it needs.
const idBlockSize = 128

// take returns k fresh job ids in increasing order. The wait for the
// block and the query that refills it share one deadline (pool.bound).
func (b *idBlock) take(ctx context.Context, n *Node, k int) ([]uint64, error) {
	ctx, cancel := n.db.bound(ctx)
	defer cancel()
	select {
	case b.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, dbErr(n.db.check(ctx, ctx.Err()))
	}
	defer func() { <-b.turn }()
	if len(b.free) < k {
		rows, err := n.db.Query(ctx, sqlNextIDs, k-len(b.free)+idBlockSize)
		if err != nil {
			return nil, dbErr(err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return nil, dbErr(err)
		}
		for _, id := range ids {
			b.free = append(b.free, uint64(id))
		}
		slices.Sort(b.free)
	}
	out := slices.Clone(b.free[:k])
	b.free = b.free[k:]
	return out, nil
}

// timing is when a put's task is due: at an instant (at), or delay after
// the database's clock reads at the insert.
type timing struct {
	hasAt bool
	at    int64 // Unix ns
	delay int64 // ns
}

// timingOf returns when the task of a put of r is due.
func timingOf(r *task.PutRequest) timing {
	if !r.At.IsZero() {
		return timing{hasAt: true, at: r.At.UnixNano()}
	}
	return timing{delay: int64(r.Delay)}
}

// sqlNextIDs takes the next $1 job ids.
const sqlNextIDs = "SELECT nextval('hourglass_job_ids') FROM generate_series(1, $1)"
