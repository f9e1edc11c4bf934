package service

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/robfig/cron/v3"

	"github.com/hourglass-go/hourglass"
	"github.com/hourglass-go/hourglass/task"
)

// A schedule puts one task for each occurrence of its cron line, read in
// its time zone, into its queue. The task's id names the occurrence,
// "NAME@TIME" with TIME in RFC 3339 UTC (OccurrenceID), so an occurrence
// is put once even when two puts of it race (a restart, a takeover: the
// second finds the id taken). Both engines keep these rules, and fire
// schedules through one loop, internal/schedrun's Runner (arming, the
// catch-up below, a failed put tried again); they differ only in where a
// schedule is stored and which schedules each arms.
//
// Misfire: for the occurrences missed while no server ran (or no node
// owned the schedule), a schedule puts
//
//	skip  none;
//	one   the newest only (the default);
//	all   every one within CatchUp before now (default a day), at most
//	      MaxCatchUpOccurrences, the newest.
//
// Those not put count as missed (ScheduleMetrics.Missed). Missed plans it
// (MissedOccurrences).
//
// A put that fails (the store or the database away) is tried again after
// a back-off until it is put, or until the next occurrence is due: then
// it counts as missed too, and the next takes its turn.
//
// Overlap: with "skip", an occurrence whose schedule's previous task (the
// last it put) is still waiting or reserved in its queue is not put but
// recorded as the schedule's last, outcome "skipped", and counted
// (ScheduleMetrics.Skipped). A dead task does not hold the schedule back.
// "allow" (the default) always puts.
//
// Pause and resume: a paused schedule puts nothing and is not armed; the
// pause is durable. Resume starts from now: the occurrences that fell due
// while it was paused are not caught up, whatever the misfire rule.
//
// Run now puts a task at once with the id "NAME@run-MS", MS the Unix time
// in milliseconds (RunID), with the schedule's payload and task options;
// it becomes the schedule's last and does not move its next occurrence.
//
// Daylight saving: occurrences are wall-clock times in the schedule's
// zone. A wall-clock time that does not exist (skipped by a spring change,
// 02:30 in New York on 2026-03-08) has no occurrence; one that exists
// twice (01:30 in New York on 2026-11-01) has one, the first. robfig/cron
// already skips missing times but fires a repeated one twice (EDT and
// EST); NextOccurrence drops the second. "@every" lines are durations and
// keep their pace across a change.

// occurrenceLayout names occurrences in task ids: NAME@2006-01-02T15:04:05Z.
const occurrenceLayout = time.RFC3339

// MaxScheduleName leaves room in a task id (task.MaxNameLen) for "@" and
// the occurrence.
const MaxScheduleName = task.MaxNameLen - len("@2006-01-02T15:04:05Z")

// Misfire and overlap rules of a task.ScheduleSpec.
const (
	MisfireSkip  = "skip"
	MisfireOne   = "one"
	MisfireAll   = "all"
	OverlapAllow = "allow"
	OverlapSkip  = "skip"
)

const (
	// DefaultCatchUp is how far back misfire "all" reaches by default.
	DefaultCatchUp = 24 * time.Hour
	// MaxCatchUp bounds catch_up: a year.
	MaxCatchUp = 366 * 24 * time.Hour
	// MaxCatchUpOccurrences bounds the occurrences one catch-up puts.
	MaxCatchUpOccurrences = 1000
	// maxCounted bounds the occurrences walked to count missed ones: the
	// count is a lower bound past it (eleven days of an every-second line).
	maxCounted = 1_000_000
)

// OccurrenceID returns the id of the task that schedule name puts for its
// occurrence at.
func OccurrenceID(name string, at time.Time) string {
	return name + "@" + at.UTC().Format(occurrenceLayout)
}

// RunID returns the id of the task that a run now of schedule name at
// now puts: "NAME@run-MS", MS the Unix milliseconds (no longer than an
// occurrence's suffix, so it fits any schedule name).
func RunID(name string, now time.Time) string {
	return name + "@run-" + strconv.FormatInt(now.UnixMilli(), 10)
}

// LastSkipped reports whether the newest occurrence or run of schedule
// name, at lastRun (Unix ns), was skipped: lastID, the id of the newest
// task the schedule put, is not that occurrence's nor that run's. The
// engines keep lastID through skips, so that the overlap rule still
// looks at the task put before them.
func LastSkipped(name string, lastRun int64, lastID string) bool {
	at := time.Unix(0, lastRun)
	return lastRun != 0 && lastID != OccurrenceID(name, at) && lastID != RunID(name, at)
}

