package broker_test

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hourglass-go/hourglass/broker"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/store/memstore"
	"github.com/hourglass-go/hourglass/task"
)

// TestBroker_ScheduleOverlap: with overlap skip, occurrences are skipped
// while the schedule's last task waits, and put again once it is acked;
// run now puts a task that becomes the last.
func TestBroker_ScheduleOverlap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := broker.Open(memstore.New(), broker.Config{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		info, _, err := svc(b).SetSchedule(ctx, task.ScheduleSpec{Name: "ov", Cron: "@every 1m", Queue: "q", Overlap: "skip"})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Until(info.Next) + 3*time.Minute + time.Second)
		synctest.Wait()
		tasks, _, err := b.FindTasks(ctx, "q", service.Filter{}, service.Cursor{}, 100)
		if err != nil || len(tasks) != 1 {
			t.Fatalf("after 4 occurrences: %d tasks %+v (%v), want 1", len(tasks), tasks, err)
		}
		got, err := svc(b).Schedule(ctx, "ov")
		if err != nil || got.LastOutcome != task.ScheduleSkipped {
			t.Fatalf("Schedule: %+v, %v; want skipped", got, err)
		}
		run, err := svc(b).RunSchedule(ctx, "ov")
		if err != nil || !strings.HasPrefix(run.ID, "ov@run-") {
			t.Fatalf("RunSchedule: %+v, %v", run, err)
		}
		if got, _ := svc(b).Schedule(ctx, "ov"); got.LastTaskID != run.ID || got.LastOutcome != task.SchedulePending {
			t.Fatalf("after run: %+v", got)
		}
	})
}
