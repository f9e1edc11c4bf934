package broker

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/hourglass-go/hourglass"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/store"
	"github.com/hourglass-go/hourglass/task"
)

// schedule is a cron schedule in memory; the rules it keeps are in
// service/schedule.go. Guarded by Broker.mu.
type schedule struct {
	spec    task.ScheduleSpec // normalised (service.NormalSchedule)
	cron    hourglass.Schedule
	loc     *time.Location
	created int64
	last    int64     // newest occurrence put or skipped, Unix ns; 0: none (the misfire cursor)
	lastRun int64     // newest occurrence or run put or skipped, Unix ns
	lastID  string    // the newest task put (service.LastSkipped)
	next    time.Time // zero: never again, or paused
	timeout *hourglass.Timeout
}

// disarmLocked cancels s's timeout, if armed. b.mu must be held.
func (s *schedule) disarmLocked() {
	if s.timeout != nil {
		s.timeout.Cancel()
	}
	s.timeout, s.next = nil, time.Time{}
}

// parseSchedule checks spec against the broker's limits and parses its
// cron line and time zone.
func (b *Broker) parseSchedule(spec task.ScheduleSpec) (hourglass.Schedule, *time.Location, error) {
	return service.ParseSchedule(spec, b.cfg.MaxPayload)
}

// SetSchedule writes the schedule name as c says (service.Engine), in
// one group commit: a new spec (setSpec), a pause or resume
// (setPaused), or a run the front put (ran).
func (b *Broker) SetSchedule(ctx context.Context, name string, c service.ScheduleChange) (task.ScheduleInfo, bool, error) {
	switch {
	case c.Spec != nil:
		return b.setSpec(ctx, *c.Spec)
	case c.Paused != nil:
		return task.ScheduleInfo{}, false, b.setPaused(ctx, name, *c.Paused)
	case c.Run != nil:
		return task.ScheduleInfo{}, false, b.ran(ctx, name, *c.Run)
	}
	return task.ScheduleInfo{}, false, fmt.Errorf("%w: no schedule change", task.ErrInvalid)
}

// setSpec creates or replaces the schedule spec.Name, durably. Each
// occurrence puts one task into spec.Queue with id "NAME@TIME" (TIME the
// occurrence in RFC 3339, UTC) and due at the occurrence, so no
// occurrence is put twice, across restarts too. created is false for a
// replacement, which keeps the last occurrence; a replacement that
// unpauses the schedule starts from now, as ResumeSchedule. Errors wrap
// ErrInvalid (a bad field, named) or ErrTooLarge.
func (b *Broker) setSpec(ctx context.Context, spec task.ScheduleSpec) (info task.ScheduleInfo, created bool, err error) {
	sched, loc, err := b.parseSchedule(spec)
	if err != nil {
		return task.ScheduleInfo{}, false, err
	}
	spec = service.NormalSchedule(spec)
	now := time.Now()
	b.mu.Lock()
	if err := b.usableLocked(); err != nil {
		b.mu.Unlock()
		return task.ScheduleInfo{}, false, err
	}
	s := &schedule{spec: spec, cron: sched, loc: loc, created: now.UnixNano()}
	old, ok := b.schedules[spec.Name]
	if !ok && len(b.schedules) >= b.cfg.MaxSchedules {
		b.mu.Unlock()
		return task.ScheduleInfo{}, false, service.TooManySchedules(b.cfg.MaxSchedules)
	}
	if !ok || old.spec.Queue != spec.Queue {
		// A schedule into a new queue makes it, as a put would: it
		// counts toward the limit from now on.
		q, err := b.queueForLocked(spec.Queue)
		if err != nil {
			b.mu.Unlock()
			return task.ScheduleInfo{}, false, err
		}
		q.schedules++
		if ok {
			b.unscheduleLocked(old)
		}
	}
	if ok {
		old.disarmLocked()
		s.last, s.lastRun, s.lastID = old.last, old.lastRun, old.lastID
		if old.spec.Paused && !spec.Paused {
			s.last = now.UnixNano()
		}
	}
	b.schedules[spec.Name] = s
	b.writeScheduleLocked(s.record(), false)
	if !spec.Paused {
		b.armLocked(s, now)
	}
	info = s.info()
	g := b.barrierLocked()
	b.mu.Unlock()
	return b.withOutcome(ctx, info), !ok, b.waitGroup(ctx, g)
}

