package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hourglass-go/hourglass"
	"github.com/hourglass-go/hourglass/task"
)

// A schedule's runs are its occurrences with what became of their tasks,
// newest first (GET /v1/schedules/{name}/runs). Neither engine keeps a
// list of them: an occurrence's task has the id NAME@TIME
// (OccurrenceID), so the runs are found by walking the schedule's
// occurrences back from now and looking each id up, live (Get) and then
// in the history (LastFinished): written once, over both engines'
// operations.
//
// An occurrence whose task is neither live nor in the history is left
// out: it was not put (missed while no server ran, the schedule paused or
// not yet made), skipped by the overlap rule (only the newest skip is
// kept: it is listed, outcome "skipped"), or its record is past the
// history's retention. Runs put by "run now" (NAME@run-MS) are not
// occurrences and are not listed. A page looks at most
// RunsScanFactor×limit occurrences (two lookups each), so it may hold
// fewer than limit runs and still have a Next; a page that looked at that
// many and found none ends the listing (Next zero), as does the end of
// the look-back, MaxCatchUp before now.

// Limits of a page of runs.
const (
	DefaultRunsLimit = 20
	MaxRunsLimit     = 100
	// RunsScanFactor bounds the occurrences one page looks at: limit
	// times it.
	RunsScanFactor = 4
)

// ScheduleRun is one occurrence of a schedule and its task's outcome:
// task.SchedulePending (waiting or reserved; State says which),
// task.ScheduleDead (dead in its queue), task.ScheduleSkipped, or the
// outcome of its finished record (task.Finished*: acked, dead, deleted, cancelled)
// with Finished when it left.
type ScheduleRun struct {
	Time     time.Time
	TaskID   string // "" when skipped
	Outcome  string
	State    task.State // of a live task
	Finished time.Time  // of a finished one
	Attempts int
}

// ScheduleRuns returns up to limit (1 to MaxRunsLimit) runs of the
// schedule name, newest first, of the occurrences before before (the
// zero time: not after now), and the cursor of the next page (the zero
// time: none). task.ErrNoSchedule for no such schedule. It costs a walk
// of at most RunsScanFactor×limit occurrences and two lookups each.
func ScheduleRuns(ctx context.Context, s Service, name string, before time.Time, limit int, now time.Time) ([]ScheduleRun, time.Time, error) {
	if limit < 1 || limit > MaxRunsLimit {
		return nil, time.Time{}, fmt.Errorf("%w: limit %d: give 1 to %d", task.ErrInvalid, limit, MaxRunsLimit)
	}
	info, err := s.Schedule(ctx, name)
	if err != nil {
		return nil, time.Time{}, err
	}
	sched, loc, err := parseCron(info.Cron, info.Timezone)
	if err != nil {
		return nil, time.Time{}, err
	}
	floor := now.Add(-MaxCatchUp)
	if before.IsZero() || before.After(now) {
		before = now.Add(time.Nanosecond) // an occurrence at now is listed
	}
	scan := limit * RunsScanFactor
	times := occurrencesBefore(sched, loc, floor, before, scan)
	var out []ScheduleRun
	for i, at := range times {
		r, ok, err := scheduleRun(ctx, s, info, at)
		if err != nil {
			return nil, time.Time{}, err
		}
		if ok {
			out = append(out, r)
		}
		if len(out) == limit {
			if i == len(times)-1 && len(times) < scan {
				return out, time.Time{}, nil
			}
			return out, at, nil
		}
	}
	if len(times) < scan || len(out) == 0 {
		return out, time.Time{}, nil // the look-back's end, or a stretch without runs
	}
	return out, times[len(times)-1], nil
}

// scheduleRun looks up the task of info's occurrence at: ok is false
// when it has none (see the top of this file).
func scheduleRun(ctx context.Context, s Service, info task.ScheduleInfo, at time.Time) (ScheduleRun, bool, error) {
	id := OccurrenceID(info.Name, at)
	r := ScheduleRun{Time: at, TaskID: id}
	t, err := s.Get(info.Queue, id)
	switch {
	case err == nil:
		r.State, r.Attempts = t.State, t.Attempts
		r.Outcome = task.SchedulePending
		if t.State == task.Dead {
			r.Outcome = task.ScheduleDead
		}
		return r, true, nil
	case !errors.Is(err, task.ErrNotFound):
		return r, false, err
	}
	f, err := s.LastFinished(ctx, info.Queue, id)
	switch {
	case err == nil:
		r.Outcome, r.Finished, r.Attempts = f.Outcome, f.Finished, f.Attempts
		return r, true, nil
	case !errors.Is(err, task.ErrNotFound):
		return r, false, err
	}
	if info.LastOutcome == task.ScheduleSkipped && info.Last.Equal(at) {
		return ScheduleRun{Time: at, Outcome: task.ScheduleSkipped}, true, nil
	}
	return r, false, nil
}

// occurrencesBefore returns up to n occurrences of sched (read in loc)
// after floor and before before, newest first. It looks back over
// windows that grow fourfold from one minute until one holds n, so it
// walks about 4n occurrences at most for a regular line (and at most a
// million in any window).
func occurrencesBefore(sched hourglass.Schedule, loc *time.Location, floor, before time.Time, n int) []time.Time {
	for w := time.Minute; ; w *= 4 {
		start := before.Add(-w)
		if start.Before(floor) {
			start = floor
		}
		var found []time.Time
		for t, k := NextOccurrence(sched, loc, start), 0; !t.IsZero() && t.Before(before) && k < 1_000_000; t, k = NextOccurrence(sched, loc, t), k+1 {
			if found = append(found, t); len(found) > 2*n {
				found = append(found[:0], found[len(found)-n:]...) // keep the newest n
			}
		}
		if len(found) >= n || !start.After(floor) {
			found = found[max(0, len(found)-n):]
			for i, j := 0, len(found)-1; i < j; i, j = i+1, j-1 {
				found[i], found[j] = found[j], found[i]
			}
			return found
		}
	}
}
