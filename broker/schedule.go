package broker

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/hourglass-go/hourglass"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/store"
	"github.com/hourglass-go/hourglass/task"
)

// schedule is a cron schedule in memory. Guarded by Broker.mu.
type schedule struct {
	spec    task.ScheduleSpec
	cron    hourglass.Schedule
	loc     *time.Location
	created int64
	last    int64     // newest occurrence put, Unix ns; 0: none
	next    time.Time // zero: never again
	timeout *hourglass.Timeout
}

// parseSchedule checks spec against the broker's limits and parses its
// cron line and time zone.
func (b *Broker) parseSchedule(spec task.ScheduleSpec) (hourglass.Schedule, *time.Location, error) {
	return service.ParseSchedule(spec, b.cfg.MaxPayload)
}

// CheckCron returns the next n occurrences of a cron line, as
// service.CheckCron.
func (b *Broker) CheckCron(line, timezone string, n int) ([]time.Time, error) {
	return service.CheckCron(line, timezone, n, time.Now())
}

// SetSchedule creates or replaces the schedule spec.Name, durably. Each
// occurrence puts one task into spec.Queue with id "NAME@TIME" (TIME the
// occurrence in RFC 3339, UTC) and due at the occurrence, so no
// occurrence is put twice, across restarts too. created is false for a
// replacement. Errors wrap ErrInvalid (bad name, cron line or zone) or
// ErrTooLarge.
func (b *Broker) SetSchedule(ctx context.Context, spec task.ScheduleSpec) (info task.ScheduleInfo, created bool, err error) {
	sched, loc, err := b.parseSchedule(spec)
	if err != nil {
		return task.ScheduleInfo{}, false, err
	}
	now := time.Now()
	b.mu.Lock()
	if err := b.usable(); err != nil {
		b.mu.Unlock()
		return task.ScheduleInfo{}, false, err
	}
	s := &schedule{spec: spec, cron: sched, loc: loc, created: now.UnixNano()}
	old, ok := b.schedules[spec.Name]
	if ok {
		old.timeout.Cancel()
		s.last = old.last
	}
	b.schedules[spec.Name] = s
	b.writeSchedule(s.record(), false)
	b.arm(s, now)
	info = s.info()
	return info, !ok, b.commitWait(ctx, b.barrier())
}

// DeleteSchedule deletes the schedule name, durably, or returns
// ErrNoSchedule. Tasks it put stay.
func (b *Broker) DeleteSchedule(ctx context.Context, name string) error {
	b.mu.Lock()
	if err := b.usable(); err != nil {
		b.mu.Unlock()
		return err
	}
	s, ok := b.schedules[name]
	if !ok {
		b.mu.Unlock()
		return task.ErrNoSchedule
	}
	s.timeout.Cancel()
	delete(b.schedules, name)
	b.writeSchedule(store.Schedule{Name: name}, true)
	return b.commitWait(ctx, b.barrier())
}

// Schedules returns every schedule by name, with its next and last
// occurrences.
func (b *Broker) Schedules(ctx context.Context) ([]task.ScheduleInfo, error) {
	b.mu.Lock()
	out := make([]task.ScheduleInfo, 0, len(b.schedules))
	for _, s := range b.schedules {
		out = append(out, s.info())
	}
	b.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Schedule returns the schedule name with its next and last occurrences,
// or task.ErrNoSchedule.
func (b *Broker) Schedule(ctx context.Context, name string) (task.ScheduleInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.schedules[name]
	if !ok {
		return task.ScheduleInfo{}, task.ErrNoSchedule
	}
	return s.info(), nil
}

func (s *schedule) info() task.ScheduleInfo {
	i := task.ScheduleInfo{ScheduleSpec: s.spec, Next: s.next}
	if s.last != 0 {
		i.Last = time.Unix(0, s.last).UTC()
	}
	return i
}

func (s *schedule) record() store.Schedule {
	return store.Schedule{
		Name: s.spec.Name, Cron: s.spec.Cron, Queue: s.spec.Queue, Timezone: s.spec.Timezone,
		Payload: s.spec.Payload, Created: s.created, Last: s.last,
	}
}

// arm sets s's timeout for its first occurrence after after. b.mu is held.
func (b *Broker) arm(s *schedule, after time.Time) {
	s.timeout = nil
	s.next = s.cron.Next(after.In(s.loc))
	if s.next.IsZero() {
		return
	}
	s.next = s.next.UTC()
	at := s.next
	to, err := b.cron.AtFunc(at, func() { b.occur(s, at) })
	if err != nil {
		b.log.Error("hourglass: arming a schedule", "schedule", s.spec.Name, "err", err)
		return
	}
	s.timeout = to
}

// occur puts s's occurrence at and arms the next. It runs on the cron
// timer's goroutine.
func (b *Broker) occur(s *schedule, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.schedules[s.spec.Name] != s || b.usable() != nil {
		return // replaced or deleted since it was armed
	}
	b.putOccurrence(s, at)
	b.arm(s, at)
}

// putOccurrence puts the task of s's occurrence at (none if it was put
// before) and records at as s's last, in one group. b.mu is held.
func (b *Broker) putOccurrence(s *schedule, at time.Time) {
	q := b.queue(s.spec.Queue)
	r := task.PutRequest{
		ID:       service.OccurrenceID(s.spec.Name, at),
		Payload:  s.spec.Payload,
		Priority: task.DefaultPriority,
	}
	if _, _, err := b.put(q, &r, at.UnixNano(), time.Now().UnixNano()); err != nil {
		b.log.Error("hourglass: putting a schedule's occurrence", "schedule", s.spec.Name, "at", at, "err", err)
		return
	}
	s.last = at.UnixNano()
	b.writeSchedule(s.record(), false)
}

// recoverSchedules loads the schedules, puts each one's newest occurrence
// missed while the broker was down (only that one), and arms the next.
// b.mu is held.
func (b *Broker) recoverSchedules() error {
	recs, err := b.st.Schedules()
	if err != nil {
		return fmt.Errorf("hourglass: recovery: schedules: %w", err)
	}
	now := time.Now()
	for _, r := range recs {
		spec := task.ScheduleSpec{Name: r.Name, Cron: r.Cron, Queue: r.Queue, Payload: r.Payload, Timezone: r.Timezone}
		sched, loc, err := b.parseSchedule(spec)
		if err != nil {
			b.log.Error("hourglass: recovery: skipping a schedule that no longer parses", "schedule", r.Name, "err", err)
			continue
		}
		s := &schedule{spec: spec, cron: sched, loc: loc, created: r.Created, last: r.Last}
		b.schedules[r.Name] = s
		from := time.Unix(0, max(r.Last, r.Created))
		if at := service.NewestOccurrence(sched, loc, from, now); !at.IsZero() {
			b.putOccurrence(s, at)
		}
		b.arm(s, now)
	}
	return nil
}
