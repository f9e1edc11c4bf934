package service

import (
	"context"
	"fmt"
	"time"

	"github.com/hourglass-go/hourglass"
	"github.com/hourglass-go/hourglass/task"
)

// ScheduleCursor is where a schedule stands between its occurrences, as
// both engines keep it (the embedded engine's record, a cluster's row of
// hourglass_schedules), and its methods are the moves of it, each the one
// rule both engines apply:
//
//   - Last, Unix ns: the newest occurrence put or skipped, or the time the
//     schedule was resumed or settled through: the misfire cursor, from
//     which its Runner plans (0: none, the schedule's creation stands);
//   - LastRun, Unix ns: the newest occurrence or run now put or skipped;
//   - LastID: the id of the newest task put (LastSkipped compares it with
//     LastRun).
//
// Example: a schedule every minute, Last 10:00. The occurrence of 10:01
// is put (Occurred: Last, LastRun 10:01, LastID NAME@10:01); a run now
// at 10:01:30 (Ran: LastRun 10:01:30, LastID NAME@run-...); a catch-up's
// occurrence of 10:01 again is refused (Occurred answers false: not
// after Last). All O(1).
type ScheduleCursor struct {
	Last, LastRun int64
	LastID        string
}

// Occurred returns c after the occurrence at (Unix ns) put as task id,
// or false, c unchanged, when at is not after Last: an occurrence the
// schedule is past, which the engine answers as gone and does not put.
// The last run is the later of LastRun and at; id is the last task
// unless a later run is recorded.
func (c ScheduleCursor) Occurred(at int64, id string) (ScheduleCursor, bool) {
	if at <= c.Last {
		return c, false
	}
	c.Last = at
	if at >= c.LastRun {
		c.LastRun, c.LastID = at, id
	}
	return c, true
}

// Skipped returns c after the occurrence at skipped under the overlap
// rule (its last task still running, which stays LastID), or false, c
// unchanged, when at is not after Last. Last and LastRun are at.
func (c ScheduleCursor) Skipped(at int64) (ScheduleCursor, bool) {
	if at <= c.Last {
		return c, false
	}
	c.Last, c.LastRun = at, at
	return c, true
}

// Settled returns c with its misfire cursor moved to through if later
// (the Runner settled the occurrences missed up to it).
func (c ScheduleCursor) Settled(through int64) ScheduleCursor {
	c.Last = max(c.Last, through)
	return c
}

// Changed returns the cursor and the pause of a schedule paused (was)
// after ch, its Paused or its Run (ScheduleChange), at now (Unix ns, the
// engine's clock): a run becomes the last run unless a later one is
// recorded, and its task the last task (its next occurrence stays); a
// resume (was paused, ch.Paused false) restarts the misfire cursor at
// now, so that the occurrences that fell due while paused are not put
// (Resumed); a pause, or setting what is set, moves nothing.
func (c ScheduleCursor) Changed(ch ScheduleChange, was bool, now int64) (ScheduleCursor, bool) {
	switch {
	case ch.Run != nil:
		c.LastRun, c.LastID = max(c.LastRun, ch.Run.At.UnixNano()), ch.Run.ID
		return c, was
	case ch.Paused != nil:
		return c.Resumed(was, *ch.Paused, now), *ch.Paused
	}
	return c, was
}

// Resumed returns c of a schedule whose pause goes from was to paused at
// now: its misfire cursor at now if that resumes it, as a ResumeSchedule
// or a replacement (SetSchedule) that unpauses does; else c.
func (c ScheduleCursor) Resumed(was, paused bool, now int64) ScheduleCursor {
	if was && !paused {
		c.Last = now
	}
	return c
}

// ScheduleStore is what an engine does for a schedule once
// WriteSchedule has dispatched a ScheduleChange.
type ScheduleStore interface {
	// PutSchedule creates or replaces spec, normalised (NormalSchedule),
	// whose cron line and time zone parse as sched and loc, durably; a
	// replacement keeps the schedule's cursor, Resumed if it unpauses.
	// created is false for a replacement.
	PutSchedule(ctx context.Context, spec task.ScheduleSpec, sched hourglass.Schedule, loc *time.Location) (info task.ScheduleInfo, created bool, err error)
	// ChangeSchedule applies ch (its Paused or its Run) to the schedule
	// name, durably, as ScheduleCursor.Changed says, or answers
	// task.ErrNoSchedule.
	ChangeSchedule(ctx context.Context, name string, ch ScheduleChange) error
}

// WriteSchedule is Engine.SetSchedule over s, the dispatch both engines
// share: a Spec is parsed against maxPayload (the engine's) and
// normalised, then put; a Paused or a Run changes the schedule stored;
// a change with none of them is task.ErrInvalid.
func WriteSchedule(ctx context.Context, s ScheduleStore, maxPayload int, name string, ch ScheduleChange) (task.ScheduleInfo, bool, error) {
	switch {
	case ch.Spec != nil:
		sched, loc, err := ParseSchedule(*ch.Spec, maxPayload)
		if err != nil {
			return task.ScheduleInfo{}, false, err
		}
		return s.PutSchedule(ctx, NormalSchedule(*ch.Spec), sched, loc)
	case ch.Paused != nil, ch.Run != nil:
		return task.ScheduleInfo{}, false, s.ChangeSchedule(ctx, name, ch)
	}
	return task.ScheduleInfo{}, false, fmt.Errorf("%w: no schedule change", task.ErrInvalid)
}
