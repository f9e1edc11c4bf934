package broker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/hourglass-go/hourglass"
	"github.com/hourglass-go/hourglass/internal/schedrun"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/store"
	"github.com/hourglass-go/hourglass/task"
)

// A schedule's record is stored here; its rules are service/schedule.go's
// and its firing internal/schedrun's (b.runner, which holds the timers of
// the schedules not paused). This file keeps the records, in memory and
// in the store, and the primitives the Runner calls: occur (put an
// occurrence's task, or skip it, and record it as the last, in one group
// commit) and settle.

// schedule is a cron schedule in memory. Guarded by Broker.mu.
type schedule struct {
	spec    task.ScheduleSpec // normalised (service.NormalSchedule)
	cron    hourglass.Schedule
	loc     *time.Location
	created int64 // when the spec was set, Unix ns: its version
	// cur is where the schedule stands: its misfire cursor, last run and
	// last task, moved by service.ScheduleCursor's rules.
	cur service.ScheduleCursor
}

// run returns s as the Runner arms it.
func (s *schedule) run() schedrun.Schedule {
	return schedrun.Schedule{Spec: s.spec, Cron: s.cron, Loc: s.loc, Version: s.created, From: time.Unix(0, max(s.cur.Last, s.created))}
}

// parseSchedule checks spec against the broker's limits and parses its
// cron line and time zone.
func (b *Broker) parseSchedule(spec task.ScheduleSpec) (hourglass.Schedule, *time.Location, error) {
	return service.ParseSchedule(spec, b.cfg.MaxPayload)
}

// SetSchedule writes the schedule name as c says (service.Engine), in
// one group commit, as service.WriteSchedule dispatches it: a new spec
// (PutSchedule), or a change of the schedule stored (ChangeSchedule).
func (b *Broker) SetSchedule(ctx context.Context, name string, c service.ScheduleChange) (task.ScheduleInfo, bool, error) {
	return service.WriteSchedule(ctx, (*scheduleStore)(b), b.cfg.MaxPayload, name, c)
}

// scheduleStore is the broker as service.WriteSchedule sees it.
type scheduleStore Broker

// PutSchedule creates or replaces the schedule spec.Name, durably
// (service.ScheduleStore). Each occurrence puts one task into spec.Queue
// with id "NAME@TIME" (TIME the occurrence in RFC 3339, UTC) and due at
// the occurrence, so no occurrence is put twice, across restarts too.
// created is false for a replacement, which keeps the cursor
// (service.ScheduleCursor.Resumed if it unpauses).
func (ss *scheduleStore) PutSchedule(ctx context.Context, spec task.ScheduleSpec, sched hourglass.Schedule, loc *time.Location) (info task.ScheduleInfo, created bool, err error) {
	b := (*Broker)(ss)
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
		s.cur = old.cur.Resumed(old.spec.Paused, spec.Paused, now.UnixNano())
	}
	b.schedules[spec.Name] = s
	b.writeScheduleLocked(s.record(), false)
	if spec.Paused {
		b.runner.Disarm(spec.Name)
	} else {
		b.runner.Arm(s.run(), now)
	}
	info = b.infoLocked(s)
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
	return b.change(ctx, name, service.ScheduleChange{}, true)
}

// ChangeSchedule applies c to the schedule name (service.ScheduleStore).
func (ss *scheduleStore) ChangeSchedule(ctx context.Context, name string, c service.ScheduleChange) error {
	return (*Broker)(ss).change(ctx, name, c, false)
}

