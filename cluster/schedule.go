package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hourglass-go/hourglass"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// Cron schedules live in hourglass_schedules. A schedule belongs to the
// partition its name hashes to, and only that partition's owner fires it:
// each occurrence is put, fenced by the partition's epoch, in the same
// transaction that records it as the schedule's last, with the task id
// "NAME@TIME", which the unique (queue, id) makes idempotent. So an
// occurrence is put once across the cluster, across takeovers too: a new
// owner puts the occurrences missed since the last one recorded that the
// misfire rule keeps (service/schedule.go, as a restarted broker does) and
// arms the next. The overlap rule reads the schedule's last task in the
// same transaction. A paused schedule is armed nowhere; run now is a put
// by whichever node is asked, in the transaction that records it as the
// schedule's last.

// schedule is a schedule armed on this node. Guarded by Node.mu.
type schedule struct {
	spec      task.ScheduleSpec
	cron      hourglass.Schedule
	loc       *time.Location
	partition int
	created   int64
	last      int64 // the misfire cursor (newest occurrence put or skipped)
	timeout   *hourglass.Timeout
}

func (s *schedule) disarm() {
	if s.timeout != nil {
		s.timeout.Cancel()
		s.timeout = nil
	}
}

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

// SetSchedule writes the schedule name as c says (service.Engine), in
// one statement: a new spec (setSpec), a pause or resume (setPaused), or
// a run the front put (ran). The owner of the schedule's partition arms
// it on its next lease tick, which the announcement on the schedules
// channel brings forward to now.
func (n *Node) SetSchedule(ctx context.Context, name string, c service.ScheduleChange) (task.ScheduleInfo, bool, error) {
	if err := n.Err(); err != nil {
		return task.ScheduleInfo{}, false, err
	}
	switch {
	case c.Spec != nil:
		return n.setSpec(ctx, *c.Spec)
	case c.Paused != nil:
		return task.ScheduleInfo{}, false, n.setPaused(ctx, name, *c.Paused)
	case c.Run != nil:
		return task.ScheduleInfo{}, false, n.ran(ctx, name, *c.Run)
	}
	return task.ScheduleInfo{}, false, fmt.Errorf("%w: no schedule change", task.ErrInvalid)
}

// setSpec creates or replaces the schedule spec.Name, durably, as the
// embedded engine does; created is false for a replacement, which keeps
// the last occurrence put.
func (n *Node) setSpec(ctx context.Context, spec task.ScheduleSpec) (task.ScheduleInfo, bool, error) {
	sched, loc, err := n.parseSchedule(spec)
	if err != nil {
		return task.ScheduleInfo{}, false, err
	}
	spec = service.NormalSchedule(spec)
	payload := spec.Payload
	if payload == nil {
		payload = []byte{}
	}
	// A replacement that unpauses starts from now, as ResumeSchedule.
	var inserted bool
	var r scheduleRow
	limit := n.opts.MaxSchedules
	if limit <= 0 {
		limit = task.DefaultMaxSchedules
	}
	// A new schedule past the limit inserts no row, and so answers none;
	// a replacement always does. Two nodes creating at once may each pass
	// the count: the limit bounds the table, not to the row.
	err = n.db.QueryRow(ctx, `INSERT INTO hourglass_schedules AS s (name, cron, queue, timezone, payload, created, last,
			misfire, overlap, catch_up, priority, ttr, max_attempts, paused)
		SELECT $1, $2, $3, $4, $5, hourglass_now(), 0, $6, $7, $8, $9, $10, $11, $12
		WHERE EXISTS (SELECT 1 FROM hourglass_schedules WHERE name = $1)
			OR (SELECT count(*) FROM hourglass_schedules) < $13
		ON CONFLICT (name) DO UPDATE SET cron = EXCLUDED.cron, queue = EXCLUDED.queue,
			timezone = EXCLUDED.timezone, payload = EXCLUDED.payload, created = EXCLUDED.created,
			misfire = EXCLUDED.misfire, overlap = EXCLUDED.overlap, catch_up = EXCLUDED.catch_up,
			priority = EXCLUDED.priority, ttr = EXCLUDED.ttr, max_attempts = EXCLUDED.max_attempts,
			paused = EXCLUDED.paused,
			last = CASE WHEN s.paused AND NOT EXCLUDED.paused THEN EXCLUDED.created ELSE s.last END
		RETURNING xmax = 0, last, last_run, last_id`,
		spec.Name, spec.Cron, spec.Queue, spec.Timezone, payload,
		spec.Misfire, spec.Overlap, int64(spec.CatchUp), int64(*spec.Priority), int64(spec.TTR), int64(spec.MaxAttempts), spec.Paused,
		int64(limit),
	).Scan(&inserted, &r.last, &r.lastRun, &r.lastID)
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
		i.LastOutcome = task.ScheduleAcked
		if t, err := n.Read(service.TaskRef{Queue: i.Queue, ID: i.LastTaskID}); err == nil {
			i.LastOutcome = liveOutcome(t.State)
		}
	}
	return i, inserted, nil
}

