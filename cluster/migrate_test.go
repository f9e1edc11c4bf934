package cluster_test

import (
	"context"
	"errors"
	"testing"

	"github.com/hourglass-go/hourglass/cluster"
	"github.com/hourglass-go/hourglass/internal/pgtest"
	"github.com/hourglass-go/hourglass/task"
)

// TestMigrate applies the migrations to a new database, then again (a
// no-op), and refuses a schema newer than the binary.
func TestMigrate(t *testing.T) {
	url := server(t).CreateDatabase(t)
	pool := pgtest.Pool(t, url, 4)
	ctx := context.Background()
	want := len(cluster.Migrations())
	for i, from := range []int{0, want} {
		f, to, err := cluster.Migrate(ctx, pool)
		if err != nil || f != from || to != want {
			t.Fatalf("Migrate #%d: %d → %d, %v; want %d → %d", i+1, f, to, err, from, want)
		}
	}
	var v, n int
	if err := pool.QueryRow(ctx, "SELECT max(version), count(*) FROM hourglass_migrations").Scan(&v, &n); err != nil {
		t.Fatal(err)
	}
	if v != want || n != want {
		t.Fatalf("hourglass_migrations: version %d in %d rows, want %d", v, n, want)
	}
	if _, err := pool.Exec(ctx, "INSERT INTO hourglass_migrations (version, name) VALUES (999, 'future')"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := cluster.Migrate(ctx, pool); !errors.Is(err, cluster.ErrSchemaNewer) {
		t.Fatalf("Migrate over a newer schema: %v, want ErrSchemaNewer", err)
	}
	if _, err := cluster.Open(ctx, pool, cluster.Options{Node: "n", Logger: quiet}); !errors.Is(err, cluster.ErrSchemaNewer) {
		t.Fatalf("Open over a newer schema: %v, want ErrSchemaNewer", err)
	}
}

// TestMigrate_Policies: a database at version 4, with a task and a
// paused queue, migrates to 5 (last errors and policies): the task has
// no last error, the queue keeps its pause and has the default policy,
// and a node serves both.
func TestMigrate_Policies(t *testing.T) {
	url := server(t).CreateDatabase(t)
	pool := pgtest.Pool(t, url, 8, cluster.ConfigurePool)
	ctx := context.Background()
	// What Migrate does, stopping at version 4.
	if _, err := pool.Exec(ctx, `CREATE TABLE hourglass_migrations (version integer PRIMARY KEY,
		name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		t.Fatal(err)
	}
	for _, m := range cluster.Migrations()[:4] {
		if _, err := pool.Exec(ctx, m.SQL); err != nil {
			t.Fatalf("%s: %v", m.Name, err)
		}
		if _, err := pool.Exec(ctx, "INSERT INTO hourglass_migrations (version, name) VALUES ($1, $2)", m.Version, m.Name); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `INSERT INTO hourglass_tasks (job_id, partition, queue, id, state, priority, due, fire_at,
			created, ttr, attempts, max_attempts, lease, lease_until, timeouts, releases, buries, kicks, payload)
		VALUES (1, 1, 'q', 'x', 1, 0, 0, NULL, 0, 60000000000, 0, 0, '', 0, 0, 0, 0, 0, 'p');
		INSERT INTO hourglass_queues (queue, paused_until, pauses) VALUES ('p', 9223372036854775807, 1)`); err != nil {
		t.Fatal(err)
	}
	from, to, err := cluster.Migrate(ctx, pool)
	if err != nil || from != 4 || to != len(cluster.Migrations()) {
		t.Fatalf("Migrate: %d → %d, %v", from, to, err)
	}
	n, err := cluster.Open(ctx, pool, cluster.Options{Node: "n", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	tk, err := n.Get("q", "x")
	if err != nil || tk.LastError != "" || string(tk.Payload) != "p" {
		t.Fatalf("task after the migration: %+v, %v", tk, err)
	}
	qs, err := n.Queues(ctx)
	if err != nil || len(qs) != 2 || qs[0].Name != "p" || !qs[0].Policy.IsZero() || !qs[0].PausedUntil.Equal(task.PausedForever) {
		t.Fatalf("queues after the migration: %+v, %v", qs, err)
	}
	if _, err := n.SetPolicy(ctx, "p", task.Policy{Concurrency: 2}); err != nil {
		t.Fatal(err)
	}
	if qd, err := n.Queue("p"); err != nil || qd.Pauses != 1 || qd.Policy.Concurrency != 2 || !qd.PausedUntil.Equal(task.PausedForever) {
		t.Fatalf("queue p with a policy: %+v, %v", qd, err)
	}
}
