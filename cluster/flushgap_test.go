package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/cluster"
	"github.com/hourglass-go/hourglass/task"
)

// TestFlush_Gap: under a steady stream of timers an owner starts a flush
// at most every flushGap. 600 tasks fall due 250 µs apart (150 ms in
// all); from just before the first is due to when none has a timer
// left, the owner may start at most one flush a gap, and one more (and
// those of the lanes begun just before). Flushed as their timers fired,
// they took about one a millisecond on an idle machine, twice the bound.
func TestFlush_Gap(t *testing.T) {
	ctx := context.Background()
	n, reg := startMetered(t, server(t).CreateDatabase(t), "a")
	const tasks, every = 600, 250 * time.Microsecond
	first := time.Now().Add(time.Second)
	reqs := make([]task.PutRequest, tasks)
	for i := range reqs {
		reqs[i].At = first.Add(time.Duration(i) * every)
	}
	for _, r := range n.PutBatch(ctx, "q", reqs) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	// On a machine so slow that the put took most of the second, tasks
	// fall due before the count begins: the bound holds all the same.
	time.Sleep(time.Until(first) - 20*time.Millisecond)
	from := time.Now()
	due0, whole0 := flushStatements(t, reg)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(time.Millisecond) {
		var timed int
		if err := n.pool.QueryRow(ctx, "SELECT count(*) FROM hourglass_tasks WHERE fire_at IS NOT NULL").Scan(&timed); err != nil {
			t.Fatal(err)
		}
		if timed == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d tasks still delayed 20 s after they were due", timed, tasks)
		}
	}
	elapsed := time.Since(from)
	due, whole := flushStatements(t, reg)
	flushes := due - due0
	if whole != whole0 {
		t.Errorf("%v whole statements, want none: every task fell due waiting", whole-whole0)
	}
	// A flush counts as it begins: those of the lanes begun before the
	// count may count after it began.
	if most := float64(elapsed/cluster.FlushGap) + 1 + cluster.FlushLanes; flushes > most {
		t.Errorf("%v flushes in %v, want at most %v: one every %v", flushes, elapsed.Round(time.Millisecond), most, cluster.FlushGap)
	}
	t.Logf("%v flushes in %v for %d tasks", flushes, elapsed.Round(time.Millisecond), tasks)
}
