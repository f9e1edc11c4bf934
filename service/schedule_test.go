package service_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

func mustCron(t *testing.T, line string) hourglass.Schedule {
	t.Helper()
	s, err := hourglass.Cron(line)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newYork(t *testing.T) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skipf("no zone database: %v", err)
	}
	return loc
}

// occurrences returns the next n occurrences after from, in loc.
func occurrences(sched hourglass.Schedule, loc *time.Location, from time.Time, n int) []time.Time {
	var out []time.Time
	for t := from; len(out) < n; {
		t = service.NextOccurrence(sched, loc, t)
		out = append(out, t.In(loc))
	}
	return out
}

// TestNextOccurrence_SpringForward: 02:30 does not exist in New York on
// 2026-03-08 (02:00 EST becomes 03:00 EDT): that day has no occurrence.
func TestNextOccurrence_SpringForward(t *testing.T) {
	loc := newYork(t)
	got := occurrences(mustCron(t, "30 2 * * *"), loc, time.Date(2026, 3, 7, 12, 0, 0, 0, loc), 2)
	want := []time.Time{time.Date(2026, 3, 9, 2, 30, 0, 0, loc), time.Date(2026, 3, 10, 2, 30, 0, 0, loc)}
	for i := range want {
		if !got[i].Equal(want[i]) {
			t.Errorf("occurrence %d = %v, want %v", i, got[i], want[i])
		}
	}
}

// TestNextOccurrence_FallBack: 01:30 exists twice in New York on
// 2026-11-01 (EDT, then EST an hour later): it runs once, the first; an
// hourly line runs once at 01:00 and next at 02:00 EST.
func TestNextOccurrence_FallBack(t *testing.T) {
	loc := newYork(t)
	from := time.Date(2026, 10, 31, 12, 0, 0, 0, loc)
	got := occurrences(mustCron(t, "30 1 * * *"), loc, from, 2)
	first := time.Date(2026, 11, 1, 5, 30, 0, 0, time.UTC) // 01:30 EDT
	if !got[0].Equal(first) || !got[1].Equal(time.Date(2026, 11, 2, 1, 30, 0, 0, loc)) {
		t.Errorf("30 1 * * * across the change: %v, want %v and the next day", got, first)
	}
	hourly := occurrences(mustCron(t, "0 * * * *"), loc, time.Date(2026, 11, 1, 0, 30, 0, 0, loc), 3)
	want := []time.Time{
		time.Date(2026, 11, 1, 5, 0, 0, 0, time.UTC), // 01:00 EDT
		time.Date(2026, 11, 1, 7, 0, 0, 0, time.UTC), // 02:00 EST
		time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC), // 03:00 EST
	}
	for i := range want {
		if !hourly[i].Equal(want[i]) {
			t.Errorf("hourly occurrence %d = %v, want %v", i, hourly[i], want[i].In(loc))
		}
	}
	// @every keeps its pace: durations, not wall clock.
	every := occurrences(mustCron(t, "@every 30m"), loc, time.Date(2026, 11, 1, 5, 0, 0, 0, time.UTC), 4)
	for i := 1; i < len(every); i++ {
		if d := every[i].Sub(every[i-1]); d != 30*time.Minute {
			t.Errorf("@every 30m: %v after %v", every[i], every[i-1])
		}
	}
}

