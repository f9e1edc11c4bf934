package cluster

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hourglass-go/hourglass/internal/retry"
	"github.com/hourglass-go/hourglass/task"
)

// The flush: the owner's one statement that makes the fired timers' tasks
// ready (or their leases expired), fenced by the epochs of the partitions
// it writes, and hands tasks falling due to this node's waiting
// reservers in the same round trip.

// flushLanes is how many flushes an owner runs at once, each on a
// connection of its own (a lane). A flush holds the timers that fire
// during it only while it is quick: once it has run flushGap, the next
// batch starts beside it on the other lane, so that one slow statement
// (a backend waiting for a CPU, a lock, a cold cache) does not make every
// task falling due behind it as late.
const flushLanes = 2

// flushGap is the least time between the starts of two flushes of an
// owner: a flush starts at once when the last began longer ago (a timer
// after a quiet spell waits for nothing), and otherwise once flushGap
// has passed since, with every timer fired meanwhile. Under a steady
// load it sets how many timers a flush carries, and so how many
// statements the owner sends: a flush costs the server a fixed part
// several times that of a task it carries (BenchmarkFlush), and flushes
// started as soon as the one before ended carried a few timers each and
// queued behind each other for the CPU, so that the tasks came later
// than with the gap (issue 40's 1M row; figures in docs/results, the
// flush gap). A task waits at most flushGap more for it. It is also how
// long a flush runs before the next may start beside it (flushLanes).
const flushGap = 2 * time.Millisecond

// flushLoop is the flusher goroutine: it flushes fired timers as they
// come, a batch per round trip, on the lanes' connections (t.own; see
// flushLanes), a flush at most every flushGap: on a free lane once
// flushGap has passed since the last flush began, and after the one
// that ends first when both are busy. After a failed flush (its jobs
// put back, see retry) no flush starts before a back-off, up to a
// second: a database that is down sees about a flush a second, and the
// log a line. It makes each idle lane's connection ready (connect) before
// waiting, and looks again every ownIdle. On stop it waits for the
// flushes in flight. Each flush runs on a goroutine of its own, at most
// flushLanes at once.
func (t *timers) flushLoop() {
	defer t.wg.Done()
	backoff := retry.Backoff{Base: retry.DefaultBase, Max: time.Second}
	failures := retry.NewFailureLog(t.log, "hourglass: flushing timers failed; the sweep retries them", "hourglass: flushing timers works again")
	idle := time.NewTimer(ownIdle)
	defer idle.Stop()
	type result struct {
		lane int
		err  error
		plan bool // a planning run (plan.go), not a flush
	}
	done := make(chan result, flushLanes)
	var busy [flushLanes]bool
	var began time.Time // of the last flush
	inFlight := 0
	defer func() {
		for ; inFlight > 0; inFlight-- {
			<-done
		}
	}()
	pending := false        // a kick not yet served
	planNow := false        // the plan timer fired (plan.go)
	var notBefore time.Time // the back-off after a failure
	var later *time.Timer   // wakes the loop to look again (a flush turned slow, a back-off or a pause)
	defer func() {
		if later != nil {
			later.Stop()
		}
	}()
	for {
		cold := false
		for i, c := range t.own {
			if !busy[i] {
				t.connect(c)
				cold = cold || c.cold()
			}
		}
		// Plan the idle lanes still cold ahead of their first flush
		// (plan.go): now if timers are armed, else at the plan timer.
		if cold && !t.hooks.paused.Load() && (planNow || t.wantPlan()) {
			for i, c := range t.own {
				if !busy[i] && c.cold() {
					busy[i] = true
					inFlight++
					go func(lane int) {
						t.plan(t.own[lane])
						done <- result{lane: lane, plan: true}
					}(i)
				}
			}
		}
		planNow = false
		idle.Reset(ownIdle)
		var wake <-chan time.Time
		if later != nil {
			wake = later.C
		}
		select {
		case <-t.quit:
			return
		case <-idle.C:
		case <-t.kick:
			pending = true
		case <-t.planDue:
			planNow = true
		case <-wake:
			later = nil
		case r := <-done:
			busy[r.lane] = false
			inFlight--
			if r.plan {
				break
			}
			if r.err != nil {
				failures.Failed(r.err)
				notBefore = time.Now().Add(backoff.Next())
			} else {
				failures.OK()
				backoff.Reset()
			}
		}
		if !pending {
			continue
		}
		// When to look again if no lane is taken now (zero: at a flush's
		// end, or a kick).
		var again time.Duration
		lane := -1
		now := time.Now()
		switch {
		case t.hooks.paused.Load():
			again = 5 * time.Millisecond
		case now.Before(notBefore):
			again = notBefore.Sub(now)
		case now.Sub(began) < flushGap:
			// Too soon after the last flush began: wait out the gap.
			again = flushGap - now.Sub(began)
		default:
			for i := range busy {
				if !busy[i] {
					lane = i
					break
				}
			}
		}
		if lane < 0 {
			if again > 0 && later == nil {
				later = time.NewTimer(again)
			}
			continue
		}
		pending = false
		busy[lane], began = true, now
		inFlight++
		go func(lane int) {
			done <- result{lane: lane, err: t.flushOn(t.own[lane])}
		}(lane)
	}
}

