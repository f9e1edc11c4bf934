package service

import (
	"fmt"
	"strings"
	"time"

	"github.com/hourglass-go/hourglass"
	"github.com/hourglass-go/hourglass/task"
)

// A schedule puts one task for each occurrence of its cron line, read in
// its time zone, into its queue. The task's id names the occurrence,
// "NAME@TIME" with TIME in RFC 3339 UTC (OccurrenceID), so an occurrence
// is put once even when two puts of it race (a restart, a takeover: the
// second finds the id taken). For the time no server ran, a schedule puts
// only its newest missed occurrence (NewestOccurrence). Both engines keep
// these rules; they differ only in where a schedule is stored and who
// arms it.

// occurrenceLayout names occurrences in task ids: NAME@2006-01-02T15:04:05Z.
const occurrenceLayout = time.RFC3339

// MaxScheduleName leaves room in a task id (task.MaxNameLen) for "@" and
// the occurrence.
const MaxScheduleName = task.MaxNameLen - len("@2006-01-02T15:04:05Z")

// OccurrenceID returns the id of the task that schedule name puts for its
// occurrence at.
func OccurrenceID(name string, at time.Time) string {
	return name + "@" + at.UTC().Format(occurrenceLayout)
}

// ParseSchedule checks spec against the limits (a payload of at most
// maxPayload bytes) and parses its cron line and time zone. Errors wrap
// task.ErrInvalid or task.ErrTooLarge and say what is wrong.
func ParseSchedule(spec task.ScheduleSpec, maxPayload int) (hourglass.Schedule, *time.Location, error) {
	if err := CheckQueue(spec.Name); err != nil {
		return nil, nil, fmt.Errorf("%w: schedule name: %s", task.ErrInvalid, strings.TrimPrefix(err.Error(), task.ErrInvalid.Error()+": "))
	}
	if len(spec.Name) > MaxScheduleName {
		return nil, nil, fmt.Errorf("%w: schedule name over %d characters", task.ErrInvalid, MaxScheduleName)
	}
	if err := CheckQueue(spec.Queue); err != nil {
		return nil, nil, err
	}
	if len(spec.Payload) > maxPayload {
		return nil, nil, fmt.Errorf("%w: %d bytes, over the limit of %d", task.ErrTooLarge, len(spec.Payload), maxPayload)
	}
	return parseCron(spec.Cron, spec.Timezone)
}

// parseCron parses a cron line and an IANA time zone ("" for UTC).
func parseCron(line, timezone string) (hourglass.Schedule, *time.Location, error) {
	sched, err := hourglass.Cron(line)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s", task.ErrInvalid, strings.TrimPrefix(err.Error(), "hourglass: "))
	}
	loc := time.UTC
	if timezone != "" {
		if loc, err = time.LoadLocation(timezone); err != nil {
			return nil, nil, fmt.Errorf("%w: time zone %q: %v", task.ErrInvalid, timezone, err)
		}
	}
	return sched, loc, nil
}

// CheckCron parses a cron line and time zone as a schedule's and returns
// its next n occurrences after now (fewer if it stops), in UTC: what a
// form shows as a line is typed. Errors wrap task.ErrInvalid.
func CheckCron(line, timezone string, n int, now time.Time) ([]time.Time, error) {
	sched, loc, err := parseCron(line, timezone)
	if err != nil {
		return nil, err
	}
	var out []time.Time
	t := now.In(loc)
	for range n {
		if t = sched.Next(t); t.IsZero() {
			break
		}
		out = append(out, t.UTC())
	}
	return out, nil
}

// NewestOccurrence returns the newest occurrence of sched (read in loc)
// after from and not after now, or the zero time: the one occurrence a
// schedule puts for the time no server ran. It looks back over windows
// that grow fourfold from one minute, so it walks few occurrences however
// long the servers were down.
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
