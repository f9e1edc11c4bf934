package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/internal/pgtest"
	"github.com/hourglass-go/hourglass/task"
)

// TestKeys_Turns: a queue without keys writes no turn rows, by its puts
// or its reserves; a put with keys makes one row a key and one for "",
// and a reserve keeps them; once a key has no task left, the prune
// deletes its row (and ""'s once it has none either), but not while it
// has a task, nor a row written within the idle time.
func TestKeys_Turns(t *testing.T) {
	srv := pgtest.Start(t)
	n := startNode(t, srv.CreateDatabase(t), "a")
	ctx := context.Background()
	rows := func(queue string) int {
		t.Helper()
		var k int
		if err := n.pool.QueryRow(ctx, "SELECT count(*) FROM hourglass_key_turns WHERE queue = $1", queue).Scan(&k); err != nil {
			t.Fatal(err)
		}
		return k
	}
	for _, r := range n.PutBatch(ctx, "plain", []task.PutRequest{{ID: "a"}, {ID: "b"}}) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	ts, err := svc(n).Reserve(ctx, "plain", 1, 0)
	if err != nil || len(ts) != 1 {
		t.Fatal(ts, err)
	}
	if k := rows("plain"); k != 0 {
		t.Fatalf("a queue without keys has %d turn rows", k)
	}
	for _, r := range n.PutBatch(ctx, "ky", []task.PutRequest{{ID: "a", Key: "A"}, {ID: "b", Key: "B"}, {ID: "c"}}) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if k := rows("ky"); k != 3 {
		t.Fatalf("after a put of keys A, B and none: %d turn rows, want 3", k)
	}
	ts, err = svc(n).Reserve(ctx, "ky", 2, 0)
	if err != nil || len(ts) != 2 {
		t.Fatal(ts, err)
	}
	if k, err := n.PruneKeys(ctx, time.Hour); err != nil || k != 0 {
		t.Fatalf("prune of rows written within the idle time: %d, %v", k, err)
	}
	if k, err := n.PruneKeys(ctx, 0); err != nil || k != 0 {
		t.Fatalf("prune while every key has a task: %d, %v", k, err)
	}
	for _, tk := range ts {
		if err := svc(n).Ack(ctx, "ky", tk.ID, tk.Lease); err != nil {
			t.Fatal(err)
		}
	}
	if k, err := n.PruneKeys(ctx, 0); err != nil || k != 2 {
		t.Fatalf("prune after the tasks of two keys were acked: %d deleted, %v; want 2", k, err)
	}
	if k := rows("ky"); k != 1 {
		t.Fatalf("after the prune: %d turn rows, want 1", k)
	}
}
