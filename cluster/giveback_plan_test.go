package cluster_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/cluster"
	"github.com/hourglass-go/hourglass/task"
)

// TestGiveBack_Plan: the give-back of a lost reserve reads the reserved
// tasks of its queues through an index on queue of the reserved tasks
// (hourglass_tasks_reserved, or hourglass_tasks_key_reserved by its
// first column) and the tasks to update by an index condition, in its
// generic plan, with the table's statistics knowing it holds thousands
// of ready tasks and thousands reserved in another queue: never a scan
// of the table, nor of every reserved task.
func TestGiveBack_Plan(t *testing.T) {
	ctx := context.Background()
	n := startNode(t, server(t).CreateDatabase(t), "a")
	var reqs []task.PutRequest
	for range 1000 {
		reqs = append(reqs, task.PutRequest{})
	}
	for _, q := range []string{"q", "q", "q", "other", "other", "other"} {
		for _, r := range n.PutBatch(ctx, q, reqs) {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
	}
	if _, err := n.ReserveQueues(ctx, []string{"q"}, 10, time.Second); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := n.ReserveQueues(ctx, []string{"other"}, 1000, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := n.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, q := range []string{
		"ANALYZE hourglass_tasks",
		"SET plan_cache_mode = force_generic_plan",
		"PREPARE give_back(text[], bigint[], text) AS " + cluster.SQLGiveBackLost,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	rows, err := tx.Query(ctx, "EXPLAIN (COSTS OFF) EXECUTE give_back('{q}', '{}', '0123456789abcdef')")
	if err != nil {
		t.Fatal(err)
	}
	var plan strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan.WriteString(line + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("plan:\n%s", plan.String())
	lines := strings.Split(plan.String(), "\n")
	for i, line := range lines {
		if strings.Contains(line, "Seq Scan on hourglass_tasks") ||
			(strings.Contains(line, "Scan using") && strings.Contains(line, "on hourglass_tasks") ||
				strings.Contains(line, "Bitmap Index Scan on hourglass_tasks")) &&
				(i+1 >= len(lines) || !strings.Contains(lines[i+1], "Index Cond")) {
			t.Errorf("the give-back's generic plan reads tasks without an index condition (%s):\n%s", strings.TrimSpace(line), plan.String())
		}
	}
}
