package cluster

import (
	"context"
	"strings"
	"testing"

	"github.com/hourglass-go/hourglass/internal/pgtest"
)

// TestPrune_PlanBySeq: the history's prune (sqlPrune) takes its batch
// from the head of the primary key, in seq order, also as a generic plan
// over 50,000 analyzed rows: no index on finished is kept for it
// (migration 018), and without one, ordering by finished would read and
// sort the whole table at every batch.
func TestPrune_PlanBySeq(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t, pgtest.Start(t).CreateDatabase(t), 2, ConfigurePool)
	if _, _, err := Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, q := range []string{
		`INSERT INTO hourglass_history (job_id, queue, id, outcome, finished, attempts, last_error)
			SELECT j, 'q', j::text, 'acked', j, 1, '' FROM generate_series(1, 50000) AS j`,
		"ANALYZE hourglass_history",
		"SET plan_cache_mode = force_generic_plan",
		"PREPARE prune_plan(bigint, bigint) AS " + sqlPrune,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	rows, err := conn.Query(ctx, "EXPLAIN (COSTS OFF) EXECUTE prune_plan(0, 1000)")
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
	if p := plan.String(); strings.Contains(p, "Seq Scan on hourglass_history") || !strings.Contains(p, "hourglass_history_pkey") {
		t.Fatalf("the prune's generic plan does not walk the primary key:\n%s", p)
	}
}