// NewScheduleInfo returns a schedule as the API reports it, from what
// an engine stores: its spec, its next occurrence (zero for none), its
// newest occurrence or run put or skipped (lastRun, Unix ns; 0 for none)
// and the id of the newest task it put (lastID). The outcome of a last
// occurrence skipped is filled; that of a last task put is the engine's
// to fill, with [LastOutcome].
func NewScheduleInfo(spec task.ScheduleSpec, next time.Time, lastRun int64, lastID string) task.ScheduleInfo {
	i := task.ScheduleInfo{ScheduleSpec: spec, Next: next, LastTaskID: lastID}
	if lastRun != 0 {
		i.Last = time.Unix(0, lastRun).UTC()
		if LastSkipped(spec.Name, lastRun, lastID) {
			i.LastTaskID, i.LastOutcome = "", task.ScheduleSkipped
		}
	}
	return i
}

// LastOutcome is the outcome of a schedule's last task: pending while it
// is live (waiting or reserved), dead while it is live and dead;
// otherwise dead if the newest outcome the history keeps of it,
// finished, is, and acked if it was acked, deleted, or is no longer in
// the history.
func LastOutcome(live bool, state task.State, finished string) string {
	switch {
	case live && state == task.Dead, !live && finished == task.FinishedDead:
		return task.ScheduleDead
	case live:
		return task.SchedulePending
	}
	return task.ScheduleAcked
}

// ParseSchedule checks spec against the limits (a payload of at most
// maxPayload bytes) and parses its cron line and time zone. Errors wrap
// task.ErrInvalid or task.ErrTooLarge and name the bad field.
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
	if err := checkScheduleOptions(spec); err != nil {
		return nil, nil, err
	}
	return parseCron(spec.Cron, spec.Timezone)
}

// checkScheduleOptions checks the misfire, overlap and task options.
func checkScheduleOptions(spec task.ScheduleSpec) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", task.ErrInvalid, fmt.Sprintf(format, args...))
	}
	switch spec.Misfire {
	case "", MisfireSkip, MisfireOne, MisfireAll:
	default:
		return bad("misfire %q: want skip, one or all", spec.Misfire)
	}
	switch spec.Overlap {
	case "", OverlapAllow, OverlapSkip:
	default:
		return bad("overlap %q: want allow or skip", spec.Overlap)
	}
	if spec.CatchUp < 0 || spec.CatchUp > MaxCatchUp || spec.CatchUp > 0 && spec.CatchUp < time.Second {
		return bad("catch_up %s out of range 1s..%s", spec.CatchUp, MaxCatchUp)
	}
	if spec.TTR < 0 || spec.TTR > MaxTTR || spec.TTR > 0 && spec.TTR < time.Millisecond {
		return bad("ttr %s out of range 1ms..%s", spec.TTR, MaxTTR)
	}
	if spec.MaxAttempts < task.UnlimitedAttempts || spec.MaxAttempts > task.MaxAttemptsLimit {
		return bad("max_attempts %d out of range: give 1..%d, %d for no limit, or 0 for the queue's (default %d)",
			spec.MaxAttempts, task.MaxAttemptsLimit, task.UnlimitedAttempts, DefaultMaxAttempts)
	}
	return nil
}

// TooManySchedules is the error of a new schedule past an engine's
// limit of limit schedules.
func TooManySchedules(limit int) error {
	return fmt.Errorf("%w: too many schedules (the limit is %d): delete one first", task.ErrInvalid, limit)
}

// NormalSchedule returns spec with its defaults spelled out: misfire
// "one", overlap "allow", catch-up a day, priority DefaultPriority. The
// engines store and report it so.
func NormalSchedule(spec task.ScheduleSpec) task.ScheduleSpec {
	if spec.Misfire == "" {
		spec.Misfire = MisfireOne
	}
	if spec.Overlap == "" {
		spec.Overlap = OverlapAllow
	}
	if spec.CatchUp == 0 {
		spec.CatchUp = DefaultCatchUp
	}
	if spec.Priority == nil {
		p := uint32(task.DefaultPriority)
		spec.Priority = &p
	} else {
		p := *spec.Priority
		spec.Priority = &p
	}
	return spec
}

