package cluster

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hourglass-go/hourglass"
	"github.com/hourglass-go/hourglass/internal/schedrun"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// Cron schedules live in hourglass_schedules. A schedule belongs to the
// partition its name hashes to, and only that partition's owner fires it,
// through internal/schedrun's Runner (n.runner): the lease loop hands it
// the schedules of the partitions the node owns (reconcileSchedules), and
// it calls occur, which puts an occurrence's task, fenced by the
// partition's epoch, in the transaction that records it as the
// schedule's last, with the task id "NAME@TIME", which the unique
// (queue, id) makes idempotent. So an occurrence is put once across the
// cluster, across takeovers too: a new owner's Runner puts the
// occurrences missed since the last one recorded that the misfire rule
// keeps and arms the next. The overlap rule reads the schedule's last
// task in the same transaction. A paused schedule is armed nowhere; run
// now is a put by whichever node is asked, then a statement that records
// it as the schedule's last.

// schedulePartition returns the partition whose owner fires schedule name.
func (n *Node) schedulePartition(name string) int {
	h := fnv.New32a()
	h.Write([]byte(name))
	return int(h.Sum32() % uint32(n.partitions))
}

// parseSchedule checks spec against the node's limits and parses its
// cron line and time zone.
func (n *Node) parseSchedule(spec task.ScheduleSpec) (hourglass.Schedule, *time.Location, error) {
	return service.ParseSchedule(spec, n.opts.MaxPayload)
}

// SetSchedule writes the schedule name as c says (service.Engine), as
// service.WriteSchedule dispatches it: a new spec (PutSchedule), or a
// change of the schedule stored (ChangeSchedule), each one transaction.
// The owner of the schedule's partition arms it on its next lease tick,
// which the announcement on the schedules channel brings forward to now.
func (n *Node) SetSchedule(ctx context.Context, name string, c service.ScheduleChange) (task.ScheduleInfo, bool, error) {
	if err := n.Err(); err != nil {
		return task.ScheduleInfo{}, false, err
	}
	return service.WriteSchedule(ctx, (*scheduleStore)(n), n.opts.MaxPayload, name, c)
}

// scheduleStore is the node as service.WriteSchedule sees it.
type scheduleStore Node

// sqlPutSchedule creates or replaces a schedule, keeping a replaced one's
// cursor, and answers whether it inserted, the cursor and its version
// (the database's clock). A new schedule past the limit $13 inserts no
// row, and so answers none; a replacement always does. Two nodes
// creating at once may each pass the count: the limit bounds the table,
// not to the row.
const sqlPutSchedule = `INSERT INTO hourglass_schedules AS s (name, cron, queue, timezone, payload, created, last,
			misfire, overlap, catch_up, priority, ttr, max_attempts, paused)
		SELECT $1, $2, $3, $4, $5, hourglass_now(), 0, $6, $7, $8, $9, $10, $11, $12
		WHERE EXISTS (SELECT 1 FROM hourglass_schedules WHERE name = $1)
			OR (SELECT count(*) FROM hourglass_schedules) < $13
		ON CONFLICT (name) DO UPDATE SET cron = EXCLUDED.cron, queue = EXCLUDED.queue,
			timezone = EXCLUDED.timezone, payload = EXCLUDED.payload, created = EXCLUDED.created,
			misfire = EXCLUDED.misfire, overlap = EXCLUDED.overlap, catch_up = EXCLUDED.catch_up,
			priority = EXCLUDED.priority, ttr = EXCLUDED.ttr, max_attempts = EXCLUDED.max_attempts,
			paused = EXCLUDED.paused
		RETURNING xmax = 0, last, last_run, last_id, created`

// sqlCursor reads a schedule's pause and cursor, and the database's
// clock, locking its row for the transaction; sqlSetCursor writes them.
const (
	sqlCursor    = `SELECT paused, last, last_run, last_id, hourglass_now() FROM hourglass_schedules WHERE name = $1 FOR UPDATE`
	sqlSetCursor = `UPDATE hourglass_schedules SET paused = $2, last = $3, last_run = $4, last_id = $5 WHERE name = $1`
)