// TestMissedOccurrences: a minutely line whose ten occurrences after from
// were missed, under each misfire rule.
func TestMissedOccurrences(t *testing.T) {
	sched := mustCron(t, "* * * * *")
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := from.Add(10*time.Minute + 30*time.Second)
	minute := func(i int) time.Time { return from.Add(time.Duration(i) * time.Minute) }
	for _, c := range []struct {
		misfire string
		catchUp time.Duration
		put     []time.Time
		missed  int
	}{
		{service.MisfireSkip, 0, nil, 10},
		{service.MisfireOne, 0, []time.Time{minute(10)}, 9},
		{"", 0, []time.Time{minute(10)}, 9},
		{service.MisfireAll, 0, []time.Time{minute(1), minute(2), minute(3), minute(4), minute(5), minute(6), minute(7), minute(8), minute(9), minute(10)}, 0},
		{service.MisfireAll, 3 * time.Minute, []time.Time{minute(8), minute(9), minute(10)}, 7},
	} {
		put, missed := service.MissedOccurrences(sched, time.UTC, c.misfire, c.catchUp, from, now)
		if len(put) != len(c.put) || missed != c.missed {
			t.Errorf("%q %v: put %v, missed %d; want %v, %d", c.misfire, c.catchUp, put, missed, c.put, c.missed)
			continue
		}
		for i := range put {
			if !put[i].Equal(c.put[i]) {
				t.Errorf("%q %v: put %v, want %v", c.misfire, c.catchUp, put, c.put)
				break
			}
		}
	}
	// "all" puts at most MaxCatchUpOccurrences, the newest.
	every := mustCron(t, "@every 1s")
	put, missed := service.MissedOccurrences(every, time.UTC, service.MisfireAll, time.Hour, from, from.Add(2*time.Hour))
	if len(put) != service.MaxCatchUpOccurrences || !put[len(put)-1].Equal(from.Add(2*time.Hour)) || missed != 7200-service.MaxCatchUpOccurrences {
		t.Errorf("all over 7200 occurrences: put %d ending %v, missed %d", len(put), put[len(put)-1], missed)
	}
}

// TestParseSchedule_BadFields: each bad option is refused, naming it.
func TestParseSchedule_BadFields(t *testing.T) {
	ok := task.ScheduleSpec{Name: "s", Cron: "@every 1s", Queue: "q"}
	if _, _, err := service.ParseSchedule(ok, 100); err != nil {
		t.Fatalf("good spec: %v", err)
	}
	for field, f := range map[string]func(*task.ScheduleSpec){
		"misfire":      func(s *task.ScheduleSpec) { s.Misfire = "some" },
		"overlap":      func(s *task.ScheduleSpec) { s.Overlap = "never" },
		"catch_up":     func(s *task.ScheduleSpec) { s.CatchUp = -time.Second },
		"ttr":          func(s *task.ScheduleSpec) { s.TTR = 25 * time.Hour },
		"max_attempts": func(s *task.ScheduleSpec) { s.MaxAttempts = -2 },
	} {
		s := ok
		f(&s)
		_, _, err := service.ParseSchedule(s, 100)
		if !errors.Is(err, task.ErrInvalid) || !strings.Contains(err.Error(), field) {
			t.Errorf("bad %s: %v", field, err)
		}
	}
}

// TestLastOutcome: a schedule's last task is pending or dead while live,
// and dead or acked by the history once not.
func TestLastOutcome(t *testing.T) {
	for _, c := range []struct {
		live     bool
		state    task.State
		finished string
		want     string
	}{
		{true, task.Ready, "", task.SchedulePending},
		{true, task.Reserved, task.FinishedDead, task.SchedulePending},
		{true, task.Dead, "", task.ScheduleDead},
		{false, 0, task.FinishedDead, task.ScheduleDead},
		{false, 0, task.FinishedAcked, task.ScheduleAcked},
		{false, 0, "", task.ScheduleAcked},
	} {
		if got := service.LastOutcome(c.live, c.state, c.finished); got != c.want {
			t.Errorf("LastOutcome(%v, %v, %q) = %q, want %q", c.live, c.state, c.finished, got, c.want)
		}
	}
}

// TestNewScheduleInfo: the last occurrence is reported with its task, or
// skipped when the newest task put is not its own.
func TestNewScheduleInfo(t *testing.T) {
	at := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	spec := task.ScheduleSpec{Name: "daily"}
	put := service.NewScheduleInfo(spec, at.Add(time.Hour), at.UnixNano(), service.OccurrenceID("daily", at))
	if !put.Last.Equal(at) || put.LastTaskID != "daily@2026-03-01T09:00:00Z" || put.LastOutcome != "" || !put.Next.Equal(at.Add(time.Hour)) {
		t.Errorf("put: %+v", put)
	}
	skipped := service.NewScheduleInfo(spec, time.Time{}, at.UnixNano(), service.OccurrenceID("daily", at.Add(-24*time.Hour)))
	if skipped.LastTaskID != "" || skipped.LastOutcome != task.ScheduleSkipped {
		t.Errorf("skipped: %+v", skipped)
	}
	if none := service.NewScheduleInfo(spec, time.Time{}, 0, ""); !none.Last.IsZero() || none.LastOutcome != "" {
		t.Errorf("none: %+v", none)
	}
}
