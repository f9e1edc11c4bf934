package cluster

import (
	"context"
	"math/rand/v2"

	"github.com/jackc/pgx/v5"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// What becomes of a reserved task given back: a nack, a release or a
// bury (Settle) or a lease that ran out with a policy to apply.
// Each is decided by service.Settled or service.Expired (service/settle.go)
// over the task's attempts and its queue's policy, read together by
// primary keys (readHeld), and the verdict written by one statement,
// sqlSettle, which only stores what Go decided, conditioned
// on the task still being reserved under the lease read: a concurrent
// ack, touch-and-nack or expiry changes the lease, and the statement then
// matches nothing (the caller's task.ErrLease), as every write of a
// lease holder is conditioned (ops.go). Two round trips; the statement
// returns the task as it is after.

// sqlSettle settles the reserved tasks $1 (job ids) held under the leases
// $2, each by its verdict (service.Verdict), which it only stores: $3
// dead, $4 its dead-letter queue ("" none), else $5 ready after that
// delay (ns; a timer when positive), or with $19 at its due time kept
// (KeepDue), its due time as Verdict.Due says; $6 its last error (NULL:
// kept); $7 its priority (NULL: kept); $8 to $11 added to attempts,
// releases, buries and timeouts; $12 only if its lease has run out by
// the database's clock (an expiry). A task dead-lettered moves to its
// dead-letter queue, ready, with its id, payload and last error, no
// attempts, and the max_attempts $17 and ttr $18 (0: its own kept) of
// that queue's policy (service.DeadLettered); a task of the same id in
// that queue is deleted first (gone, which the update waits for through
// its sub-select: the sub-statements of a WITH run in no set order
// otherwise, see
// https://www.postgresql.org/docs/current/queries-with.html#QUERIES-WITH-MODIFYING;
// the unique index then sees the row deleted by this transaction as gone).
// With $15 (keep the history) it records each task's attempt as ended
// by node $14 with the outcome $13, the error $20 and the HTTP status
// $16 (history.go), each task that died as dead in the queue it was in,
// and a task deleted from a dead-letter queue as deleted. A task made
// ready at once (no delay, or dead-lettered) notes now as its ready_at,
// where its wait for a worker starts (migration 009;
// service/lateness.go). It returns the tasks settled as they are after,
// the queue each was in, and the database's clock.
const sqlSettle = `WITH now AS MATERIALIZED (SELECT hourglass_now() AS ns),
	s AS MATERIALIZED (
		SELECT * FROM unnest($1::bigint[], $2::text[], $3::bool[], $4::text[], $5::bigint[], $6::text[],
			$7::bigint[], $8::bigint[], $9::bigint[], $10::bigint[], $11::bigint[], $12::bool[], $13::text[], $16::int[],
			$17::bigint[], $18::bigint[], $19::bool[], $20::text[])
		AS s(job_id, lease, dead, dlq, delay, err, prio, d_attempts, d_releases, d_buries, d_timeouts, expiry, outcome, status,
			dl_max, dl_ttr, keep_due, att_err)
	), held AS MATERIALIZED (
		SELECT s.*, t.queue AS src, t.id AS tid, t.tries, t.reserved, t.attempts AS attempts0, t.last_error AS error0
		FROM s JOIN hourglass_tasks t ON t.job_id = s.job_id, now
		WHERE t.state = 2 AND t.lease = s.lease AND (NOT s.expiry OR t.lease_until <= now.ns)
		FOR UPDATE OF t
	), gone AS (
		DELETE FROM hourglass_tasks d USING held h
		WHERE h.dead AND h.dlq <> '' AND d.queue = h.dlq AND d.id = h.tid AND d.job_id <> h.job_id
		RETURNING d.job_id, d.queue, d.id, d.attempts, d.last_error
	), att AS (` + sqlInsertAttempt + `SELECT h.job_id, h.tries, h.reserved, now.ns, h.outcome, h.att_err, h.status, $14,
			h.attempts0, h.src
		FROM held h, now WHERE $15` + sqlAttemptDone + `
	), fin AS (` + sqlInsertFinished + `
		SELECT g.job_id, g.queue, g.id, '` + task.FinishedDeleted + `', now.ns, g.attempts, g.last_error FROM gone g, now WHERE $15
		UNION ALL
		SELECT h.job_id, h.src, h.tid, '` + task.FinishedDead + `', now.ns, h.attempts0 + h.d_attempts, coalesce(h.err, h.error0)
		FROM held h, now WHERE $15 AND h.dead
	), ` + sqlDedupeHead + `
		SELECT g.job_id, g.queue, g.id, '` + task.FinishedDeleted + `', now.ns, g.attempts, g.last_error FROM gone g, now
		UNION ALL
		SELECT h.job_id, h.src, h.tid, '` + task.FinishedDead + `', now.ns, h.attempts0 + h.d_attempts, coalesce(h.err, h.error0)
		FROM held h, now WHERE h.dead` + sqlDedupeTail + `
	UPDATE hourglass_tasks t SET
		queue = CASE WHEN h.dead AND h.dlq <> '' THEN h.dlq ELSE t.queue END,
		state = CASE WHEN h.dead AND h.dlq = '' THEN 3 ELSE 1 END,
		priority = coalesce(h.prio, t.priority),
		due = CASE WHEN h.dead AND h.dlq <> '' THEN least(t.due, now.ns) WHEN h.dead OR h.keep_due THEN t.due
			ELSE now.ns + h.delay END,
		fire_at = CASE WHEN NOT h.dead AND h.delay > 0 THEN now.ns + h.delay END,
		died = CASE WHEN h.dead AND h.dlq = '' THEN now.ns END,
		attempts = CASE WHEN h.dead AND h.dlq <> '' THEN 0 ELSE t.attempts + h.d_attempts END,
		max_attempts = CASE WHEN h.dead AND h.dlq <> '' THEN h.dl_max ELSE t.max_attempts END,
		ttr = CASE WHEN h.dead AND h.dlq <> '' AND h.dl_ttr > 0 THEN h.dl_ttr ELSE t.ttr END,
		releases = t.releases + h.d_releases,
		buries = t.buries + h.d_buries, timeouts = t.timeouts + h.d_timeouts,
		last_error = coalesce(h.err, t.last_error),
		lease = '', lease_until = 0,
		ready_at = CASE WHEN (h.dead AND h.dlq <> '') OR (NOT h.dead AND h.delay <= 0) THEN now.ns END
	FROM held h, now
	WHERE t.job_id = h.job_id AND (SELECT count(*) FROM gone) >= 0
	RETURNING ` + returnTask + `, h.src, now.ns`

// settlement is one task's verdict for sqlSettle: the task job held
// under lease, and with expiry only if that lease has run out.
type settlement struct {
	job    int64
	lease  string
	v      service.Verdict
	expiry bool
}

// settledRow is a task settled by sqlSettle: as it is after, the queue it
// was in, and the database's clock.
type settledRow struct {
	row
	src   string
	dbNow int64
}

// settle runs sqlSettle over ss, after one read of the policies of the
// dead-letter queues ss moves tasks to (none when it moves none), and
// acts on the tasks settled: their verdicts counted
// (service.Verdict.Count), their timers announced, the reservers of the
// queues they are ready in woken, one reserver of each
// concurrency-limited queue they left woken too.
func (n *Node) settle(ctx context.Context, ss []settlement) ([]settledRow, error) {
	k := len(ss)
	jobs, leases, dead, dlqs, delays := make([]int64, k), make([]string, k), make([]bool, k), make([]string, k), make([]int64, k)
	errs, prios := make([]*string, k), make([]*int64, k)
	atts, rels, burs, tos, exps := make([]int64, k), make([]int64, k), make([]int64, k), make([]int64, k), make([]bool, k)
	outcomes, statuses := make([]string, k), make([]int32, k)
	dlMax, dlTTR := make([]int64, k), make([]int64, k)
	keepDue, attErrs := make([]bool, k), make([]string, k)
	var dlqs0 []string
	for _, s := range ss {
		if s.v.Dead && s.v.DeadLetter != "" {
			dlqs0 = append(dlqs0, s.v.DeadLetter)
		}
	}
	if len(dlqs0) > 0 {
		// A rare path: the dead-letter queues' policies, for what a task
		// moved there starts with.
		policies, err := n.policies(ctx, dlqs0)
		if err != nil {
			return nil, err
		}
		for i, s := range ss {
			if s.v.Dead && s.v.DeadLetter != "" {
				m, ttr := service.DeadLettered(policies[s.v.DeadLetter])
				dlMax[i], dlTTR[i] = int64(m), int64(ttr)
			}
		}
	}
	for i, s := range ss {
		v := s.v
		jobs[i], leases[i], dead[i], dlqs[i], delays[i] = s.job, s.lease, v.Dead, v.DeadLetter, int64(v.Delay)
		errs[i] = v.LastError
		if v.Priority != nil {
			p := int64(*v.Priority)
			prios[i] = &p
		}
		atts[i], rels[i], burs[i], tos[i], exps[i] = int64(v.Attempts), int64(v.Releases), int64(v.Buries), int64(v.Timeouts), s.expiry
		outcomes[i], statuses[i], keepDue[i], attErrs[i] = v.Attempt, int32(v.Status), v.KeepDue, v.AttemptError
	}
	rows, err := n.db.Query(ctx, sqlSettle, jobs, leases, dead, dlqs, delays, errs, prios, atts, rels, burs, tos, exps,
		outcomes, n.name, n.keep(), statuses, dlMax, dlTTR, keepDue, attErrs)
	if err != nil {
		return nil, dbErr(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (settledRow, error) {
		var s settledRow
		var err error
		s.row, err = scanRow(r, &s.src, &s.dbNow)
		return s, err
	})
	if err != nil {
		return nil, dbErr(err)
	}
	byJob := make(map[int64]*settlement, len(ss))
	for i := range ss {
		byJob[ss[i].job] = &ss[i]
	}
	for i := range out {
		s := &out[i]
		if st := byJob[s.job]; st != nil {
			st.v.Count(n.metrics.TaskMetrics, s.src, s.queue != s.src)
		}
		switch {
		case s.state == 1 && s.fireAt != nil:
			n.announce(uint64(s.job), *s.fireAt, s.dbNow)
		case s.state == 1:
			n.readied(s.queue, 1)
		}
		if s.queue != s.src || s.state != 1 || s.fireAt != nil {
			// A slot freed and not filled by a ready task in the queue.
			n.slotFreed(s.src)
		}
	}
	return out, nil
}

// readHeld reads the task matching where (a condition on
// hourglass_tasks t, with args, naming its lease) if it is reserved: its
// job id, and its attempts with its queue's policy; ok is false when none
// matches.
func (n *Node) readHeld(ctx context.Context, where string, args ...any) (job int64, h service.Held, ok bool, err error) {
	var p policyRow
	var attempts, maxAttempts int64
	err = n.db.QueryRow(ctx, `SELECT t.job_id, t.attempts, t.max_attempts, `+policyColumnsOf("p")+`
		FROM hourglass_tasks t LEFT JOIN hourglass_queues p ON p.queue = t.queue
		WHERE `+where+` AND `+sqlReservedByKey+``, args...).Scan(append([]any{&job, &attempts, &maxAttempts}, p.dest()...)...)
	if err == pgx.ErrNoRows {
		return 0, h, false, nil
	}
	if err != nil {
		return 0, h, false, dbErr(err)
	}
	return job, service.Held{Attempts: int(attempts), MaxAttempts: int(maxAttempts), Policy: p.policy()}, true, nil
}

// Settle ends the reservation lease of the task id of queue as st says
// (service.Engine), as service.Settled decides over its attempts and its
// queue's policy. It returns the task as it is after. Two round trips
// (see the top of this file); a renewal (service.Renewed, a touch) is one
// statement (touch).
func (n *Node) Settle(ctx context.Context, queue, id, lease string, st service.Settlement) (task.Task, error) {
	if err := n.Err(); err != nil {
		return task.Task{}, err
	}
	if st.Outcome == service.Renewed {
		return n.touch(ctx, queue, id, lease)
	}
	job, h, ok, err := n.readHeld(ctx, "t.queue = $1 AND t.id = $2 AND t.lease = $3", queue, id, lease)
	if err != nil {
		return task.Task{}, err
	}
	if !ok {
		return task.Task{}, n.why(ctx, queue, id)
	}
	v, err := service.Settled(ctx, st, h, rand.Float64())
	if err != nil {
		return task.Task{}, err
	}
	got, err := n.settle(ctx, []settlement{{job: job, lease: lease, v: v}})
	if err != nil {
		return task.Task{}, err
	}
	if len(got) == 0 {
		return task.Task{}, n.why(ctx, queue, id)
	}
	return got[0].view(), nil
}

// policies reads the policies of queues (those without one are absent).
// One read by primary key.
func (n *Node) policies(ctx context.Context, queues []string) (map[string]task.Policy, error) {
	policies := map[string]task.Policy{}
	rows, err := n.db.Query(ctx, "SELECT queue, "+policyColumns+" FROM hourglass_queues WHERE queue = ANY($1)", queues)
	if err != nil {
		return nil, dbErr(err)
	}
	defer rows.Close()
	for rows.Next() {
		var q string
		var p policyRow
		if err := rows.Scan(append([]any{&q}, p.dest()...)...); err != nil {
			return nil, dbErr(err)
		}
		policies[q] = p.policy()
	}
	if err := rows.Err(); err != nil {
		return nil, dbErr(err)
	}
	return policies, nil
}

// settleExpired settles leases that ran out in queues whose policy the
// flush leaves to the owner (the row's on_failure: a retry back-off, a
// dead-letter queue, or a concurrency limit, whose reservers settle wakes):
// it reads their queues' policies, decides each with service.Expired and
// settles them, conditioned on the lease that ran out. Two round trips,
// after the flush's own. Tasks whose settlement failed are armed again.
func (n *Node) settleExpired(ctx context.Context, expired []row) error {
	var queues []string
	seen := map[string]bool{}
	for i := range expired {
		if q := expired[i].queue; !seen[q] {
			seen[q] = true
			queues = append(queues, q)
		}
	}
	policies, err := n.policies(ctx, queues)
	if err == nil {
		// Two tasks dead-lettered into one queue under one id would collide
		// in one statement: the second waits for a statement of its own.
		for len(expired) > 0 && err == nil {
			var ss []settlement
			var later []row
			into := map[[2]string]bool{}
			for _, t := range expired {
				h := service.Held{Attempts: int(t.attempts), MaxAttempts: int(t.maxAttempts), Policy: policies[t.queue]}
				v := service.Expired(h, rand.Float64())
				if v.Dead && v.DeadLetter != "" {
					key := [2]string{v.DeadLetter, t.id}
					if into[key] {
						later = append(later, t)
						continue
					}
					into[key] = true
				}
				ss = append(ss, settlement{job: t.job, lease: t.lease, v: v, expiry: true})
			}
			var got []settledRow
			got, err = n.settle(ctx, ss)
			if err == nil {
				done := make(map[int64]bool, len(got))
				for _, s := range got {
					done[s.job] = true
				}
				// Not settled: acked or given back since (the next flush
				// finds no timer), or touched (it arms the new lease's end).
				var again []uint64
				for _, s := range ss {
					if !done[s.job] {
						again = append(again, uint64(s.job))
					}
				}
				n.timers.retry(again)
				expired = later
			}
		}
	}
	if err != nil {
		again := make([]uint64, len(expired))
		for i := range expired {
			again[i] = uint64(expired[i].job)
		}
		n.timers.retry(again)
	}
	return err
}

// The leases that ran out in queues without on_failure (no retry
// back-off, no dead-letter queue, no concurrency limit) are settled by
// the flush itself, in its one statement (sqlFlush), since reading them
// first would cost the flush a round trip. What becomes of each is still
// service.Expired's decision: flushLeft and flushUsedUp are its verdicts
// on such a task with attempts left and with them used up
// (service.ExpiryByCounters), and the statement only compares the row's
// counters (sqlUsedUp) to pick one. What the statement writes for them
// (ready at its due time kept, or dead where it is; a timeout more; the
// last error and the attempt's outcome) is held equal to those verdicts
// by TestFlush_ExpiryIsServices, and sqlUsedUp to service.UsedUp by
// TestFlush_UsedUpIsServices.
var flushLeft, flushUsedUp, _ = service.ExpiryByCounters(task.Policy{})

// sqlUsedUp is service.UsedUp over the row t's counters: its attempts
// (the running one counted) have reached its max_attempts (0: no limit).
const sqlUsedUp = `t.max_attempts > 0 AND t.attempts >= t.max_attempts`

// sqlDies says that the task t, reserved, dies when its lease runs out in
// a queue the flush settles: whether it does, with its attempts used up
// (sqlUsedUp) or left, is service.Expired's verdict (flushUsedUp,
// flushLeft), written into the statement as a constant.
var sqlDies = `t.state = 2 AND CASE WHEN ` + sqlUsedUp + ` THEN ` + sqlBool(flushUsedUp.Dead) +
	` ELSE ` + sqlBool(flushLeft.Dead) + ` END`

// sqlBool is b as an SQL literal.
func sqlBool(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