// liveOutcome is the outcome of a schedule's last task that is live in
// state st.
func liveOutcome(st task.State) string {
	if st == task.Dead {
		return task.ScheduleDead
	}
	return task.SchedulePending
}

// info is a schedule as the API reports it, without the outcome of a
// last task that was put.
func info(r scheduleRow, sched hourglass.Schedule, loc *time.Location) task.ScheduleInfo {
	i := task.ScheduleInfo{ScheduleSpec: r.spec, LastTaskID: r.lastID}
	if !r.spec.Paused {
		i.Next = service.NextOccurrence(sched, loc, time.Now())
	}
	if r.lastRun != 0 {
		i.Last = time.Unix(0, r.lastRun).UTC()
		if service.LastSkipped(r.spec.Name, r.lastRun, r.lastID) {
			i.LastTaskID, i.LastOutcome = "", task.ScheduleSkipped
		}
	}
	return i
}

// DeleteSchedule deletes the schedule name, durably, or returns
// task.ErrNoSchedule. Tasks it put stay.
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

func (n *Node) readSchedules(ctx context.Context) ([]scheduleRow, error) {
	return n.readSchedulesWhere(ctx, "", "")
}

// readSchedulesWhere reads the schedules that where selects, with its
// one argument arg ("" for none), by name: one statement, with the state
// of each one's last task and its outcome in the history.
func (n *Node) readSchedulesWhere(ctx context.Context, where, arg string) ([]scheduleRow, error) {
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
// not "", with its next and last occurrences. One statement.
func (n *Node) Schedules(ctx context.Context, name string) ([]task.ScheduleInfo, error) {
	if name != "" {
		return n.schedulesWhere(ctx, "WHERE s.name = $1", name)
	}
	return n.schedulesWhere(ctx, "", "")
}

// schedulesWhere returns the schedules that where (with its argument arg)
// selects, by name. A schedule that no longer parses is left out.
func (n *Node) schedulesWhere(ctx context.Context, where, arg string) ([]task.ScheduleInfo, error) {
	rows, err := n.readSchedulesWhere(ctx, where, arg)
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
		switch {
		case i.LastOutcome != "" || i.LastTaskID == "":
		case r.lastState == 3: // store.Dead
			i.LastOutcome = task.ScheduleDead
		case r.lastState != 0:
			i.LastOutcome = task.SchedulePending
		case r.lastFinished == task.FinishedDead:
			i.LastOutcome = task.ScheduleDead
		default: // acked, deleted, or gone from the history
			i.LastOutcome = task.ScheduleAcked
		}
		out = append(out, i)
	}
	return out, nil
}

