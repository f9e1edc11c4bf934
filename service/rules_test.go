package service_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// TestUrgent: a ready task is urgent below task.DefaultPriority
// (beanstalkd's 1024), not at it.
func TestUrgent(t *testing.T) {
	for _, c := range []struct {
		prio uint32
		want bool
	}{{0, true}, {task.DefaultPriority - 1, true}, {task.DefaultPriority, false}, {1<<32 - 1, false}} {
		if got := service.Urgent(c.prio); got != c.want {
			t.Errorf("Urgent(%d) = %v, want %v", c.prio, got, c.want)
		}
	}
}

// TestHeldBy: a full queue counts as held by its concurrency whatever
// its rate, a spent rate next, and per-key limits alone count nothing.
func TestHeldBy(t *testing.T) {
	for _, c := range []struct {
		full, spent bool
		want        string
	}{{true, true, service.ThrottledConcurrency}, {true, false, service.ThrottledConcurrency},
		{false, true, service.ThrottledRate}, {false, false, ""}} {
		if got := service.HeldBy(c.full, c.spent); got != c.want {
			t.Errorf("HeldBy(full %v, spent %v) = %q, want %q", c.full, c.spent, got, c.want)
		}
	}
}

// TestScheduleCursor: the moves of a schedule's cursor, each the rule
// both engines apply.
func TestScheduleCursor(t *testing.T) {
	c := service.ScheduleCursor{Last: 100, LastRun: 100, LastID: "s@100"}
	if _, ok := c.Occurred(100, "s@again"); ok {
		t.Errorf("an occurrence at Last was put")
	}
	got, ok := c.Occurred(160, "s@160")
	if want := (service.ScheduleCursor{Last: 160, LastRun: 160, LastID: "s@160"}); !ok || got != want {
		t.Errorf("Occurred(160) = %+v, %v; want %+v", got, ok, want)
	}
	// A run now later than a catch-up's occurrence stays the last run.
	ran, _ := c.Changed(service.ScheduleChange{Run: &service.LastRun{At: time.Unix(0, 500), ID: "s@run"}}, false, 0)
	if want := (service.ScheduleCursor{Last: 100, LastRun: 500, LastID: "s@run"}); ran != want {
		t.Errorf("run at 500 = %+v; want %+v", ran, want)
	}
	got, ok = ran.Occurred(160, "s@160")
	if want := (service.ScheduleCursor{Last: 160, LastRun: 500, LastID: "s@run"}); !ok || got != want {
		t.Errorf("Occurred(160) after a run at 500 = %+v, %v; want %+v", got, ok, want)
	}
	got, ok = c.Skipped(160)
	if want := (service.ScheduleCursor{Last: 160, LastRun: 160, LastID: "s@100"}); !ok || got != want {
		t.Errorf("Skipped(160) = %+v, %v; want %+v", got, ok, want)
	}
	if _, ok := c.Skipped(50); ok {
		t.Errorf("an occurrence before Last was skipped")
	}
	if got := c.Settled(50); got != c {
		t.Errorf("Settled(50) moved the cursor back: %+v", got)
	}
	if got := c.Settled(300); got.Last != 300 || got.LastRun != 100 {
		t.Errorf("Settled(300) = %+v", got)
	}
	yes, no := true, false
	for _, x := range []struct {
		was    bool
		paused *bool
		last   int64
	}{{true, &no, 900}, {true, &yes, 100}, {false, &yes, 100}, {false, &no, 100}} {
		got, paused := c.Changed(service.ScheduleChange{Paused: x.paused}, x.was, 900)
		if got.Last != x.last || paused != *x.paused || got.LastRun != c.LastRun {
			t.Errorf("from paused=%v to %v at 900: %+v paused=%v; want Last %d", x.was, *x.paused, got, paused, x.last)
		}
	}
}

// scheduleStore records which of its methods WriteSchedule called.
type scheduleStore struct{ called string }

func (s *scheduleStore) PutSchedule(ctx context.Context, spec task.ScheduleSpec, sched hourglass.Schedule, loc *time.Location) (task.ScheduleInfo, bool, error) {
	s.called = fmt.Sprintf("put %s misfire=%s loc=%v", spec.Name, spec.Misfire, loc)
	return task.ScheduleInfo{}, true, nil
}

func (s *scheduleStore) ChangeSchedule(ctx context.Context, name string, ch service.ScheduleChange) error {
	s.called = fmt.Sprintf("change %s paused=%v run=%v", name, ch.Paused != nil, ch.Run != nil)
	return nil
}

// TestWriteSchedule: a spec is parsed and normalised before the engine
// puts it, a bad one reaches no engine, a pause or a run is a change,
// and a change of nothing is refused.
func TestWriteSchedule(t *testing.T) {
	ctx := context.Background()
	yes := true
	for _, c := range []struct {
		ch     service.ScheduleChange
		called string
		err    error
	}{
		{service.ScheduleChange{Spec: &task.ScheduleSpec{Name: "s", Cron: "@every 1h", Queue: "q", Timezone: "Europe/Paris"}}, "put s misfire=" + service.NormalSchedule(task.ScheduleSpec{}).Misfire + " loc=Europe/Paris", nil},
		{service.ScheduleChange{Spec: &task.ScheduleSpec{Name: "s", Cron: "not a line", Queue: "q"}}, "", task.ErrInvalid},
		{service.ScheduleChange{Paused: &yes}, "change s paused=true run=false", nil},
		{service.ScheduleChange{Run: &service.LastRun{ID: "s@run"}}, "change s paused=false run=true", nil},
		{service.ScheduleChange{}, "", task.ErrInvalid},
	} {
		s := &scheduleStore{}
		_, _, err := service.WriteSchedule(ctx, s, task.DefaultMaxPayload, "s", c.ch)
		if s.called != c.called || !errors.Is(err, c.err) {
			t.Errorf("WriteSchedule(%+v): called %q, %v; want %q, %v", c.ch, s.called, err, c.called, c.err)
		}
	}
}

// TestDefaultPrecedence: a put's own value first, its policy's next, the
// server's last, for ttr and max_attempts alike; task.UnlimitedAttempts
// at the first given is no limit.
func TestDefaultPrecedence(t *testing.T) {
	if got := service.DefaultPrecedence(); got != [3]service.DefaultSource{service.FromPut, service.FromPolicy, service.FromServer} {
		t.Fatalf("DefaultPrecedence() = %v", got)
	}
	for _, c := range []struct {
		put, policy, want int
	}{{3, 5, 3}, {0, 5, 5}, {0, 0, service.DefaultMaxAttempts}, {task.UnlimitedAttempts, 5, 0}, {0, task.UnlimitedAttempts, 0}} {
		r := task.PutRequest{MaxAttempts: c.put, TTR: time.Duration(c.put) * time.Second}
		service.ApplyDefaults(&r, task.Policy{MaxAttempts: c.policy, TTR: time.Duration(c.policy) * time.Second}, time.Hour)
		if r.MaxAttempts != c.want {
			t.Errorf("max_attempts of put %d, policy %d = %d, want %d", c.put, c.policy, r.MaxAttempts, c.want)
		}
		if c.put < 0 || c.policy < 0 {
			continue // no ttr is negative
		}
		if want := cmp.Or(time.Duration(cmp.Or(c.put, c.policy))*time.Second, time.Hour); r.TTR != want {
			t.Errorf("ttr of put %ds, policy %ds = %v", c.put, c.policy, r.TTR)
		}
	}
}