// unscheduleLocked takes s off the count of schedules of its queue, which
// may then hold nothing. b.mu must be held.
func (b *Broker) unscheduleLocked(s *schedule) {
	if q, ok := b.byName[s.spec.Queue]; ok && q.schedules > 0 {
		q.schedules--
		b.emptiedOutLocked(q)
	}
}

// waitGroup drops the queues left holding nothing (tidy), taking b.mu
// for it, then waits for g to commit.
func (b *Broker) waitGroup(ctx context.Context, g *group) error {
	b.mu.Lock()
	b.tidyLocked()
	b.mu.Unlock()
	return b.wait(ctx, g)
}

// DeleteSchedule deletes the schedule name, durably, or returns
// ErrNoSchedule. Tasks it put stay.
func (b *Broker) DeleteSchedule(ctx context.Context, name string) error {
	b.mu.Lock()
	if err := b.usableLocked(); err != nil {
		b.mu.Unlock()
		return err
	}
	s, ok := b.schedules[name]
	if !ok {
		b.mu.Unlock()
		return task.ErrNoSchedule
	}
	s.disarmLocked()
	delete(b.schedules, name)
	b.unscheduleLocked(s)
	b.writeScheduleLocked(store.Schedule{Name: name}, true)
	g := b.answerGroupLocked()
	b.mu.Unlock()
	return b.wait(ctx, g)
}

// setPaused pauses the schedule name, durably, so that it puts nothing,
// or resumes it from now: the occurrences that fell due while it was
// paused are not put. ErrNoSchedule if there is none.
func (b *Broker) setPaused(ctx context.Context, name string, paused bool) error {
	now := time.Now()
	b.mu.Lock()
	if err := b.usableLocked(); err != nil {
		b.mu.Unlock()
		return err
	}
	s, ok := b.schedules[name]
	if !ok {
		b.mu.Unlock()
		return task.ErrNoSchedule
	}
	if s.spec.Paused != paused {
		s.spec.Paused = paused
		s.disarmLocked()
		if !paused {
			s.last = now.UnixNano()
			b.armLocked(s, now)
		}
		b.writeScheduleLocked(s.record(), false)
	}
	g := b.answerGroupLocked()
	b.mu.Unlock()
	return b.wait(ctx, g)
}

// ran records the run r of the schedule name, which the front put, as
// its last, durably, and counts it in the schedule's puts; its next
// occurrence stays. ErrNoSchedule if there is none.
func (b *Broker) ran(ctx context.Context, name string, r service.LastRun) error {
	b.mu.Lock()
	if err := b.usableLocked(); err != nil {
		b.mu.Unlock()
		return err
	}
	s, ok := b.schedules[name]
	if !ok {
		b.mu.Unlock()
		return task.ErrNoSchedule
	}
	s.lastRun, s.lastID = max(s.lastRun, r.At.UnixNano()), r.ID
	b.writeScheduleLocked(s.record(), false)
	b.metrics.schedules.Occurred(name)
	g := b.answerGroupLocked()
	b.mu.Unlock()
	return b.wait(ctx, g)
}

