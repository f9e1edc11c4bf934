package cluster

import (
	"bytes"
	"context"
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
// owner puts the newest occurrence missed since the last one recorded
// (only that one, as a restarted broker does) and arms the next.

// schedule is a schedule armed on this node. Guarded by Node.mu.
type schedule struct {
	spec      task.ScheduleSpec
	cron      hourglass.Schedule
	loc       *time.Location
	partition int
	created   int64
	last      int64
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

// SetSchedule creates or replaces the schedule spec.Name, durably, as
// the embedded engine (SetSchedule) does; created is false for a replacement,
// which keeps the last occurrence put. The owner of the schedule's
// partition arms it on its next lease tick, which the announcement on
// the schedules channel brings forward to now.
func (n *Node) SetSchedule(ctx context.Context, spec task.ScheduleSpec) (task.ScheduleInfo, bool, error) {
	sched, loc, err := n.parseSchedule(spec)
	if err != nil {
		return task.ScheduleInfo{}, false, err
	}
	if err := n.Err(); err != nil {
		return task.ScheduleInfo{}, false, err
	}
	payload := spec.Payload
	if payload == nil {
		payload = []byte{}
	}
	var inserted bool
	var last int64
	err = n.db.QueryRow(ctx, `INSERT INTO hourglass_schedules (name, cron, queue, timezone, payload, created, last)
		VALUES ($1, $2, $3, $4, $5, hourglass_now(), 0)
		ON CONFLICT (name) DO UPDATE SET cron = EXCLUDED.cron, queue = EXCLUDED.queue,
			timezone = EXCLUDED.timezone, payload = EXCLUDED.payload, created = EXCLUDED.created
		RETURNING xmax = 0, last`, spec.Name, spec.Cron, spec.Queue, spec.Timezone, payload).Scan(&inserted, &last)
	if err != nil {
		return task.ScheduleInfo{}, false, dbErr(err)
	}
	n.notifier.send(chanSchedules, spec.Name)
	n.kickTick()
	return info(spec, sched, loc, last), inserted, nil
}

// info is a schedule as the API reports it.
func info(spec task.ScheduleSpec, sched hourglass.Schedule, loc *time.Location, last int64) task.ScheduleInfo {
	i := task.ScheduleInfo{ScheduleSpec: spec}
	if next := sched.Next(time.Now().In(loc)); !next.IsZero() {
		i.Next = next.UTC()
	}
	if last != 0 {
		i.Last = time.Unix(0, last).UTC()
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
	n.notifier.send(chanSchedules, name)
	n.kickTick()
	return nil
}

// scheduleRow is a row of hourglass_schedules.
type scheduleRow struct {
	spec          task.ScheduleSpec
	created, last int64
}

func (n *Node) readSchedules(ctx context.Context) ([]scheduleRow, error) {
	return n.readSchedulesWhere(ctx, "", "")
}

// readSchedulesWhere reads the schedules that where selects, with its
// one argument arg ("" for none), by name.
func (n *Node) readSchedulesWhere(ctx context.Context, where, arg string) ([]scheduleRow, error) {
	var args []any
	if where != "" {
		args = append(args, arg)
	}
	rows, err := n.db.Query(ctx, `SELECT name, cron, queue, timezone, payload, created, last
		FROM hourglass_schedules `+where+` ORDER BY name COLLATE "C"`, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (scheduleRow, error) {
		var s scheduleRow
		err := r.Scan(&s.spec.Name, &s.spec.Cron, &s.spec.Queue, &s.spec.Timezone, &s.spec.Payload, &s.created, &s.last)
		if len(s.spec.Payload) == 0 {
			s.spec.Payload = nil
		}
		return s, err
	})
}

// Schedules returns every schedule by name, with its next and last
// occurrences.
func (n *Node) Schedules(ctx context.Context) ([]task.ScheduleInfo, error) {
	return n.schedulesWhere(ctx, "", "")
}

// Schedule returns the schedule name with its next and last occurrences,
// or task.ErrNoSchedule.
func (n *Node) Schedule(ctx context.Context, name string) (task.ScheduleInfo, error) {
	out, err := n.schedulesWhere(ctx, "WHERE name = $1", name)
	if err != nil {
		return task.ScheduleInfo{}, err
	}
	if len(out) == 0 {
		return task.ScheduleInfo{}, task.ErrNoSchedule
	}
	return out[0], nil
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
		out = append(out, info(r.spec, sched, loc, r.last))
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
		if _, ok := n.owned[p]; !ok {
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
		if at := service.NewestOccurrence(s.cron, s.loc, from, now); !at.IsZero() {
			if err := n.occur(ctx, s, at); err != nil {
				n.log.Warn("hourglass: putting a missed occurrence", "schedule", s.spec.Name, "err", err)
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
		bytes.Equal(a.Payload, b.Payload)
}

// arm sets s's timeout for its first occurrence after after. n.mu is held.
func (n *Node) arm(s *schedule, after time.Time) {
	s.disarm()
	next := s.cron.Next(after.In(s.loc))
	if next.IsZero() {
		return
	}
	at := next.UTC()
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

// occur puts the task of s's occurrence at (none if it was put before)
// and records at as s's last, in one transaction fenced by the epoch of
// s's partition and committed durably.
func (n *Node) occur(ctx context.Context, s *schedule, at time.Time) error {
	n.mu.Lock()
	epoch, ok := n.owned[s.partition]
	n.mu.Unlock()
	if !ok {
		return errFenced
	}
	jobs, err := n.ids.take(ctx, n, 1)
	if err != nil {
		return err
	}
	it := &item{
		r:   &task.PutRequest{Payload: s.spec.Payload, Priority: task.DefaultPriority},
		tm:  timing{hasAt: true, at: at.UnixNano()},
		job: jobs[0],
		id:  service.OccurrenceID(s.spec.Name, at),
	}
	err = pgx.BeginFunc(ctx, n.db, func(tx pgx.Tx) error {
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
		var ins inserted
		err = tx.QueryRow(ctx, sqlInsert, n.insertArgs(s.spec.Queue, []*item{it})...).Scan(ins.dest()...)
		switch {
		case err == nil:
			n.created(s.spec.Queue, it, ins, false)
		case err != pgx.ErrNoRows:
			return err
		}
		_, err = tx.Exec(ctx, "UPDATE hourglass_schedules SET last = $2 WHERE name = $1 AND last < $2", s.spec.Name, at.UnixNano())
		return err
	})
	if err != nil {
		return err
	}
	n.mu.Lock()
	s.last = max(s.last, at.UnixNano())
	n.mu.Unlock()
	if it.done {
		if it.fireAt != 0 {
			n.announce(it.job, it.fireAt, it.dbNow)
		} else {
			n.readied(s.spec.Queue, 1)
		}
		n.counters.count(s.spec.Queue, func(c *counts) { c.puts++ })
		n.metrics.Puts.Inc()
	}
	return nil
}