// ownIdle is how often an idle flusher looks at its connections (connect).
const ownIdle = 10 * time.Second

// connect makes a lane's connection c ready while the node holds a
// partition, and closes it while it holds none, so that a node that owns
// nothing (more nodes than partitions) keeps no connection for it. A
// connection opened here is warmed (warm) before the first timer needs
// it; failing to open one is not reported: until a later try (after a
// back-off, ownConn.open) opens one, flushes run through the pool, and
// their failures are reported. Bounded by the pool's deadline, and cut
// short by stop. Called only while no flush runs on c.
func (t *timers) connect(c *ownConn) {
	if t.hooks.paused.Load() {
		return
	}
	if t.members.count() == 0 {
		c.close()
		return
	}
	c.open(t.done)
}

// warm readies conn for the flush statements (sqlFlushDue, sqlFlush)
// before the first timer is flushed there: it runs each once with
// nothing to flush (it fences no partition, so it locks, reads and
// writes no row), which loads the catalog entries of their tables,
// indexes and operators into the server process's caches, then drops
// each statement and prepares it again. The drop throws away the
// generic plan the run built: PostgreSQL builds it from the tables'
// statistics at that moment, and a plan built on a node's start over
// tables still empty (seq scans of a few pages, a nested loop of the due
// rows against the table's) makes every flush read whole tables once
// they are filled, until an autoanalyze makes it plan again. The lane
// plans them later, over the tables as they are then, with the caches
// warm: ahead of its first flush (plan.go), or at it.
func (t *timers) warm(ctx context.Context, conn *pgx.Conn) error {
	for _, st := range t.emptyFlushes() {
		if _, err := conn.Prepare(ctx, st.sql, st.sql); err != nil {
			return err
		}
		if err := st.run(ctx, conn); err != nil {
			return err
		}
		if err := conn.Deallocate(ctx, st.sql); err != nil {
			return err
		}
		if _, err := conn.Prepare(ctx, st.sql, st.sql); err != nil {
			return err
		}
	}
	return nil
}

