package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/cluster"
	"github.com/hourglass-go/hourglass/task"
)

// TestDedupe_Pruned: the finished-id records of a dedupe window
// (hourglass_dedupe) live only for their window: the node that owns
// partition 0 deletes those past their end, and keeps those within it.
// A node keeping no history (History -1) writes them all the same.
func TestDedupe_Pruned(t *testing.T) {
	url := server(t).CreateDatabase(t)
	a := startNode(t, url, "a", func(o *cluster.Options) { o.History = -1 })
	ctx := context.Background()
	for queue, window := range map[string]time.Duration{"short": 100 * time.Millisecond, "long": time.Hour} {
		if _, err := svc(a).SetPolicy(ctx, queue, task.Policy{Dedupe: window}); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"a", "b", "c"} {
			if _, _, err := svc(a).Put(ctx, queue, task.PutRequest{ID: id}); err != nil {
				t.Fatal(err)
			}
			ts, err := svc(a).Reserve(ctx, queue, 1, time.Second)
			if err != nil || len(ts) != 1 {
				t.Fatalf("Reserve(%s): %+v, %v", queue, ts, err)
			}
			if err := svc(a).Ack(ctx, queue, ts[0].ID, ts[0].Lease); err != nil {
				t.Fatal(err)
			}
		}
	}
	count := func(queue string) int {
		var k int
		if err := a.pool.QueryRow(ctx, "SELECT count(*) FROM hourglass_dedupe WHERE queue = $1", queue).Scan(&k); err != nil {
			t.Fatal(err)
		}
		return k
	}
	if s, l := count("short"), count("long"); s > 3 || l != 3 {
		t.Fatalf("records: short %d, long %d; want 3 each (short's may be pruned already)", s, l)
	}
	eventually(t, 30*time.Second, "the short window's records pruned", func() bool { return count("short") == 0 })
	if l := count("long"); l != 3 {
		t.Fatalf("records of the long window after pruning: %d, want 3", l)
	}
}
