package cluster_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/internal/schedrun"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// TestSchedule_OccurrenceCursor: an occurrence put after a run now
// recorded later (a catch-up's) keeps the run as the schedule's last run
// and last task (service.ScheduleCursor.Occurred), as the embedded engine
// does; an occurrence not after the last is gone and puts nothing, as
// on the embedded engine (it was put again); so is one of a paused
// schedule.
func TestSchedule_OccurrenceCursor(t *testing.T) {
	url := server(t).CreateDatabase(t)
	n := startNode(t, url, "a")
	eventually(t, 6*testLease, "the schedule's partition owned", func() bool {
		_, ok := n.Owned()[n.SchedulePartition("s")]
		return ok
	})
	ctx := context.Background()
	// Paused until its runs are recorded, so that its owner puts nothing
	// of its own meanwhile; the occurrences are then called as its
	// runner would.
	resumed := time.Now()
	if _, _, err := svc(n).SetSchedule(ctx, task.ScheduleSpec{Name: "s", Cron: "@every 1h", Queue: "q", Paused: true}); err != nil {
		t.Fatal(err)
	}
	run := resumed.Add(time.Hour)
	runID := service.RunID("s", run)
	if _, _, err := n.SetSchedule(ctx, "s", service.ScheduleChange{Run: &service.LastRun{At: run, ID: runID}}); err != nil {
		t.Fatal(err)
	}
	at := resumed.Add(time.Minute)
	if _, err := n.Occur(ctx, "s", at); !errors.Is(err, schedrun.ErrGone) {
		t.Fatalf("occur of a paused schedule: %v, want schedrun.ErrGone", err)
	}
	if err := svc(n).ResumeSchedule(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if skipped, err := n.Occur(ctx, "s", at); skipped || err != nil {
		t.Fatalf("occur: skipped %v, %v", skipped, err)
	}
	is, err := svc(n).Schedule(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if !is.Last.Equal(run) || is.LastTaskID != runID {
		t.Errorf("after an occurrence at %v: last run %v, last task %q; want the run's, %v and %s", at, is.Last, is.LastTaskID, run, runID)
	}
	id := service.OccurrenceID("s", at)
	if err := svc(n).Delete(ctx, "q", id); err != nil {
		t.Fatalf("delete the occurrence's task: %v", err)
	}
	if _, err := n.Occur(ctx, "s", at); !errors.Is(err, schedrun.ErrGone) {
		t.Errorf("occur at the last occurrence again: %v, want schedrun.ErrGone", err)
	}
	if _, err := svc(n).Get("q", id); !errors.Is(err, task.ErrNotFound) {
		t.Errorf("the occurrence's task after it was gone: %v, want it not put again", err)
	}
}
