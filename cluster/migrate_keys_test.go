package cluster_test

import (
	"context"
	"testing"

	"github.com/hourglass-go/hourglass/cluster"
)

// TestMigrate_KeyCursor: a database at version 16 holding ready tasks of
// three keys, two each, with their turn rows, migrates to 17 (the
// queues' cursors over keys): every task is kept, and a node's first
// reserve takes one task of each key, in the order of their names.
func TestMigrate_KeyCursor(t *testing.T) {
	_, pool := migratedTo(t, 16)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO hourglass_tasks (job_id, partition, queue, id, state, priority, due, fire_at,
			created, ttr, attempts, max_attempts, lease, lease_until, timeouts, releases, buries, kicks, payload, task_key)
		SELECT j, 1, 'q', 'x' || j, 1, 0, j, NULL, 0, 60000000000, 0, 0, '', 0, 0, 0, 0, 0, 'p', k
		FROM unnest('{1,2,3,4,5,6}'::bigint[], '{c,c,b,b,a,a}'::text[]) AS u(j, k);
		INSERT INTO hourglass_key_turns (queue, task_key, turn, seen)
		SELECT 'q', k, nextval('hourglass_key_turn'), 0 FROM unnest('{c,b,a}'::text[]) AS u(k)`); err != nil {
		t.Fatal(err)
	}
	from, to, err := cluster.Migrate(ctx, pool)
	if err != nil || from != 16 || to != len(cluster.Migrations()) || to < 17 {
		t.Fatalf("Migrate: %d → %d, %v", from, to, err)
	}
	n, err := cluster.Open(ctx, pool, cluster.Options{Node: "n", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	var left int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM hourglass_tasks WHERE queue = 'q' AND state = 1").Scan(&left); err != nil || left != 6 {
		t.Fatalf("ready tasks after the migration: %d, %v; want 6", left, err)
	}
	ts, err := svc(n).Reserve(ctx, "q", 3, 0)
	if err != nil || len(ts) != 3 {
		t.Fatalf("Reserve: %d tasks, %v; want 3", len(ts), err)
	}
	keys := map[string]string{}
	for _, tk := range ts {
		keys[tk.Key] = tk.ID
	}
	if keys["a"] != "x5" || keys["b"] != "x3" || keys["c"] != "x1" {
		t.Errorf("first reserve took %v; want x5, x3 and x1, the first task of each key", keys)
	}
}