// change deletes the schedule name (del), or applies c to it, durably,
// in one group commit, or returns ErrNoSchedule. Its cursor moves as
// service.ScheduleCursor.Changed says; a run counts in its puts; a pause
// disarms it, so that it puts nothing, and a resume arms it from its
// cursor, now.
func (b *Broker) change(ctx context.Context, name string, c service.ScheduleChange, del bool) error {
	now := time.Now()
	b.mu.Lock()
	s, ok := b.schedules[name]
	if err := b.usableLocked(); err != nil || !ok {
		b.mu.Unlock()
		return cmp.Or(err, task.ErrNoSchedule)
	}
	switch {
	case del:
		b.runner.Disarm(name)
		delete(b.schedules, name)
		b.unscheduleLocked(s)
		b.writeScheduleLocked(store.Schedule{Name: name}, true)
	default:
		was := s.spec.Paused
		s.cur, s.spec.Paused = s.cur.Changed(c, was, now.UnixNano())
		if c.Run != nil {
			b.metrics.schedules.Occurred(name)
		}
		if s.spec.Paused != was {
			b.runner.Disarm(name)
			if !s.spec.Paused {
				b.runner.Arm(s.run(), now)
			}
		}
		if c.Run != nil || s.spec.Paused != was {
			b.writeScheduleLocked(s.record(), false)
		}
	}
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
	info := b.infoLocked(s)
	if info.LastTaskID == "" {
		return info
	}
	job, err := b.lookupLocked(s.spec.Queue, info.LastTaskID)
	if err != nil {
		return info
	}
	if sl, ok := b.tasks.get(job); ok {
		info.LastOutcome = service.LastOutcome(true, sl.state(), "")
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
	f, _ := b.st.LastFinished(info.Queue, info.LastTaskID) // none: acked, or gone from the history
	info.LastOutcome = service.LastOutcome(false, 0, f.Outcome)
	return info
}

// infoLocked returns s as the API reports it, without the outcome of a
// last task put. b.mu must be held.
func (b *Broker) infoLocked(s *schedule) task.ScheduleInfo {
	return service.NewScheduleInfo(s.spec, b.runner.Next(s.spec.Name), s.cur.LastRun, s.cur.LastID)
}

func (s *schedule) record() store.Schedule {
	r := store.Schedule{
		Name: s.spec.Name, Cron: s.spec.Cron, Queue: s.spec.Queue, Timezone: s.spec.Timezone,
		Payload: s.spec.Payload, Created: s.created, Last: s.cur.Last,
		Misfire: s.spec.Misfire, Overlap: s.spec.Overlap, CatchUp: int64(s.spec.CatchUp),
		Priority: *s.spec.Priority, TTR: int64(s.spec.TTR), MaxAttempts: s.spec.MaxAttempts,
		Paused: s.spec.Paused, LastRun: s.cur.LastRun, LastID: s.cur.LastID,
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

// occur is the Runner's primitive (schedrun.OccurFunc): it puts the
// task of rs's occurrence at, or skips it, and records at as the last,
// in one group, unless rs is no longer the schedule stored (replaced,
// deleted, paused) or at is not after its last occurrence: then it
// answers schedrun.ErrGone. It does not wait for the commit: a crash
// loses the put and its record together.
func (b *Broker) occur(ctx context.Context, rs *schedrun.Schedule, at time.Time) (skipped bool, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, err := b.currentScheduleLocked(rs)
	if err != nil {
		return false, err
	}
	if at.UnixNano() <= s.cur.Last {
		return false, schedrun.ErrGone // service.ScheduleCursor.Occurred's bound
	}
	return b.putOccurrenceLocked(s, at)
}

// settle is the Runner's primitive (schedrun.SettleFunc): through
// becomes rs's misfire cursor if later.
func (b *Broker) settle(ctx context.Context, rs *schedrun.Schedule, through time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, err := b.currentScheduleLocked(rs)
	if err != nil {
		return err
	}
	if c := s.cur.Settled(through.UnixNano()); c != s.cur {
		s.cur = c
		b.writeScheduleLocked(s.record(), false)
	}
	return nil
}

// currentScheduleLocked returns the schedule rs names if it is still
// rs's version, not paused, and the broker serves; else an error
// wrapping schedrun.ErrGone. b.mu must be held.
func (b *Broker) currentScheduleLocked(rs *schedrun.Schedule) (*schedule, error) {
	if err := b.usableLocked(); err != nil {
		return nil, fmt.Errorf("%w: %w", schedrun.ErrGone, err)
	}
	s := b.schedules[rs.Spec.Name]
	if s == nil || s.created != rs.Version || s.spec.Paused {
		return nil, schedrun.ErrGone
	}
	return s, nil
}

// putOccurrenceLocked puts the task of s's occurrence at (none if it was
// put before), or skips it under the overlap rule, and records at as s's
// last, in one group. b.mu must be held.
func (b *Broker) putOccurrenceLocked(s *schedule, at time.Time) (skipped bool, err error) {
	if s.spec.Overlap == service.OverlapSkip && b.unfinishedLocked(s) {
		s.cur, _ = s.cur.Skipped(at.UnixNano())
		b.writeScheduleLocked(s.record(), false)
		return true, nil
	}
	q := b.queueLocked(s.spec.Queue)
	r := service.SchedulePut(s.spec, service.OccurrenceID(s.spec.Name, at))
	if _, _, err := b.putLocked(q, &r, at.UnixNano(), time.Now().UnixNano()); err != nil {
		return false, err
	}
	s.cur, _ = s.cur.Occurred(at.UnixNano(), r.ID)
	b.writeScheduleLocked(s.record(), false)
	return false, nil
}

// unfinishedLocked reports whether s's last task is still waiting or
// reserved in its queue. b.mu must be held.
func (b *Broker) unfinishedLocked(s *schedule) bool {
	if s.cur.LastID == "" {
		return false
	}
	job, err := b.lookupLocked(s.spec.Queue, s.cur.LastID)
	if err != nil {
		if !errors.Is(err, task.ErrNotFound) {
			b.log.Warn("hourglass: looking up a schedule's last task", "schedule", s.spec.Name, "err", err)
		}
		return false
	}
	sl, ok := b.tasks.get(job)
	return ok && sl.state() != task.Dead
}

// recoverSchedulesLocked loads the schedules and returns those not
// paused, for the Runner to take up (recover). b.mu must be held.
func (b *Broker) recoverSchedulesLocked() ([]schedrun.Schedule, error) {
	recs, err := b.st.Schedules()
	if err != nil {
		return nil, fmt.Errorf("hourglass: recovery: schedules: %w", err)
	}
	var armed []schedrun.Schedule
	for _, r := range recs {
		spec := specOf(r)
		sched, loc, err := b.parseSchedule(spec)
		if err != nil {
			b.log.Error("hourglass: recovery: skipping a schedule that no longer parses", "schedule", r.Name, "err", err)
			continue
		}
		s := &schedule{spec: service.NormalSchedule(spec), cron: sched, loc: loc, created: r.Created,
			cur: service.ScheduleCursor{Last: r.Last, LastRun: r.LastRun, LastID: r.LastID}}
		if s.cur.LastRun == 0 && s.cur.Last != 0 { // a schedule of format 2
			s.cur.LastRun, s.cur.LastID = s.cur.Last, service.OccurrenceID(r.Name, time.Unix(0, s.cur.Last))
		}
		b.schedules[r.Name] = s
		b.queueLocked(s.spec.Queue).schedules++
		if !s.spec.Paused {
			armed = append(armed, s.run())
		}
	}
	return armed, nil
}
