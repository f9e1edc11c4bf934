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
	_, pool := migratedTo(t, 4)
	ctx := context.Background()
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
	tk, err := svc(n).Get("q", "x")
	if err != nil || tk.LastError != "" || string(tk.Payload) != "p" {
		t.Fatalf("task after the migration: %+v, %v", tk, err)
	}
	qs, err := n.Queues(ctx)
	if err != nil || len(qs) != 2 || qs[0].Name != "p" || !qs[0].Policy.IsZero() || !qs[0].PausedUntil.Equal(task.PausedForever) {
		t.Fatalf("queues after the migration: %+v, %v", qs, err)
	}
	if _, err := svc(n).SetPolicy(ctx, "p", task.Policy{Concurrency: 2}); err != nil {
		t.Fatal(err)
	}
	if qd, err := n.Queue("p"); err != nil || qd.Pauses != 1 || qd.Policy.Concurrency != 2 || !qd.PausedUntil.Equal(task.PausedForever) {
		t.Fatalf("queue p with a policy: %+v, %v", qd, err)
	}
}

// TestMigrate_History: a database at version 5, with a reserved task, a
// ready one and a queue's policy, migrates to 6 (the history): the
// reserved task's running attempt started a ttr before its lease's end,
// its ack is recorded, the policy has no push endpoint, and the history
// is written from then on.
func TestMigrate_History(t *testing.T) {
	_, pool := migratedTo(t, 5)
	ctx := context.Background()
	const ttr = int64(60e9)
	var until int64
	if err := pool.QueryRow(ctx, `INSERT INTO hourglass_tasks (job_id, partition, queue, id, state, priority, due, fire_at,
			created, ttr, attempts, max_attempts, lease, lease_until, timeouts, releases, buries, kicks, payload)
		VALUES (1, 1, 'q', 'x', 2, 0, 0, hourglass_now() + $1, 0, $1, 2, 0, 'lease', hourglass_now() + $1, 0, 0, 0, 0, 'p'),
			(2, 2, 'q', 'y', 1, 0, 0, NULL, 0, $1, 0, 0, '', 0, 0, 0, 0, 0, 'p')
		RETURNING lease_until`, ttr).Scan(&until); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO hourglass_queues (queue, max_attempts) VALUES ('q', 5)`); err != nil {
		t.Fatal(err)
	}
	from, to, err := cluster.Migrate(ctx, pool)
	if err != nil || from != 5 || to != len(cluster.Migrations()) {
		t.Fatalf("Migrate: %d → %d, %v", from, to, err)
	}
	n, err := cluster.Open(ctx, pool, cluster.Options{Node: "n", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if p, err := n.Policy(ctx, "q"); err != nil || p.MaxAttempts != 5 || p.Push != nil {
		t.Fatalf("policy after the migration: %+v, %v", p, err)
	}
	as, err := n.Attempts(ctx, "q", "x")
	if err != nil || len(as) != 1 || as[0].N != 2 || as[0].Outcome != "" || as[0].Started.UnixNano() != until-ttr {
		t.Fatalf("attempts of the reserved task: %+v, %v; want the running 2nd, started at %d", as, err, until-ttr)
	}
	if err := svc(n).Ack(ctx, "q", "x", "lease"); err != nil {
		t.Fatal(err)
	}
	as, err = n.Attempts(ctx, "q", "x")
	if err != nil || len(as) != 1 || as[0].N != 2 || as[0].Outcome != task.AttemptAcked || as[0].Node != "n" {
		t.Fatalf("attempts of the acked task: %+v, %v", as, err)
	}
	ts, err := svc(n).Reserve(ctx, "q", 1, 0)
	if err != nil || len(ts) != 1 || ts[0].ID != "y" {
		t.Fatalf("reserve y: %+v, %v", ts, err)
	}
	if as, err := n.Attempts(ctx, "q", "y"); err != nil || len(as) != 1 || as[0].N != 1 || as[0].Outcome != "" {
		t.Fatalf("attempts of y: %+v, %v", as, err)
	}
	fs, _, err := svc(n).FinishedTasks(ctx, "q", "", 0, 10)
	if err != nil || len(fs) != 1 || fs[0].ID != "x" || fs[0].Attempts != 2 {
		t.Fatalf("history: %+v, %v", fs, err)
	}
}