// sqlFlush is the whole of a flush, one statement (see flush), run for
// the jobs sqlFlushDue leaves (leases ending; tasks of a keyed queue
// falling due for a waiter here), or for every job of a flush within
// wholeFor of one that left some:
//
//   - fence locks the rows of the partitions named in $2 (with their
//     epochs in $3) FOR KEY SHARE where this node ($1) still owns them at
//     those epochs with an unexpired lease. The lock is the fence: an
//     acquisition by another node (or a release) locks the row FOR
//     UPDATE, so it waits for this transaction (or skips the row), and
//     this statement sees the new epoch if that one committed first.
//     KEY SHARE, the weakest lock, so that the owner's own renewal of its
//     leases (FOR NO KEY UPDATE, renew.go), which commits synchronously
//     and holds the rows through its WAL flush, does not hold up the
//     tasks falling due meanwhile (issue 40); FOR UPDATE conflicts with
//     it as with FOR SHARE. Rows are locked in partition order, as the lease
//     loop locks them, so the two never deadlock. With each row locked it
//     sets synchronous_commit off for the statement's transaction
//     (set_config(..., true) is SET LOCAL, read at the commit): whenever
//     the statement writes anything, it has locked a row first.
//   - timers reads the tasks among the jobs $4 of those partitions that
//     have a timer, once, by primary key, and locks them in job order
//     (FOR NO KEY UPDATE, the lock the update takes): two flushes whose
//     jobs overlap (a node's two lanes, a timer announced twice) wait
//     for each other in one order and never deadlock, as they did when
//     each update locked its rows in the order of its plan; due are those whose time has
//     come by the database's clock (a task is never made ready before its
//     time): waiting tasks due, and reserved ones whose lease ran out.
//     Expired leases of queues whose policy needs the owner's decision
//     (hourglass_queues.on_failure: a retry back-off, a dead-letter queue,
//     a concurrency limit) are late instead, not due: the statement
//     leaves them for settleExpired (failure.go).
//   - hand picks among them, queue by queue, as many as this node's
//     waiting reservers take ($5 queues, $6 how many each; see
//     timers.flush), in queues not paused and without a rate or
//     concurrency limit (their reserves take the queue's row lock,
//     limits.go), leaving out the tasks whose attempts are used up. It
//     takes them as a reserve would (service.KeyCompare's rule, as
//     sqlReserveFair): first the round (inround: each key's first task
//     where it has the first priority among them, by the key's place
//     after the queue's cursor, hourglass_key_cursors, in the order of
//     the keys' names, the key "" after every other), then the fill in
//     delivery order (priority, due time, job id), which in a queue
//     without keys is the whole order; in a queue that uses keys the
//     cursor moves to the last key of the round handed (sqlKeyCursor).
//   - fired makes the due tasks ready, or reserved with a fresh lease for
//     those handed, noting when a delayed task or one whose lease ran out
//     was made ready (ready_at, for the lateness's split:
//     service/lateness.go; a lease's task keeps its due time, and its
//     wait for a worker starts now), and settles expired leases (ready again, or dead when
//     the attempts are used up: service.Expired's verdicts, sqlDies),
//     with $7 (task.LeaseExpired) as their last error.
//   - with $8 (keep the history), att records each expired lease's
//     attempt as expired by this node, and fin each task dead of it
//     (history.go).
//
// It returns one row per fenced-in partition (kind 0, a = partition), one
// per task made ready (kind 1, a = its timer's time, b = its job), one per job whose
// timer is not due after all (kind 2, a = job, b = how long until it is,
// by the database's clock): armed early by a skewed clock, or a lease
// renewed since; one per queue with leases settled (kind 3, a = leases
// that ran out, b = tasks dead of it), for the metrics; and one per task
// handed (kind 4, a = its timer's time, b = the database's clock), and one per late task
// (kind 5), whose columns lead every row (zeros in the other kinds). Every step is linear in the jobs named: they
// are read once by primary key (and again by the update), and kind 2
// leaves out the fired ones with NOT IN, which PostgreSQL runs as a hashed subplan (NOT EXISTS is planned
// as a nested-loop anti-join over the fired rows, quadratic in the jobs
// of a flush, which holds its fence, and the lease loop behind it,
// meanwhile).
var sqlFlush = sqlFlushFence + `,
	jobs AS MATERIALIZED (SELECT DISTINCT job_id FROM unnest($4::bigint[]) AS j(job_id)),
	timers AS MATERIALIZED (
		SELECT t.job_id, t.queue, t.task_key, t.priority, t.due, t.fire_at, t.state AS was, ` + sqlDies + ` AS dies,
			t.tries AS tries0, t.reserved AS reserved0, t.attempts AS attempts0,
			t.state = 2 AND EXISTS (SELECT 1 FROM hourglass_queues p WHERE p.queue = t.queue AND p.on_failure) AS deferred
		FROM jobs JOIN hourglass_tasks t ON t.job_id = jobs.job_id
		WHERE t.partition = ANY(ARRAY(SELECT partition FROM fence)) AND t.fire_at IS NOT NULL
		ORDER BY t.job_id FOR NO KEY UPDATE OF t
	), due AS MATERIALIZED (
		SELECT timers.* FROM timers, now WHERE fire_at <= now.ns AND was IN (1, 2) AND NOT deferred
	), late AS MATERIALIZED (
		SELECT job_id FROM timers, now WHERE fire_at <= now.ns AND deferred
	), hand AS MATERIALIZED (
		SELECT job_id, queue, task_key, cls, inround FROM (
			SELECT z.*, row_number() OVER (PARTITION BY z.queue ORDER BY z.inround DESC,
					CASE WHEN z.inround THEN z.cls END, CASE WHEN z.inround THEN z.task_key END,
					z.priority, z.due, z.job_id) AS rn
			FROM (SELECT y.*, y.round = 1 AND y.priority = min(y.priority) OVER (PARTITION BY y.queue) AS inround FROM (
				SELECT d.job_id, d.queue, d.task_key, d.priority, d.due, w.lim,
					row_number() OVER (PARTITION BY d.queue, d.task_key ORDER BY ` + deliveryOrderOf("d") + `) AS round,
					CASE WHEN d.task_key > cur.k THEN 0 WHEN d.task_key = '' THEN 1 ELSE 2 END AS cls
				FROM due d JOIN unnest($5::text[], $6::int[]) AS w(queue, lim) ON w.queue = d.queue, now,
					LATERAL (SELECT coalesce((SELECT kc.task_key FROM hourglass_key_cursors kc WHERE kc.queue = d.queue), '') AS k) cur
				WHERE NOT d.dies AND NOT EXISTS (SELECT 1 FROM hourglass_queues p
					WHERE p.queue = d.queue AND (p.paused_until > now.ns OR p.limited))
			) y) z
		) x WHERE rn <= lim
	), fired AS (
		UPDATE hourglass_tasks t SET` + sqlFiredSet("d.take", sqlDies, "$9", "$7") + `
		FROM now, (SELECT due.*, job_id IN (SELECT job_id FROM hand) AS take FROM due) d
		WHERE t.job_id = d.job_id AND t.fire_at <= now.ns AND t.state IN (1, 2)
		RETURNING ` + returnTask + `, d.was, d.take AND t.state = 2 AS handed, d.tries0, d.reserved0,
			d.attempts0, d.fire_at AS timer_at
	), att AS (` + sqlInsertAttempt + `SELECT job_id, tries0, reserved0, now.ns, '` + task.AttemptExpired + `', $7, 0, $1,
			attempts0, queue
		FROM fired, now WHERE was = 2 AND $8` + sqlAttemptDone + `
	), fin AS (` + sqlInsertFinished + `SELECT job_id, queue, id, '` + task.FinishedDead + `', now.ns, attempts, last_error
		FROM fired, now WHERE state = 3 AND $8
	), ` + sqlDedupeHead + `SELECT job_id, queue, id, '` + task.FinishedDead + `', now.ns, attempts, last_error
		FROM fired, now WHERE state = 3` + sqlDedupeTail + `, moved AS (
		SELECT DISTINCT ON (h.queue) h.queue, h.task_key
		FROM (SELECT hand.*, job_id IN (SELECT job_id FROM fired WHERE handed) AS took FROM hand) h
		WHERE h.took AND h.inround AND EXISTS (SELECT 1 FROM hourglass_key_turns x WHERE x.queue = h.queue)
		ORDER BY h.queue, h.cls DESC, h.task_key DESC
	), ` + sqlKeyCursor + `
	SELECT ` + zeroTask + `, s.* FROM (
		SELECT 0 AS kind, partition::bigint AS a, 0::bigint AS b, '' AS queue FROM fence
		UNION ALL
		SELECT 1, timer_at, job_id, queue FROM fired WHERE state = 1
		UNION ALL
		SELECT 2, job_id, fire_at - now.ns, '' FROM timers, now
		WHERE job_id NOT IN (SELECT job_id FROM fired) AND job_id NOT IN (SELECT job_id FROM late)
		UNION ALL
		SELECT 3, count(*) FILTER (WHERE was = 2), count(*) FILTER (WHERE state = 3), queue FROM fired
		GROUP BY queue HAVING count(*) FILTER (WHERE was = 2) > 0
	) s
	UNION ALL
	SELECT job_id, queue, id, state, priority, due, fire_at, created, ttr, attempts, max_attempts, lease, lease_until,
		timeouts, releases, buries, kicks, payload, partition, last_error,
		trace_parent, trace_state, task_key, 4, timer_at, now.ns, ''
	FROM fired, now WHERE handed
	UNION ALL
	SELECT ` + returnTask + `, 5, 0, now.ns, '' FROM late JOIN hourglass_tasks t ON t.job_id = late.job_id, now`