// PutSchedule creates or replaces the schedule spec.Name, durably, as
// the embedded engine does (service.ScheduleStore), in one transaction:
// the row locked and its pause read, the upsert, and, where the
// replacement unpauses it (service.ScheduleCursor.Resumed), its cursor
// moved to the replacement's time. created is false for a replacement.
func (ss *scheduleStore) PutSchedule(ctx context.Context, spec task.ScheduleSpec, sched hourglass.Schedule, loc *time.Location) (task.ScheduleInfo, bool, error) {
	n := (*Node)(ss)
	payload := spec.Payload
	if payload == nil {
		payload = []byte{}
	}
	var inserted bool
	var r scheduleRow
	limit := n.opts.MaxSchedules
	if limit <= 0 {
		limit = task.DefaultMaxSchedules
	}
	err := pgx.BeginFunc(ctx, n.db, func(tx pgx.Tx) error {
		was := false
		var c service.ScheduleCursor
		var now int64
		err := tx.QueryRow(ctx, sqlCursor, spec.Name).Scan(&was, &c.Last, &c.LastRun, &c.LastID, &now)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		var created int64
		err = tx.QueryRow(ctx, sqlPutSchedule,
			spec.Name, spec.Cron, spec.Queue, spec.Timezone, payload,
			spec.Misfire, spec.Overlap, int64(spec.CatchUp), int64(*spec.Priority), int64(spec.TTR), int64(spec.MaxAttempts), spec.Paused,
			int64(limit),
		).Scan(&inserted, &r.last, &r.lastRun, &r.lastID, &created)
		if err != nil {
			return err
		}
		c = service.ScheduleCursor{Last: r.last, LastRun: r.lastRun, LastID: r.lastID}
		if moved := c.Resumed(was, spec.Paused, created); moved != c {
			r.last = moved.Last
			_, err = tx.Exec(ctx, sqlSetCursor, spec.Name, spec.Paused, moved.Last, moved.LastRun, moved.LastID)
		}
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return task.ScheduleInfo{}, false, service.TooManySchedules(limit)
	}
	if err != nil {
		return task.ScheduleInfo{}, false, dbErr(err)
	}
	n.notifications.send(chanSchedules, spec.Name)
	n.kickTick()
	r.spec = spec
	i := info(r, sched, loc)
	if i.LastTaskID != "" {
		t, err := n.Read(service.TaskRef{Queue: i.Queue, ID: i.LastTaskID})
		i.LastOutcome = service.LastOutcome(err == nil, t.State, "")
	}
	return i, inserted, nil
}

// info is a schedule as the API reports it, without the outcome of a
// last task that was put.
func info(r scheduleRow, sched hourglass.Schedule, loc *time.Location) task.ScheduleInfo {
	var next time.Time
	if !r.spec.Paused {
		next = service.NextOccurrence(sched, loc, time.Now())
	}
	return service.NewScheduleInfo(r.spec, next, r.lastRun, r.lastID)
}

// DeleteSchedule deletes the schedule name, durably, or returns
// task.ErrNoSchedule. Tasks it put stay. One statement.
func (n *Node) DeleteSchedule(ctx context.Context, name string) error {
	if err := n.Err(); err != nil {
		return err
	}
	tag, err := n.db.Exec(ctx, "DELETE FROM hourglass_schedules WHERE name = $1", name)
	if err != nil {
		return dbErr(err)
	}
	if tag.RowsAffected() == 0 {
		return task.ErrNoSchedule
	}
	n.notifications.send(chanSchedules, name)
	n.kickTick()
	return nil
}

// ChangeSchedule applies c, a run the front put or a pause, to the
// schedule name, durably, or returns task.ErrNoSchedule
// (service.ScheduleStore): one transaction, its row locked and read with
// the database's clock, its pause and cursor moved as
// service.ScheduleCursor.Changed says and written if they moved. A run
// counts in its puts; a pause or resume is announced, so that the
// partition's owner disarms or arms it.
func (ss *scheduleStore) ChangeSchedule(ctx context.Context, name string, c service.ScheduleChange) error {
	n := (*Node)(ss)
	err := pgx.BeginFunc(ctx, n.db, func(tx pgx.Tx) error {
		var was bool
		var cur service.ScheduleCursor
		var now int64
		err := tx.QueryRow(ctx, sqlCursor, name).Scan(&was, &cur.Last, &cur.LastRun, &cur.LastID, &now)
		if errors.Is(err, pgx.ErrNoRows) {
			return task.ErrNoSchedule
		}
		if err != nil {
			return err
		}
		moved, paused := cur.Changed(c, was, now)
		if moved == cur && paused == was {
			return nil
		}
		_, err = tx.Exec(ctx, sqlSetCursor, name, paused, moved.Last, moved.LastRun, moved.LastID)
		return err
	})
	if errors.Is(err, task.ErrNoSchedule) {
		return err
	}
	if err != nil {
		return dbErr(err)
	}
	if c.Run != nil {
		n.metrics.schedules.Occurred(name)
		return nil
	}
	n.notifications.send(chanSchedules, name)
	n.kickTick()
	return nil
}

// scheduleRow is a row of hourglass_schedules, with the state of its
// last task (0: not live) and that task's newest outcome in the history
// ("" for none).
type scheduleRow struct {
	spec                   task.ScheduleSpec
	created, last, lastRun int64
	lastID                 string
	lastState              int16
	lastFinished           string
}

// readSchedules reads the schedules that where selects, with its
// one argument arg ("" for none), by name: one statement, with the state
// of each one's last task and its outcome in the history.
func (n *Node) readSchedules(ctx context.Context, where, arg string) ([]scheduleRow, error) {
	var args []any
	if where != "" {
		args = append(args, arg)
	}
	rows, err := n.db.Query(ctx, `SELECT s.name, s.cron, s.queue, s.timezone, s.payload, s.created, s.last,
			s.misfire, s.overlap, s.catch_up, s.priority, s.ttr, s.max_attempts, s.paused, s.last_run, s.last_id,
			coalesce(t.state, 0), coalesce(h.outcome, '')
		FROM hourglass_schedules s
		LEFT JOIN hourglass_tasks t ON s.last_id <> '' AND t.queue = s.queue AND t.id = s.last_id
		LEFT JOIN LATERAL (SELECT outcome FROM hourglass_history
			WHERE s.last_id <> '' AND t.job_id IS NULL AND queue = s.queue AND id = s.last_id ORDER BY seq DESC LIMIT 1) h ON true
		`+where+` ORDER BY s.name COLLATE "C"`, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (scheduleRow, error) {
		var s scheduleRow
		var catchUp, priority, ttr, maxAttempts int64
		err := r.Scan(&s.spec.Name, &s.spec.Cron, &s.spec.Queue, &s.spec.Timezone, &s.spec.Payload, &s.created, &s.last,
			&s.spec.Misfire, &s.spec.Overlap, &catchUp, &priority, &ttr, &maxAttempts, &s.spec.Paused, &s.lastRun, &s.lastID,
			&s.lastState, &s.lastFinished)
		if len(s.spec.Payload) == 0 {
			s.spec.Payload = nil
		}
		p := uint32(priority)
		s.spec.CatchUp, s.spec.Priority, s.spec.TTR, s.spec.MaxAttempts = time.Duration(catchUp), &p, time.Duration(ttr), int(maxAttempts)
		return s, err
	})
}

// Schedules returns every schedule by name, or the one named name if
// not "", with its next and last occurrences. One statement. A schedule
// that no longer parses is left out.
func (n *Node) Schedules(ctx context.Context, name string) ([]task.ScheduleInfo, error) {
	where := ""
	if name != "" {
		where = "WHERE s.name = $1"
	}
	rows, err := n.readSchedules(ctx, where, name)
	if err != nil {
		return nil, dbErr(err)
	}
	out := make([]task.ScheduleInfo, 0, len(rows))
	for _, r := range rows {
		sched, loc, err := n.parseSchedule(r.spec)
		if err != nil {
			continue
		}
		i := info(r, sched, loc)
		if i.LastOutcome == "" && i.LastTaskID != "" {
			state := task.Ready
			if r.lastState == 3 { // store.Dead
				state = task.Dead
			}
			i.LastOutcome = service.LastOutcome(r.lastState != 0, state, r.lastFinished)
		}
		out = append(out, i)
	}
	return out, nil
}

// reconcileSchedules hands the Runner the schedules of the owned
// partitions that are not paused: it arms those new or changed (putting
// the occurrences missed since the last one recorded that the misfire
// rule keeps), and disarms the others. The lease loop runs it.
func (n *Node) reconcileSchedules(ctx context.Context) error {
	rows, err := n.readSchedules(ctx, "", "")
	if err != nil {
		return err
	}
	var owned []schedrun.Schedule
	for _, r := range rows {
		p := n.schedulePartition(r.spec.Name)
		if _, ok := n.members.holds(p); !ok || r.spec.Paused {
			continue
		}
		s := schedrun.Schedule{Spec: r.spec, Version: r.created, From: time.Unix(0, max(r.last, r.created)), Tag: p}
		if v, ok := n.runner.Version(r.spec.Name); !ok || v != r.created { // else armed: no parse
			if s.Cron, s.Loc, err = n.parseSchedule(r.spec); err != nil {
				n.log.Error("hourglass: skipping a schedule that does not parse", "schedule", r.spec.Name, "err", err)
				continue
			}
		}
		owned = append(owned, s)
	}
	n.runner.Sync(ctx, owned)
	return nil
}

// errFenced: a write of a partition's owner found that it no longer owns
// the partition (its lease ran out or another node took it).
// It ends the firing of a schedule there (schedrun.ErrGone).
var errFenced = fmt.Errorf("%w: fenced: partition lease lost", schedrun.ErrGone)

// occur is the Runner's primitive (schedrun.OccurFunc): it puts the task
// of s's occurrence at (none if it was put before), or skips it under
// the overlap rule (its last task, read in the same transaction, still
// waiting or reserved), and records at as s's last, in one transaction
// fenced by the epoch of s's partition (s.Tag) and committed durably.
func (n *Node) occur(ctx context.Context, s *schedrun.Schedule, at time.Time) (skipped bool, err error) {
	if err := n.Err(); err != nil {
		return false, fmt.Errorf("%w: %w", schedrun.ErrGone, err)
	}
	epoch, ok := n.members.holds(s.Tag)
	if !ok {
		return false, errFenced
	}
	jobs, err := n.ids.take(ctx, n, 1)
	if err != nil {
		return false, err
	}
	r := service.SchedulePut(s.Spec, service.OccurrenceID(s.Spec.Name, at))
	it := &item{
		r:   &r,
		tm:  timing{hasAt: true, at: at.UnixNano()},
		job: jobs[0],
		id:  r.ID,
	}
	err = pgx.BeginFunc(ctx, n.db, func(tx pgx.Tx) error {
		skipped = false
		var one int
		err := tx.QueryRow(ctx, `SELECT 1 FROM hourglass_partitions
			WHERE partition = $1 AND owner = $2 AND epoch = $3 AND lease_until > clock_timestamp()
			FOR SHARE`, s.Tag, n.name, epoch).Scan(&one)
		if err == pgx.ErrNoRows {
			return errFenced
		}
		if err != nil {
			return err
		}
		var cur service.ScheduleCursor
		err = tx.QueryRow(ctx, sqlOccurCursor, s.Spec.Name, s.Version, s.Spec.Overlap == service.OverlapSkip).Scan(
			&cur.Last, &cur.LastRun, &cur.LastID, &skipped)
		if err == pgx.ErrNoRows {
			return schedrun.ErrGone // deleted, replaced or paused meanwhile
		}
		if err != nil {
			return err
		}
		if skipped {
			moved, ok := cur.Skipped(at.UnixNano())
			if !ok {
				return schedrun.ErrGone
			}
			_, err = tx.Exec(ctx, sqlSetCursor, s.Spec.Name, false, moved.Last, moved.LastRun, moved.LastID)
			return err
		}
		moved, ok := cur.Occurred(at.UnixNano(), it.id)
		if !ok {
			return schedrun.ErrGone
		}
		var ins inserted
		err = tx.QueryRow(ctx, sqlInsert, n.insertArgs(s.Spec.Queue, []*item{it}, true)...).Scan(ins.dest()...)
		switch {
		case err == nil:
			n.created(s.Spec.Queue, it, ins, false)
		case err != pgx.ErrNoRows:
			return err
		}
		_, err = tx.Exec(ctx, sqlSetCursor, s.Spec.Name, false, moved.Last, moved.LastRun, moved.LastID)
		return err
	})
	if err != nil || skipped {
		return skipped, err
	}
	if it.done {
		if it.fireAt != 0 {
			n.announce(it.job, it.fireAt, it.dbNow)
		} else {
			n.readied(s.Spec.Queue, 1)
		}
		n.counters.count(s.Spec.Queue, func(c *counts) { c.puts++ })
		n.metrics.Put(1)
	}
	return false, nil
}

// sqlOccurCursor reads the cursor of schedule $1 if it is still version
// $2 and not paused, locking its row for occur's transaction, and, with
// $3 (the overlap rule skip), whether its last task is still waiting or
// reserved.
const sqlOccurCursor = `SELECT s.last, s.last_run, s.last_id, $3 AND EXISTS (SELECT 1 FROM hourglass_tasks t
		WHERE t.queue = s.queue AND t.id = s.last_id AND s.last_id <> '' AND t.state <> 3)
	FROM hourglass_schedules s WHERE s.name = $1 AND s.created = $2 AND NOT s.paused FOR UPDATE OF s`

// settleSchedule is the Runner's primitive (schedrun.SettleFunc): through
// becomes s's misfire cursor if later (service.ScheduleCursor.Settled),
// so that a later owner does not count the occurrences missed up to it
// again. One transaction: the row of s's version locked and read, then
// written if the cursor moved.
func (n *Node) settleSchedule(ctx context.Context, s *schedrun.Schedule, through time.Time) error {
	return pgx.BeginFunc(ctx, n.db, func(tx pgx.Tx) error {
		var paused bool
		var cur service.ScheduleCursor
		err := tx.QueryRow(ctx, `SELECT paused, last, last_run, last_id FROM hourglass_schedules
			WHERE name = $1 AND created = $2 FOR UPDATE`, s.Spec.Name, s.Version).Scan(&paused, &cur.Last, &cur.LastRun, &cur.LastID)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // replaced or deleted: nothing to settle
		}
		if err != nil {
			return err
		}
		if moved := cur.Settled(through.UnixNano()); moved != cur {
			_, err = tx.Exec(ctx, sqlSetCursor, s.Spec.Name, paused, moved.Last, moved.LastRun, moved.LastID)
		}
		return err
	})
}
