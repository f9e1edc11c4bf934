package cluster_test

import (
	"context"
	"strings"
	"testing"

	"github.com/hourglass-go/hourglass/cluster"
	"github.com/hourglass-go/hourglass/task"
)

// TestReserve_PlanAfterAnalyze: the reservation's generic plans (nodes
// run with plan_cache_mode=force_generic_plan), of sqlReserve and of
// sqlReserveLimited, fetch the tasks they take by their primary key, also once the table's statistics know it holds many
// ready tasks. The planner estimates a LIMIT $2 at a tenth of its input;
// with 500,000 ready tasks analyzed it then joined the picked tasks to
// the table by a merge join over the whole primary key, walking every
// task below the highest job id taken at each reservation (36 tasks/s
// worked instead of thousands, benchmarks/river after an ANALYZE).
func TestReserve_PlanAfterAnalyze(t *testing.T) {
	ctx := context.Background()
	n := startNode(t, server(t).CreateDatabase(t), "a")
	reqs := make([]task.PutRequest, 1000)
	for range 50 {
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
		"PREPARE reserve_plan(text[], bigint, text) AS " + cluster.SQLReserve,
		"PREPARE reserve_limited_plan(text[], bigint, int[], int[], bigint[], bigint[], bigint[], bigint, text) AS " + cluster.SQLReserveLimited,
		"PREPARE reserve_fair_plan(text[], bigint, text) AS " + cluster.SQLReserveFair,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for _, explain := range []string{
		"EXPLAIN (COSTS OFF) EXECUTE reserve_plan('{q}', 50, '0123456789abcdef')",
		"EXPLAIN (COSTS OFF) EXECUTE reserve_limited_plan('{q}', 50, '{50}', '{0}', '{0}', '{0}', '{0}', 1, '0123456789abcdef')",
		"EXPLAIN (COSTS OFF) EXECUTE reserve_limited_plan('{q}', 50, '{50}', '{0}', '{1}', '{3600000000000}', '{1}', 1, '0123456789abcdef')",
		"EXPLAIN (COSTS OFF) EXECUTE reserve_fair_plan('{q}', 50, '0123456789abcdef')",
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
		// The update reaches the tasks through the primary key's index
		// condition: no scan of the whole table, nor of its whole index.
		lines := strings.Split(plan.String(), "\n")
		byKey := false
		for i, line := range lines {
			if strings.Contains(line, "Seq Scan on hourglass_tasks") || strings.Contains(line, "Merge Join") {
				t.Errorf("%s: the generic plan reads every task (%s):\n%s", explain, strings.TrimSpace(line), plan.String())
			}
			if strings.Contains(line, "using hourglass_tasks_pkey on hourglass_tasks t") && i+1 < len(lines) &&
				strings.Contains(lines[i+1], "Index Cond: (job_id =") {
				byKey = true
			}
		}
		if !byKey {
			t.Errorf("%s: the generic plan does not take the tasks by their primary key:\n%s", explain, plan.String())
		}
	}
}

// TestConfigurePool_NoJIT: a node's connections never JIT-compile. With
// 500,000 ready tasks analyzed the reservation's generic plan passed
// jit_above_cost, and compiling it at every execution cost about a
// millisecond of the server's CPU per task taken (benchmarks/river).
func TestConfigurePool_NoJIT(t *testing.T) {
	n := startNode(t, server(t).CreateDatabase(t), "a")
	var jit string
	if err := n.pool.QueryRow(context.Background(), "SHOW jit").Scan(&jit); err != nil {
		t.Fatal(err)
	}
	if jit != "off" {
		t.Fatalf("jit = %q on a node's connection, want off", jit)
	}
}