// sqlFiredSet is the SET list of a flush's update of a task t whose
// timer fired, for sqlFlush and sqlFlushDue alike: dead when dies (a
// lease that ran out with its attempts used up: sqlDies), reserved under
// the lease token then the job id (sqlLease) when take (handed to a
// waiter of this node), else ready, noting when (ready_at); a lease that
// ran out counts a timeout, and its task takes expiredErr as its last
// error. sqlFlushDue's tasks are all waiting: its dies is false, and no
// t.state is 2.
func sqlFiredSet(take, dies, token, expiredErr string) string {
	got := "(" + take + ") AND NOT (" + dies + ")"
	return `
			state = CASE WHEN ` + dies + ` THEN 3 WHEN ` + take + ` THEN 2 ELSE 1 END,
			died = CASE WHEN ` + dies + ` THEN now.ns END,
			timeouts = t.timeouts + CASE WHEN t.state = 2 THEN 1 ELSE 0 END,
			attempts = t.attempts + CASE WHEN ` + got + ` THEN 1 ELSE 0 END,
			lease = CASE WHEN ` + got + ` THEN ` + token + sqlLease + ` ELSE '' END,
			lease_until = CASE WHEN ` + got + ` THEN now.ns + t.ttr ELSE 0 END,
			fire_at = CASE WHEN ` + got + ` THEN now.ns + t.ttr END,
			reserved = CASE WHEN ` + got + ` THEN now.ns ELSE t.reserved END,
			tries = t.tries + CASE WHEN ` + got + ` THEN 1 ELSE 0 END,
			last_error = CASE WHEN t.state = 2 THEN ` + expiredErr + ` ELSE t.last_error END,
			ready_at = CASE WHEN NOT (` + take + `) AND NOT (` + dies + `) THEN now.ns END`
}