// reconcileSchedules arms the schedules of the owned partitions that are
// not armed (putting the newest occurrence missed since the last one
// recorded), re-arms those whose line changed, and disarms the others.
// The lease loop runs it.
func (n *Node) reconcileSchedules(ctx context.Context) error {
	rows, err := n.readSchedules(ctx)
	if err != nil {
		return err
	}
	now := time.Now()
	seen := map[string]bool{}
	var fresh []*schedule
	n.mu.Lock()
	for _, r := range rows {
		p := n.schedulePartition(r.spec.Name)
		if _, ok := n.members.holds(p); !ok || r.spec.Paused {
			continue
		}
		seen[r.spec.Name] = true
		if s := n.schedules[r.spec.Name]; s != nil {
			if sameSpec(s.spec, r.spec) {
				continue
			}
			s.disarm()
		}
		sched, loc, err := n.parseSchedule(r.spec)
		if err != nil {
			n.log.Error("hourglass: skipping a schedule that does not parse", "schedule", r.spec.Name, "err", err)
			continue
		}
		s := &schedule{spec: r.spec, cron: sched, loc: loc, partition: p, created: r.created, last: r.last}
		n.schedules[r.spec.Name] = s
		fresh = append(fresh, s)
	}
	for name, s := range n.schedules {
		if !seen[name] {
			s.disarm()
			delete(n.schedules, name)
		}
	}
	n.mu.Unlock()
	for _, s := range fresh {
		from := time.Unix(0, max(s.last, s.created))
		put, missed := service.MissedOccurrences(s.cron, s.loc, s.spec.Misfire, s.spec.CatchUp, from, now)
		for _, at := range put {
			if err := n.occur(ctx, s, at); err != nil {
				n.log.Warn("hourglass: putting a missed occurrence", "schedule", s.spec.Name, "err", err)
				break
			}
		}
		if missed > 0 {
			n.metrics.schedules.Misses(s.spec.Name, missed)
			// The missed ones are settled: a later owner does not count them again.
			if _, err := n.db.Exec(ctx, "UPDATE hourglass_schedules SET last = $2 WHERE name = $1 AND last < $2",
				s.spec.Name, now.UnixNano()); err != nil {
				n.log.Warn("hourglass: recording missed occurrences", "schedule", s.spec.Name, "err", err)
			}
		}
		n.mu.Lock()
		if n.schedules[s.spec.Name] == s {
			n.arm(s, now)
		}
		n.mu.Unlock()
	}
	return nil
}

func sameSpec(a, b task.ScheduleSpec) bool {
	return a.Name == b.Name && a.Cron == b.Cron && a.Queue == b.Queue && a.Timezone == b.Timezone &&
		bytes.Equal(a.Payload, b.Payload) && a.Misfire == b.Misfire && a.Overlap == b.Overlap &&
		a.CatchUp == b.CatchUp && *a.Priority == *b.Priority && a.TTR == b.TTR &&
		a.MaxAttempts == b.MaxAttempts && a.Paused == b.Paused
}

// arm sets s's timeout for its first occurrence after after. n.mu is held.
func (n *Node) arm(s *schedule, after time.Time) {
	s.disarm()
	at := service.NextOccurrence(s.cron, s.loc, after)
	if at.IsZero() {
		return
	}
	// The timer runs on this node's clock; the occurrence is due at its
	// instant by the database's, which decides when it is ready.
	to, err := n.cron.AfterFunc(n.clock.until(at.UnixNano()), func() { n.occurred(s, at) })
	if err != nil {
		n.log.Error("hourglass: arming a schedule", "schedule", s.spec.Name, "err", err)
		return
	}
	s.timeout = to
}