// Schedules returns every schedule by name, or the one named name if
// not "", with its next and last occurrences. The outcome of a last task
// no longer live is read from the history (store reads with b.mu
// released).
func (b *Broker) Schedules(ctx context.Context, name string) ([]task.ScheduleInfo, error) {
	b.mu.Lock()
	var out []task.ScheduleInfo
	if name != "" {
		if s, ok := b.schedules[name]; ok {
			out = append(out, b.liveOutcomeLocked(s))
		}
	} else {
		out = make([]task.ScheduleInfo, 0, len(b.schedules))
		for _, s := range b.schedules {
			out = append(out, b.liveOutcomeLocked(s))
		}
	}
	g := b.barrierLocked()
	b.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	if err := b.waitGroup(ctx, g); err != nil {
		return nil, err
	}
	for i := range out {
		out[i] = b.withOutcome(ctx, out[i])
	}
	return out, nil
}

// liveOutcomeLocked returns s's info with the outcome of its last task if
// that task is live (pending, or dead), else without one. b.mu must be
// held.
func (b *Broker) liveOutcomeLocked(s *schedule) task.ScheduleInfo {
	info := s.info()
	if info.LastTaskID == "" {
		return info
	}
	job, err := b.lookupLocked(s.spec.Queue, info.LastTaskID)
	if err != nil {
		return info
	}
	if sl, ok := b.tasks.get(job); ok {
		info.LastOutcome = task.SchedulePending
		if sl.state() == task.Dead {
			info.LastOutcome = task.ScheduleDead
		}
	}
	return info
}

// withOutcome fills the outcome of info's last task when it is no longer
// live, from the history: dead if it died, else acked (acked, deleted, or
// no longer in the history). It reads the store; b.mu is not held.
func (b *Broker) withOutcome(ctx context.Context, info task.ScheduleInfo) task.ScheduleInfo {
	if info.LastOutcome != "" || info.LastTaskID == "" {
		return info
	}
	info.LastOutcome = task.ScheduleAcked
	if f, err := b.st.LastFinished(info.Queue, info.LastTaskID); err == nil && f.Outcome == task.FinishedDead {
		info.LastOutcome = task.ScheduleDead
	}
	return info
}

func (s *schedule) info() task.ScheduleInfo {
	i := task.ScheduleInfo{ScheduleSpec: s.spec, Next: s.next, LastTaskID: s.lastID}
	if s.lastRun != 0 {
		i.Last = time.Unix(0, s.lastRun).UTC()
		if service.LastSkipped(s.spec.Name, s.lastRun, s.lastID) {
			i.LastTaskID, i.LastOutcome = "", task.ScheduleSkipped
		}
	}
	return i
}

func (s *schedule) record() store.Schedule {
	r := store.Schedule{
		Name: s.spec.Name, Cron: s.spec.Cron, Queue: s.spec.Queue, Timezone: s.spec.Timezone,
		Payload: s.spec.Payload, Created: s.created, Last: s.last,
		Misfire: s.spec.Misfire, Overlap: s.spec.Overlap, CatchUp: int64(s.spec.CatchUp),
		Priority: *s.spec.Priority, TTR: int64(s.spec.TTR), MaxAttempts: s.spec.MaxAttempts,
		Paused: s.spec.Paused, LastRun: s.lastRun, LastID: s.lastID,
	}
	return r
}

// specOf returns the spec of a schedule record.
func specOf(r store.Schedule) task.ScheduleSpec {
	p := r.Priority
	return task.ScheduleSpec{
		Name: r.Name, Cron: r.Cron, Queue: r.Queue, Payload: r.Payload, Timezone: r.Timezone,
		Misfire: r.Misfire, Overlap: r.Overlap, CatchUp: time.Duration(r.CatchUp),
		Priority: &p, TTR: time.Duration(r.TTR), MaxAttempts: r.MaxAttempts, Paused: r.Paused,
	}
}