// sqlFlushFence begins both flush statements (sqlFlush, sqlFlushDue):
// the fence and the database's clock, as sqlFlush's doc says.
const sqlFlushFence = `WITH fence AS MATERIALIZED (
		SELECT p.partition, set_config('synchronous_commit', 'off', true) FROM hourglass_partitions p
		JOIN unnest($2::int[], $3::bigint[]) AS m(partition, epoch) ON m.partition = p.partition
		WHERE p.owner = $1 AND p.epoch = m.epoch AND p.lease_until > clock_timestamp()
		ORDER BY p.partition FOR KEY SHARE OF p
	), now AS MATERIALIZED (SELECT hourglass_now() AS ns)`

// zeroTask stands for returnTask in rows that carry no task.
const zeroTask = `0::bigint, ''::text, ''::text, 0::smallint, 0::bigint, 0::bigint, NULL::bigint, 0::bigint, 0::bigint,
		0::bigint, 0::bigint, ''::text, 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint, ''::bytea, 0, ''::text,
		''::text, ''::text, ''::text`

// flush writes the fired timers in one statement, sqlFlushDue, and so one
// transaction and one round trip, unless some are leases ending: those
// take a second, sqlFlush (see sqlFlushDue). Each commits without waiting for the WAL
// flush (synchronous_commit off), since nothing it writes was promised to
// anyone: if a crash loses it, the tasks are still due in the record and
// the next owner makes them ready again; and the ack of a task it made
// ready commits synchronously, flushing the WAL up to and past it.
//
// The same statement reserves tasks for this node's reservers waiting on
// one queue each, as many as they take: a task falling due is handed to
// a waiter by the statement that makes it due (service.WaitList.HandOver), with
// no wake and no statement of the waiter's own, which saves the round
// trip of a woken waiter's reservation; the tasks of
// waiters that left meanwhile are given back (giveBack). The hand-over
// takes only tasks falling due in this flush: a reserver waits only when
// it found no task ready. It then wakes the reservers of the queues it
// made tasks ready in (readied).
func (t *timers) flush() error { return t.flushOn(t.own[0]) }