// SchedulePut returns the put of schedule spec's occurrence (or run) id,
// due at at.
func SchedulePut(spec task.ScheduleSpec, id string) task.PutRequest {
	r := task.PutRequest{ID: id, Payload: spec.Payload, Priority: task.DefaultPriority, TTR: spec.TTR, MaxAttempts: spec.MaxAttempts}
	if spec.Priority != nil {
		r.Priority = *spec.Priority
	}
	return r
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
// form shows as a line is typed. An @every of other than whole seconds is
// refused, as a new schedule's is (checkNewSchedule). Errors wrap
// task.ErrInvalid.
func CheckCron(line, timezone string, n int, now time.Time) ([]time.Time, error) {
	sched, loc, err := parseCron(line, timezone)
	if err == nil {
		err = checkEvery(line, sched)
	}
	if err != nil {
		return nil, err
	}
	var out []time.Time
	t := now
	for range n {
		if t = NextOccurrence(sched, loc, t); t.IsZero() {
			break
		}
		out = append(out, t)
	}
	return out, nil
}

// checkNewSchedule refuses, in a schedule being set, what parses but
// cannot be what was meant: an @every that robfig/cron would round (see
// checkEvery), and a line that never fires (no time matches it within the
// five years robfig/cron searches, such as February 30th), which would
// sit there and put nothing. Schedules already stored are not held to
// this: the engines parse them with ParseSchedule alone when they load.
func checkNewSchedule(line string, sched hourglass.Schedule, loc *time.Location, now time.Time) error {
	if err := checkEvery(line, sched); err != nil {
		return err
	}
	if NextOccurrence(sched, loc, now).IsZero() {
		return fmt.Errorf("%w: cron line %q never fires: no time in the next five years matches it", task.ErrInvalid, line)
	}
	return nil
}

// checkEvery refuses an @every line whose duration is not whole seconds,
// 1s or more: robfig/cron truncates it to whole seconds and makes
// anything shorter one second (hourglass.Cron), so "@every 0s" or
// "@every 1.5s" would run every second without a word.
func checkEvery(line string, sched hourglass.Schedule) error {
	if _, ok := sched.(cron.ConstantDelaySchedule); !ok {
		return nil
	}
	_, text, _ := strings.Cut(line, "@every ")
	d, err := time.ParseDuration(strings.TrimSpace(text))
	if err != nil || d >= time.Second && d%time.Second == 0 {
		return nil
	}
	return fmt.Errorf("%w: cron line %q: @every takes whole seconds, 1s or more", task.ErrInvalid, line)
}

// NextOccurrence returns the first occurrence of sched, read in loc,
// strictly after after, in UTC, or the zero time if there is none: the
// schedule's Next with the second instance of a wall-clock time that an
// autumn change repeats dropped (see the rules above). It costs what Next
// costs, times the occurrences dropped (at most an hour's).
func NextOccurrence(sched hourglass.Schedule, loc *time.Location, after time.Time) time.Time {
	spec, ok := sched.(*cron.SpecSchedule)
	zone := loc
	if ok && spec.Location != time.Local {
		zone = spec.Location // a CRON_TZ= prefix
	}
	t := after.In(loc)
	for range 4 * 60 {
		if t = sched.Next(t); t.IsZero() {
			return t
		}
		if !ok || !repeatedWallClock(t.In(zone)) {
			return t.UTC()
		}
	}
	return time.Time{}
}

// repeatedWallClock reports whether t's wall clock, in its location, was
// already shown earlier: t lies in the hour (or so) that a change back
// repeats, and is its second pass.
func repeatedWallClock(t time.Time) bool {
	_, off := t.Zone()
	_, before := t.Add(-24 * time.Hour).Zone()
	back := time.Duration(before-off) * time.Second
	if back <= 0 {
		return false
	}
	e := t.Add(-back)
	return e.Hour() == t.Hour() && e.Minute() == t.Minute() && e.Second() == t.Second() && e.Day() == t.Day()
}

// NewestOccurrence returns the newest occurrence of sched (read in loc)
// after from and not after now, or the zero time: the one occurrence
// misfire "one" puts for the time no server ran. It looks back over
// windows that grow fourfold from one minute, so it walks few occurrences
// however long the servers were down.
func NewestOccurrence(sched hourglass.Schedule, loc *time.Location, from, now time.Time) time.Time {
	for w := time.Minute; ; w *= 4 {
		start := now.Add(-w)
		if start.Before(from) || w > 100*365*24*time.Hour {
			start = from
		}
		var found time.Time
		for t, n := NextOccurrence(sched, loc, start), 0; !t.IsZero() && !t.After(now) && n < 1_000_000; t, n = NextOccurrence(sched, loc, t), n+1 {
			found = t
		}
		if !found.IsZero() || !start.After(from) {
			return found
		}
	}
}

// MissedOccurrences plans the catch-up of a schedule whose occurrences
// after from and up to now were missed: the occurrences to put, oldest
// first, under the misfire rule (with catchUp for "all", 0 the default),
// and how many are not put (missed). It walks the missed occurrences
// once, O(missed), at most a million of them: past that the count is a
// lower bound, and "all" puts the newest thousand of the first million
// within its window (only a line firing every second or so with a
// catch-up over eleven days gets there).
func MissedOccurrences(sched hourglass.Schedule, loc *time.Location, misfire string, catchUp time.Duration, from, now time.Time) (put []time.Time, missed int) {
	if catchUp <= 0 {
		catchUp = DefaultCatchUp
	}
	total := countOccurrences(sched, loc, from, now)
	switch misfire {
	case MisfireSkip:
	case MisfireAll:
		start := from
		if w := now.Add(-catchUp); w.After(start) {
			start = w
		}
		for t, n := NextOccurrence(sched, loc, start), 0; !t.IsZero() && !t.After(now) && n < maxCounted; t, n = NextOccurrence(sched, loc, t), n+1 {
			put = append(put, t)
			if len(put) >= 2*MaxCatchUpOccurrences {
				put = append(put[:0], put[len(put)-MaxCatchUpOccurrences:]...)
			}
		}
		if len(put) > MaxCatchUpOccurrences {
			put = put[len(put)-MaxCatchUpOccurrences:]
		}
	default:
		if t := NewestOccurrence(sched, loc, from, now); !t.IsZero() {
			put = []time.Time{t}
		}
	}
	return put, max(total-len(put), 0)
}

// countOccurrences counts the occurrences after from and not after now,
// up to maxCounted.
func countOccurrences(sched hourglass.Schedule, loc *time.Location, from, now time.Time) int {
	n := 0
	for t := NextOccurrence(sched, loc, from); !t.IsZero() && !t.After(now) && n < maxCounted; t = NextOccurrence(sched, loc, t) {
		n++
	}
	return n
}

// ScheduleMetrics are the metrics of schedules that both engines keep,
// by schedule: occurrences (and runs) put, occurrences skipped by the
// overlap rule, occurrences missed under the misfire rule. Each is safe
// for concurrent use.
type ScheduleMetrics struct {
	Put, Skipped, Missed *prometheus.CounterVec
}

// NewScheduleMetrics returns a fresh set of [ScheduleMetrics], registered
// nowhere.
func NewScheduleMetrics() ScheduleMetrics {
	vec := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"schedule"})
	}
	return ScheduleMetrics{
		Put:     vec("hourglass_schedule_occurrences_put_total", "Occurrences (and runs now) of a schedule put as tasks, by schedule."),
		Skipped: vec("hourglass_schedule_occurrences_skipped_total", "Occurrences skipped because the schedule's previous task was not finished (overlap skip), by schedule."),
		Missed:  vec("hourglass_schedule_occurrences_missed_total", "Occurrences not put, by schedule: missed while no server ran and not kept by the misfire rule, or whose put failed until the next occurrence was due."),
	}
}

// Occurred counts an occurrence, or a run now, of schedule put as a
// task. O(1).
func (m ScheduleMetrics) Occurred(schedule string) { m.Put.WithLabelValues(schedule).Inc() }

// Skips counts an occurrence of schedule skipped by the overlap rule.
// O(1).
func (m ScheduleMetrics) Skips(schedule string) { m.Skipped.WithLabelValues(schedule).Inc() }

// Misses counts n occurrences of schedule not put: missed while no
// server ran that the misfire rule did not put, or whose put failed until
// the next occurrence was due. O(1).
func (m ScheduleMetrics) Misses(schedule string, n int) {
	m.Missed.WithLabelValues(schedule).Add(float64(n))
}

// Collectors returns the metrics, to register.
func (m ScheduleMetrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.Put, m.Skipped, m.Missed}
}
