package cluster_test

import (
	"context"
	"strings"
	"testing"

	"github.com/hourglass-go/hourglass/cluster"
	"github.com/hourglass-go/hourglass/task"
)

// TestFind_PlanAfterAnalyze: FindTasks's two statements, as the generic
// plans a node runs (plan_cache_mode=force_generic_plan), read the two
// indexes of a queue's tasks in due order from the cursor with the row
// comparison as an index condition (the page up to the window's end too), also once the
// table's statistics know it holds many tasks: no scan of the whole
// table, so a page reads at most service.FindScan entries whatever the
// queue's size.
func TestFind_PlanAfterAnalyze(t *testing.T) {
	ctx := context.Background()
	n := startNode(t, server(t).CreateDatabase(t), "a")
	reqs := make([]task.PutRequest, 1000)
	for range 20 {
		for _, r := range n.PutBatch(ctx, "q", reqs) {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
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
		"PREPARE find_window(text, bigint, bigint, bigint, bigint) AS " + cluster.SQLFindWindow,
		"PREPARE find_page(text, bigint, bigint, text, text, bigint, bigint, bigint, bigint, bigint, text, bigint, bigint) AS " + cluster.SQLFind,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for _, explain := range []string{
		"EXPLAIN (COSTS OFF) EXECUTE find_window('q', 0, 0, 20000, 9000000000000000000)",
		"EXPLAIN (COSTS OFF) EXECUTE find_page('q', 0, 0, 'boom', '', 0, 0, 0, 0, 101, '', 9000000000000000000, 9000)",
	} {
		rows, err := conn.Query(ctx, explain)
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
		// The window walks the two indexes of a queue's tasks in due
		// order (migration 019) from the cursor, merged; the page reads
		// the window's range of them alone (both bounds in the index
		// conditions), at most FindScan rows, whether it then sorts them
		// or not.
		p := plan.String()
		hi := "(ROW(due, job_id) < ROW($5, 0))"
		if strings.Contains(explain, "find_page") {
			hi = "(ROW(due, job_id) <= ROW($12, $13))"
		}
		conds := map[string]string{
			"hourglass_tasks_queue_due":    "Index Cond: ((queue = $1) AND (ROW(due, job_id) > ROW($2, $3)) AND " + hi + ")",
			"hourglass_tasks_key_reserved": "Index Cond: ((queue = $1) AND (task_key = ''::text) AND (ROW(due, job_id) > ROW($2, $3)) AND " + hi + ")",
		}
		for index, cond := range conds {
			if strings.Contains(p, "Seq Scan") || !strings.Contains(p, "Scan using "+index+" ") || !strings.Contains(p, cond) {
				t.Errorf("%s: the generic plan does not read the window of %s from the cursor:\n%s", explain, index, p)
			}
		}
	}
}
