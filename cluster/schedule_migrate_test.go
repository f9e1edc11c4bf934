package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/cluster"
	"github.com/hourglass-go/hourglass/task"
)

// TestMigrate_Schedules: a schedule written at version 6 migrates to 7
// with the defaults, its last occurrence its last run, named by the id
// of the task it put.
func TestMigrate_Schedules(t *testing.T) {
	_, pool := migratedTo(t, 6)
	ctx := context.Background()
	last := time.Date(2026, 11, 1, 5, 30, 0, 0, time.UTC)
	if _, err := pool.Exec(ctx, `INSERT INTO hourglass_schedules (name, cron, queue, timezone, payload, created, last)
		VALUES ('old', '0 0 1 1 *', 'q', '', '', 0, $1)`, last.UnixNano()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := cluster.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	n, err := cluster.Open(ctx, pool, cluster.Options{Node: "n", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	s, err := svc(n).Schedule(ctx, "old")
	if err != nil || s.Misfire != "one" || s.Overlap != "allow" || s.CatchUp != 24*time.Hour || *s.Priority != task.DefaultPriority || s.Paused ||
		!s.Last.Equal(last) || s.LastTaskID != "old@2026-11-01T05:30:00Z" || s.LastOutcome != task.ScheduleAcked {
		t.Fatalf("Schedule after the migration: %+v, %v", s, err)
	}
}