// occurred runs when s's occurrence at comes: it puts it and arms the
// next, unless s was replaced, deleted or its partition lost since.
func (n *Node) occurred(s *schedule, at time.Time) {
	n.mu.Lock()
	current := n.schedules[s.spec.Name] == s && n.usable() == nil
	n.mu.Unlock()
	if !current {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	err := n.occur(ctx, s, at)
	cancel()
	if err != nil {
		n.log.Warn("hourglass: putting an occurrence", "schedule", s.spec.Name, "at", at, "err", err)
	}
	n.mu.Lock()
	if n.schedules[s.spec.Name] == s {
		n.arm(s, at)
	}
	n.mu.Unlock()
}

// errFenced: a write of a partition's owner found that it no longer owns
// the partition (its lease ran out or another node took it).
var errFenced = fmt.Errorf("hourglass: fenced: partition lease lost")

// occur puts the task of s's occurrence at (none if it was put before),
// or skips it under the overlap rule (its last task, read in the same
// transaction, still waiting or reserved), and records at as s's last,
// in one transaction fenced by the epoch of s's partition and committed
// durably.
func (n *Node) occur(ctx context.Context, s *schedule, at time.Time) error {
	epoch, ok := n.members.holds(s.partition)
	if !ok {
		return errFenced
	}
	jobs, err := n.ids.take(ctx, n, 1)
	if err != nil {
		return err
	}
	r := service.SchedulePut(s.spec, service.OccurrenceID(s.spec.Name, at))
	it := &item{
		r:   &r,
		tm:  timing{hasAt: true, at: at.UnixNano()},
		job: jobs[0],
		id:  r.ID,
	}
	skipped := false
	err = pgx.BeginFunc(ctx, n.db, func(tx pgx.Tx) error {
		skipped = false
		var one int
		err := tx.QueryRow(ctx, `SELECT 1 FROM hourglass_partitions
			WHERE partition = $1 AND owner = $2 AND epoch = $3 AND lease_until > clock_timestamp()
			FOR SHARE`, s.partition, n.name, epoch).Scan(&one)
		if err == pgx.ErrNoRows {
			return errFenced
		}
		if err != nil {
			return err
		}
		if s.spec.Overlap == service.OverlapSkip {
			err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM hourglass_schedules s
				JOIN hourglass_tasks t ON t.queue = s.queue AND t.id = s.last_id
				WHERE s.name = $1 AND s.last_id <> '' AND t.state <> 3)`, s.spec.Name).Scan(&skipped)
			if err != nil {
				return err
			}
		}
		if skipped {
			_, err = tx.Exec(ctx, `UPDATE hourglass_schedules SET last = $2, last_run = $2
				WHERE name = $1 AND last < $2`, s.spec.Name, at.UnixNano())
			return err
		}
		var ins inserted
		err = tx.QueryRow(ctx, sqlInsert, n.insertArgs(s.spec.Queue, []*item{it}, true)...).Scan(ins.dest()...)
		switch {
		case err == nil:
			n.created(s.spec.Queue, it, ins, false)
		case err != pgx.ErrNoRows:
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE hourglass_schedules SET last = $2, last_run = GREATEST(last_run, $2),
				last_id = CASE WHEN last_run <= $2 THEN $3 ELSE last_id END
			WHERE name = $1 AND last < $2`, s.spec.Name, at.UnixNano(), it.id)
		return err
	})
	if err != nil {
		return err
	}
	n.mu.Lock()
	s.last = max(s.last, at.UnixNano())
	n.mu.Unlock()
	if skipped {
		n.metrics.schedules.Skips(s.spec.Name)
		return nil
	}
	n.metrics.schedules.Occurred(s.spec.Name)
	if it.done {
		if it.fireAt != 0 {
			n.announce(it.job, it.fireAt, it.dbNow)
		} else {
			n.readied(s.spec.Queue, 1)
		}
		n.counters.count(s.spec.Queue, func(c *counts) { c.puts++ })
		n.metrics.Put(1)
	}
	return nil
}

// setPaused pauses the schedule name, durably, so that no node puts
// anything for it, or resumes it from now (the database's): the
// occurrences that fell due while it was paused are not put.
// task.ErrNoSchedule if there is none.
func (n *Node) setPaused(ctx context.Context, name string, paused bool) error {
	tag, err := n.db.Exec(ctx, `UPDATE hourglass_schedules
		SET last = CASE WHEN paused AND NOT $2 THEN hourglass_now() ELSE last END, paused = $2
		WHERE name = $1`, name, paused)
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

// ran records the run r of the schedule name, which the front put, as
// its last (its last run the later of r.At and the one recorded), and
// counts it in the schedule's puts; its next occurrence stays.
// task.ErrNoSchedule if there is none. One statement.
func (n *Node) ran(ctx context.Context, name string, r service.LastRun) error {
	tag, err := n.db.Exec(ctx, `UPDATE hourglass_schedules SET last_run = GREATEST(last_run, $2), last_id = $3 WHERE name = $1`,
		name, r.At.UnixNano(), r.ID)
	if err != nil {
		return dbErr(err)
	}
	if tag.RowsAffected() == 0 {
		return task.ErrNoSchedule
	}
	n.metrics.schedules.Occurred(name)
	return nil
}
