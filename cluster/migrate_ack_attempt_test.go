package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/cluster"
	"github.com/hourglass-go/hourglass/task"
)

// TestMigrate_AckAttempt: a database at version 17 holding a task acked
// on its second attempt (its history row and two attempt rows, as
// written before) migrates to 18 (the ack's attempt in the history row,
// no index on finished, none on a queue's job ids): its history and
// both attempts read as before, every field; a task ready before it is
// reserved and acked after it, its attempt read the same way.
func TestMigrate_AckAttempt(t *testing.T) {
	_, pool := migratedTo(t, 17)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	ns := func(d time.Duration) int64 { return now.Add(d).UnixNano() }
	if _, err := pool.Exec(ctx, `INSERT INTO hourglass_history (job_id, queue, id, outcome, finished, attempts, last_error)
			VALUES (7, 'q', 'x', 'acked', $1, 2, 'boom')`, ns(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO hourglass_attempts (job_id, n, started, ended, outcome, error, status, node, attempt, queue) VALUES
			(7, 1, $2, $3, 'nacked', 'boom', 0, 'a', 1, 'q'),
			(7, 2, $4, $1, 'acked', '', 200, 'b', 2, 'q')`,
		ns(-time.Second), ns(-4*time.Second), ns(-3*time.Second), ns(-2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO hourglass_tasks (job_id, partition, queue, id, state, priority, due, fire_at,
			created, ttr, attempts, max_attempts, lease, lease_until, timeouts, releases, buries, kicks, payload)
		VALUES (8, 8, 'q', 'z', 1, 0, 0, NULL, 0, 60000000000, 0, 0, '', 0, 0, 0, 0, 0, 'p')`); err != nil {
		t.Fatal(err)
	}
	from, to, err := cluster.Migrate(ctx, pool)
	if err != nil || from != 17 || to != len(cluster.Migrations()) || to < 18 {
		t.Fatalf("Migrate: %d → %d, %v", from, to, err)
	}
	n, err := cluster.Open(ctx, pool, cluster.Options{Node: "n", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	want := []task.Attempt{
		{N: 1, Attempt: 1, Queue: "q", Started: now.Add(-4 * time.Second), Ended: now.Add(-3 * time.Second),
			Outcome: task.AttemptNacked, Error: "boom", Node: "a"},
		{N: 2, Attempt: 2, Queue: "q", Started: now.Add(-2 * time.Second), Ended: now.Add(-time.Second),
			Outcome: task.AttemptAcked, Status: 200, Node: "b"},
	}
	as, err := n.Attempts(ctx, "q", "x")
	if err != nil || len(as) != len(want) {
		t.Fatalf("Attempts after the migration: %+v, %v; want %+v", as, err, want)
	}
	for i := range want {
		if !as[i].Started.Equal(want[i].Started) || !as[i].Ended.Equal(want[i].Ended) {
			t.Fatalf("attempt %d: %+v; want %+v", i+1, as[i], want[i])
		}
		as[i].Started, as[i].Ended = want[i].Started, want[i].Ended
		if as[i] != want[i] {
			t.Fatalf("attempt %d: %+v; want %+v", i+1, as[i], want[i])
		}
	}
	fs, _, err := svc(n).FinishedTasks(ctx, "q", "", 0, 10)
	if err != nil || len(fs) != 1 || fs[0].JobID != 7 || fs[0].Outcome != task.FinishedAcked || fs[0].Attempts != 2 ||
		fs[0].LastError != "boom" || !fs[0].Finished.Equal(now.Add(-time.Second)) {
		t.Fatalf("history after the migration: %+v, %v", fs, err)
	}

	// The indexes that only the pruner, or no statement, read are gone.
	var left []string
	if err := pool.QueryRow(ctx, `SELECT coalesce(array_agg(indexname), '{}') FROM pg_indexes
		WHERE indexname IN ('hourglass_history_finished', 'hourglass_tasks_queue_job')`).Scan(&left); err != nil || len(left) > 0 {
		t.Fatalf("indexes left: %v, %v", left, err)
	}

	// The live task is kept; acked after the migration, its attempt is
	// in its history row, read the same way.
	r, err := svc(n).Reserve(ctx, "q", 1, time.Second)
	if err != nil || len(r) != 1 || r[0].ID != "z" || r[0].JobID != 8 {
		t.Fatalf("Reserve: %+v, %v; want the task z put before the migration", r, err)
	}
	if err := svc(n).Ack(ctx, "q", "z", r[0].Lease); err != nil {
		t.Fatal(err)
	}
	if k := countAttemptRows(t, &testNode{pool: pool}, 8); k != 0 {
		t.Fatalf("%d rows of hourglass_attempts for a task acked on its first attempt; want none", k)
	}
	as, err = n.Attempts(ctx, "q", "z")
	if err != nil || len(as) != 1 || as[0].N != 1 || as[0].Attempt != 1 || as[0].Outcome != task.AttemptAcked ||
		as[0].Node != "n" || as[0].Queue != "q" {
		t.Fatalf("attempts of a task acked after the migration: %+v, %v", as, err)
	}
}
