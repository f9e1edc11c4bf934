package broker

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/hourglass-go/hourglass"
	"github.com/hourglass-go/hourglass/store"
)

// schedule is a cron schedule in memory. Guarded by Broker.mu.
type schedule struct {
	spec    ScheduleSpec
	cron    hourglass.Schedule
	loc     *time.Location
	created int64
	last    int64     // newest occurrence put, Unix ns; 0: none
	next    time.Time // zero: never again
	timeout *hourglass.Timeout
}

// occurrenceLayout names occurrences in task ids: name@2006-01-02T15:04:05Z.
const occurrenceLayout = time.RFC3339

// maxScheduleName leaves room in a task id for "@" and the occurrence.
var maxScheduleName = MaxNameLen - 1 - len("2006-01-02T15:04:05Z")

// parseSchedule checks spec and parses its cron line and time zone.
func (b *Broker) parseSchedule(spec ScheduleSpec) (hourglass.Schedule, *time.Location, error) {
	if err := checkQueue(spec.Name); err != nil {
		return nil, nil, fmt.Errorf("%w: schedule name: %v", ErrInvalid, trimInvalid(err))
	}
	if len(spec.Name) > maxScheduleName {
		return nil, nil, fmt.Errorf("%w: schedule name over %d characters", ErrInvalid, maxScheduleName)
	}
	if err := checkQueue(spec.Queue); err != nil {
		return nil, nil, err
	}
	if len(spec.Payload) > b.cfg.MaxPayload {
		return nil, nil, fmt.Errorf("%w: %d bytes, over the limit of %d", ErrTooLarge, len(spec.Payload), b.cfg.MaxPayload)
	}
	sched, err := hourglass.Cron(spec.Cron)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	loc := time.UTC
	if spec.Timezone != "" {
		if loc, err = time.LoadLocation(spec.Timezone); err != nil {
			return nil, nil, fmt.Errorf("%w: time zone %q: %v", ErrInvalid, spec.Timezone, err)
		}
	}
	return sched, loc, nil
}

// trimInvalid drops ErrInvalid's text from err, which is wrapped again.
func trimInvalid(err error) string {
	s := err.Error()
	p := ErrInvalid.Error() + ": "
	if len(s) > len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}

// CheckCron parses a cron line (and time zone) as SetSchedule would and
// returns its next n times after now, for validating a line as it is
// typed. Errors wrap ErrInvalid.
func (b *Broker) CheckCron(line, timezone string, n int) ([]time.Time, error) {
	sched, loc, err := b.parseSchedule(ScheduleSpec{Name: "check", Queue: "check", Cron: line, Timezone: timezone})
	if err != nil {
		return nil, err
	}
	var out []time.Time
	t := time.Now().In(loc)
	for range n {
		if t = sched.Next(t); t.IsZero() {
			break
		}
		out = append(out, t.UTC())
	}
	return out, nil
}

// SetSchedule creates or replaces the schedule spec.Name, durably. Each
// occurrence puts one task into spec.Queue with id "NAME@TIME" (TIME the
// occurrence in RFC 3339, UTC) and due at the occurrence, so no
// occurrence is put twice, across restarts too. created is false for a
// replacement. Errors wrap ErrInvalid (bad name, cron line or zone) or
// ErrTooLarge.
func (b *Broker) SetSchedule(ctx context.Context, spec ScheduleSpec) (info ScheduleInfo, created bool, err error) {
	sched, loc, err := b.parseSchedule(spec)
	if err != nil {
		return ScheduleInfo{}, false, err
	}
	now := time.Now()
	b.mu.Lock()
	if err := b.usable(); err != nil {
		b.mu.Unlock()
		return ScheduleInfo{}, false, err
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
		return ErrNoSchedule
	}
	s.timeout.Cancel()
	delete(b.schedules, name)
	b.writeSchedule(store.Schedule{Name: name}, true)
	return b.commitWait(ctx, b.barrier())
}

// Schedules returns every schedule by name, with its next and last
// occurrences.
func (b *Broker) Schedules() []ScheduleInfo {
	b.mu.Lock()
	out := make([]ScheduleInfo, 0, len(b.schedules))
	for _, s := range b.schedules {
		out = append(out, s.info())
	}
	b.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (s *schedule) info() ScheduleInfo {
	i := ScheduleInfo{ScheduleSpec: s.spec, Next: s.next}
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
	r := PutRequest{
		ID:       s.spec.Name + "@" + at.UTC().Format(occurrenceLayout),
		Payload:  s.spec.Payload,
		Priority: DefaultPriority,
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
		spec := ScheduleSpec{Name: r.Name, Cron: r.Cron, Queue: r.Queue, Payload: r.Payload, Timezone: r.Timezone}
		sched, loc, err := b.parseSchedule(spec)
		if err != nil {
			b.log.Error("hourglass: recovery: skipping a schedule that no longer parses", "schedule", r.Name, "err", err)
			continue
		}
		s := &schedule{spec: spec, cron: sched, loc: loc, created: r.Created, last: r.Last}
		b.schedules[r.Name] = s
		from := time.Unix(0, max(r.Last, r.Created))
		if at := NewestOccurrence(sched, loc, from, now); !at.IsZero() {
			b.putOccurrence(s, at)
		}
		b.arm(s, now)
	}
	return nil
}

// NewestOccurrence returns the newest occurrence of sched (read in loc)
// after from and not after now, or the zero time: the one occurrence a
// schedule puts for the time its server was down. It looks back over
// windows that grow fourfold from one minute, so it walks few occurrences
// however long the server was down.
func NewestOccurrence(sched hourglass.Schedule, loc *time.Location, from, now time.Time) time.Time {
	for w := time.Minute; ; w *= 4 {
		start := now.Add(-w)
		if start.Before(from) || w > 100*365*24*time.Hour {
			start = from
		}
		var found time.Time
		for t, n := sched.Next(start.In(loc)), 0; !t.IsZero() && !t.After(now) && n < 1_000_000; t, n = sched.Next(t), n+1 {
			found = t
		}
		if !found.IsZero() || !start.After(from) {
			return found
		}
	}
}
