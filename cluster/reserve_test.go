package cluster_test

import (
	"context"
	"testing"

	"github.com/hourglass-go/hourglass/cluster"
	"github.com/hourglass-go/hourglass/task"
)

// TestReserve_Async: the reservation statement commits without waiting
// for the WAL flush when it takes a task: it sets synchronous_commit off
// for its own transaction (read here before that transaction ends), and
// leaves the session's setting alone.
func TestReserve_Async(t *testing.T) {
	ctx := context.Background()
	n := startNode(t, server(t).CreateDatabase(t), "a")
	if _, _, err := svc(n).Put(ctx, "q", task.PutRequest{}); err != nil {
		t.Fatal(err)
	}
	conn, err := n.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	show := func() string {
		var v string
		if err := conn.QueryRow(ctx, "SHOW synchronous_commit").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(ctx, cluster.SQLReserve, []string{"q"}, 1, "0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	took := 0
	for rows.Next() {
		took++
	}
	rows.Close()
	if err := rows.Err(); err != nil || took != 1 {
		t.Fatalf("the statement took %d tasks: %v", took, err)
	}
	if v := show(); v != "off" {
		t.Errorf("synchronous_commit in the reservation's transaction = %q, want off", v)
	}
	tx.Rollback(ctx)
	if v := show(); v != "on" {
		t.Errorf("synchronous_commit after it = %q, want on", v)
	}
}