// flushOn is flush on the lane whose connection is own. Flushes may run
// on distinct lanes at once: each takes the jobs fired until it starts
// (t.fired), so no job is in two of them unless it was armed again
// meanwhile, which the statement allows for (a task no longer due is left
// as it is). Two flushes at once may reserve tasks for the same waiting
// reservers, each under its own lease token: the one that ends second
// gives back what no waiter was left to take (handOver), as a flush
// alone does when its waiters left during it.
func (t *timers) flushOn(own *ownConn) error {
	t.mu.Lock()
	fired, firedAt := t.fired, t.firedAt
	t.fired, t.firedAt = nil, nil
	// Read after fired: a job in it was armed while its partition was
	// held (see load), so a partition acquired meanwhile keeps it.
	owned := t.members.snapshot()
	t.mu.Unlock()
	// The hop fired → flushing: how long each job waited for this flush
	// to begin (the flusher busy with the one before, or not yet run).
	start := time.Now().UnixNano()
	for _, at := range firedAt {
		t.metrics.hopFlushing.Observe(float64(start-at) / 1e9)
	}
	var parts []int32
	var epochs []int64
	var jobs []int64
	byPart := map[int][]int64{}
	for _, job := range fired {
		p := t.partitionOf(job)
		if _, ok := owned[p]; ok {
			byPart[p] = append(byPart[p], int64(job))
			jobs = append(jobs, int64(job))
		}
	}
	if len(byPart) == 0 {
		return nil
	}
	heldAt := make(map[int]int64, len(byPart))
	for p := range byPart {
		parts = append(parts, int32(p))
		epochs = append(epochs, owned[p])
		heldAt[p] = owned[p]
	}
	handQueues, handLims := t.env.waiting(len(jobs))
	if f := t.hooks.flushing.Load(); f != nil {
		(*f)()
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	readyIn := map[string]int{}
	fencedIn := map[int]bool{}
	type pending struct {
		job  uint64
		left time.Duration
	}
	var again []pending
	var expired int64
	// retried counts, by queue, the tasks whose lease ran out that came
	// back and those that died of it.
	retried := map[string]struct{ retried, dead int64 }{}
	var handed, late []row
	var dbNow int64
	// Of the tasks made ready or handed, for the hops due → fired and due
	// → flushed: their timers' times, and their jobs.
	var timerAts, timerJobs []int64
	// left are the jobs sqlFlushDue left to sqlFlush (kind 6).
	var left []int64
	handedIn := map[string]int{}
	flush := func(sql string, jobs []int64, lims []int32, args ...any) error {
		if sql == sqlFlushDue {
			t.metrics.flushDue.Inc()
		} else {
			t.metrics.flushWhole.Inc()
		}
		rows, err := own.LeaseQuery(ctx, t.env.leaseCall(handQueues), sql,
			append([]any{t.name, parts, epochs, jobs, handQueues, lims}, args...)...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var kind int
			var a, b int64
			var queue string
			r, err := scanRow(rows, &kind, &a, &b, &queue)
			if err != nil {
				return err
			}
			switch kind {
			case 0:
				fencedIn[int(a)] = true
			case 1:
				readyIn[queue]++
				timerAts, timerJobs = append(timerAts, a), append(timerJobs, b)
			case 2:
				again = append(again, pending{uint64(a), time.Duration(b)})
			case 3:
				expired += a
				k := retried[queue]
				k.retried, k.dead = k.retried+max(a-b, 0), k.dead+b
				retried[queue] = k
			case 4:
				r.readyAt = b // made ready and handed over at once
				handed, dbNow = append(handed, r), b
				handedIn[r.queue]++
				timerAts, timerJobs = append(timerAts, a), append(timerJobs, r.job)
			case 5:
				late = append(late, r)
			case 6:
				left = append(left, a)
			}
		}
		rows.Close()
		return rows.Err()
	}
	began := time.Now()
	// The waiting tasks first (sqlFlushDue), then the jobs it left, if
	// any, by the whole statement, with what the waiters still take. A
	// flush that left jobs makes those of the next wholeFor go to the
	// whole statement at once: they would likely leave some too.
	var err error
	retry := jobs
	if began.UnixNano() < t.wholeUntil.Load() {
		err = flush(sqlFlush, jobs, handLims, task.LeaseExpired, t.keep)
	} else if err = flush(sqlFlushDue, jobs, handLims); err == nil && len(left) > 0 {
		t.wholeUntil.Store(time.Now().Add(wholeFor).UnixNano())
		lims := make([]int32, len(handLims))
		for i, q := range handQueues {
			lims[i] = max(handLims[i]-int32(handedIn[q]), 0)
		}
		err, retry = flush(sqlFlush, left, lims, task.LeaseExpired, t.keep), left
	}
	if err != nil {
		// Put the jobs back for the next round; the sweep is the backstop.
		js := make([]uint64, len(retry))
		for i, j := range retry {
			js[i] = uint64(j)
		}
		t.retry(js)
		if len(retry) == len(jobs) {
			return err
		}
		// sqlFlushDue committed: what it did stands and is handed on
		// below; the error is returned at the end.
	}
	// The rows are read and the statement has committed (rows.Close).
	flushed := t.clock.now()
	for _, at := range timerAts {
		t.metrics.hopFlushed.Observe(max(time.Duration(flushed-at), 0).Seconds())
	}
	// The hop due → fired: when the wheel fired each job, on the
	// database's clock as this node estimates it, minus its timer's time.
	if len(timerJobs) > 0 {
		offset := t.clock.now() - time.Now().UnixNano()
		when := make(map[int64]int64, len(fired))
		for i, j := range fired {
			when[int64(j)] = firedAt[i]
		}
		for i, j := range timerJobs {
			if at, ok := when[j]; ok {
				t.metrics.hopFired.Observe(max(time.Duration(at+offset-timerAts[i]), 0).Seconds())
			}
		}
	}
	if len(handed) > 0 {
		if f := t.hooks.handing.Load(); f != nil {
			(*f)()
		}
		t.env.handOver(handed, dbNow)
	}
	t.metrics.flushSeconds.Observe(time.Since(began).Seconds())
	t.metrics.flushTimers.Observe(float64(len(jobs)))
	t.metrics.Expired(int(expired))
	for q, k := range retried {
		t.metrics.Failed(q, int(k.retried), false, false)
		t.metrics.Failed(q, int(k.dead), true, false)
	}
	var fenced []int
	for p := range byPart {
		if !fencedIn[p] {
			fenced = append(fenced, p)
		}
	}
	if len(fenced) > 0 {
		t.log.Warn("hourglass: fenced out of partitions (lease lost); their timers dropped", "partitions", fenced)
		t.metrics.lost.Add(float64(len(fenced)))
		t.members.dropAt(fenced, heldAt)
		// A partition taken again meanwhile at a new epoch keeps its
		// lease; its jobs this flush could not write are armed again
		// (the acquisition's load armed them too, unless it ran first).
		t.mu.Lock()
		for _, p := range fenced {
			if _, ok := t.members.holds(p); ok {
				for _, j := range byPart[p] {
					t.armAt(uint64(j), t.clock.now())
				}
			}
		}
		t.mu.Unlock()
	}
	t.metrics.early.Add(float64(len(again)))
	t.mu.Lock()
	for _, p := range again {
		// Not due by the database's clock: armed again for exactly the
		// rest, measured on the database's clock, not this node's.
		d := max(p.left, time.Millisecond)
		if dl, ok := t.wheel.Deadline(p.job); !ok || time.Now().Add(d).Before(dl) {
			t.wheel.Set(p.job, d)
		}
	}
	t.mu.Unlock()
	for q, k := range readyIn {
		t.env.readied(q, k)
	}
	if err != nil {
		return err
	}
	if len(late) > 0 {
		return t.env.settleExpired(ctx, late)
	}
	return nil
}
