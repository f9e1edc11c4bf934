package cluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/task"
)

// TestVacuum_Tasks: once thousands of tasks were worked (each leaving
// two dead versions of its row), the node that owns partition 0
// vacuums hourglass_tasks itself, within seconds, where autovacuum
// would wait for its naptime: pg_stat_user_tables counts a vacuum that
// is not autovacuum's.
func TestVacuum_Tasks(t *testing.T) {
	ctx := context.Background()
	n := startNode(t, server(t).CreateDatabase(t), "a")
	const k = 3000
	for b := 0; b < k; b += task.MaxBatch {
		reqs := make([]task.PutRequest, task.MaxBatch)
		for i := range reqs {
			reqs[i].ID = fmt.Sprint(b + i)
		}
		for _, r := range n.PutBatch(ctx, "q", reqs) {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
	}
	for worked := 0; worked < k; {
		tasks, err := svc(n).Reserve(ctx, "q", task.MaxBatch, time.Second)
		if err != nil || len(tasks) == 0 {
			t.Fatalf("Reserve after %d worked: %d tasks, %v", worked, len(tasks), err)
		}
		acks := make([]task.Ack, len(tasks))
		for i, tk := range tasks {
			acks[i] = task.Ack{Queue: "q", ID: tk.ID, Lease: tk.Lease}
		}
		errs, err := n.AckMany(ctx, acks)
		if err != nil {
			t.Fatal(err)
		}
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		worked += len(tasks)
	}
	eventually(t, time.Minute, "a vacuum of hourglass_tasks", func() bool {
		var vacuums int64
		err := n.pool.QueryRow(ctx, `SELECT vacuum_count FROM pg_stat_user_tables
			WHERE relid = 'hourglass_tasks'::regclass`).Scan(&vacuums)
		if err != nil {
			t.Fatal(err)
		}
		return vacuums > 0
	})
}
