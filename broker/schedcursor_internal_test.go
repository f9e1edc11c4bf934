package broker

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/internal/schedrun"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/store/memstore"
	"github.com/hourglass-go/hourglass/task"
)

// TestSchedule_OccurrenceAfterLaterRun: an occurrence put after a run now
// recorded later (a catch-up's) keeps the run as the schedule's last run
// and last task (service.ScheduleCursor.Occurred), as a cluster node
// does; and an occurrence not after the last is gone, putting nothing.
func TestSchedule_OccurrenceAfterLaterRun(t *testing.T) {
	ctx := context.Background()
	b, err := Open(memstore.New(), Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	spec := task.ScheduleSpec{Name: "s", Cron: "@every 1h", Queue: "q", Paused: true}
	if _, _, err := b.SetSchedule(ctx, "s", service.ScheduleChange{Spec: &spec}); err != nil {
		t.Fatal(err)
	}
	yes, no := true, false
	resumed := time.Now()
	if _, _, err := b.SetSchedule(ctx, "s", service.ScheduleChange{Paused: &no}); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	s := b.schedules["s"]
	rs := schedrun.Schedule{Spec: s.spec, Version: s.created}
	b.mu.Unlock()
	// Paused again, so that its runner puts nothing of its own; occur
	// is called as the runner would have been before.
	if _, _, err := b.SetSchedule(ctx, "s", service.ScheduleChange{Paused: &yes}); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	s.spec.Paused = false // as it was when the runner planned
	b.mu.Unlock()
	run := resumed.Add(time.Hour)
	runID := service.RunID("s", run)
	if _, _, err := b.SetSchedule(ctx, "s", service.ScheduleChange{Run: &service.LastRun{At: run, ID: runID}}); err != nil {
		t.Fatal(err)
	}
	at := resumed.Add(time.Minute)
	if skipped, err := b.occur(ctx, &rs, at); skipped || err != nil {
		t.Fatalf("occur: skipped %v, %v", skipped, err)
	}
	is, err := b.Schedules(ctx, "s")
	if err != nil || len(is) != 1 {
		t.Fatalf("Schedules: %v, %v", is, err)
	}
	if !is[0].Last.Equal(run) || is[0].LastTaskID != runID {
		t.Errorf("after an occurrence at %v: last run %v, last task %q; want the run's, %v and %s", at, is[0].Last, is[0].LastTaskID, run, runID)
	}
	if _, err := b.occur(ctx, &rs, at); err != schedrun.ErrGone {
		t.Errorf("occur at the last occurrence again: %v, want schedrun.ErrGone", err)
	}
}