// armLocked sets s's timeout for its first occurrence after after. b.mu
// must be held.
func (b *Broker) armLocked(s *schedule, after time.Time) {
	s.timeout = nil
	s.next = service.NextOccurrence(s.cron, s.loc, after)
	if s.next.IsZero() {
		return
	}
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
	if b.schedules[s.spec.Name] != s || s.spec.Paused || b.usableLocked() != nil {
		return // replaced, deleted or paused since it was armed
	}
	b.putOccurrenceLocked(s, at)
	b.armLocked(s, at)
}

// putOccurrenceLocked puts the task of s's occurrence at (none if it was
// put before), or skips it under the overlap rule, and records at as s's
// last, in one group. b.mu must be held.
func (b *Broker) putOccurrenceLocked(s *schedule, at time.Time) {
	if s.spec.Overlap == service.OverlapSkip && b.unfinishedLocked(s) {
		s.last, s.lastRun = at.UnixNano(), at.UnixNano() // lastID stays: the task still running
		b.writeScheduleLocked(s.record(), false)
		b.metrics.schedules.Skips(s.spec.Name)
		return
	}
	q := b.queueLocked(s.spec.Queue)
	r := service.SchedulePut(s.spec, service.OccurrenceID(s.spec.Name, at))
	if _, _, err := b.putLocked(q, &r, at.UnixNano(), time.Now().UnixNano()); err != nil {
		b.log.Error("hourglass: putting a schedule's occurrence", "schedule", s.spec.Name, "at", at, "err", err)
		return
	}
	s.last, s.lastRun, s.lastID = at.UnixNano(), at.UnixNano(), r.ID
	b.writeScheduleLocked(s.record(), false)
	b.metrics.schedules.Occurred(s.spec.Name)
}

// unfinishedLocked reports whether s's last task is still waiting or
// reserved in its queue. b.mu must be held.
func (b *Broker) unfinishedLocked(s *schedule) bool {
	if s.lastID == "" {
		return false
	}
	job, err := b.lookupLocked(s.spec.Queue, s.lastID)
	if err != nil {
		if !errors.Is(err, task.ErrNotFound) {
			b.log.Warn("hourglass: looking up a schedule's last task", "schedule", s.spec.Name, "err", err)
		}
		return false
	}
	sl, ok := b.tasks.get(job)
	return ok && sl.state() != task.Dead
}

// recoverSchedulesLocked loads the schedules, puts the occurrences missed
// while the broker was down that the misfire rule keeps, and arms the next;
// a paused schedule stays as it is. b.mu must be held.
func (b *Broker) recoverSchedulesLocked() error {
	recs, err := b.st.Schedules()
	if err != nil {
		return fmt.Errorf("hourglass: recovery: schedules: %w", err)
	}
	now := time.Now()
	for _, r := range recs {
		spec := specOf(r)
		sched, loc, err := b.parseSchedule(spec)
		if err != nil {
			b.log.Error("hourglass: recovery: skipping a schedule that no longer parses", "schedule", r.Name, "err", err)
			continue
		}
		s := &schedule{spec: service.NormalSchedule(spec), cron: sched, loc: loc, created: r.Created,
			last: r.Last, lastRun: r.LastRun, lastID: r.LastID}
		if s.lastRun == 0 && s.last != 0 { // a schedule of format 2
			s.lastRun, s.lastID = s.last, service.OccurrenceID(r.Name, time.Unix(0, s.last))
		}
		b.schedules[r.Name] = s
		b.queueLocked(s.spec.Queue).schedules++
		if s.spec.Paused {
			continue
		}
		from := time.Unix(0, max(r.Last, r.Created))
		put, missed := service.MissedOccurrences(sched, loc, s.spec.Misfire, s.spec.CatchUp, from, now)
		for _, at := range put {
			b.putOccurrenceLocked(s, at)
		}
		if missed > 0 {
			b.metrics.schedules.Misses(r.Name, missed)
			if s.last < now.UnixNano() {
				s.last = now.UnixNano() // the missed ones are settled
				b.writeScheduleLocked(s.record(), false)
			}
		}
		b.armLocked(s, now)
	}
	return nil
}
