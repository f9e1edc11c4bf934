package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hourglass-go/hourglass/cluster"
	"github.com/hourglass-go/hourglass/task"
)

// TestReserve_KeyTurnHeld: a reserve of a queue that uses keys does not
// wait for another transaction that holds a key's turn row (as a reserve
// serving that key does until it commits): it serves the other keys, and
// returns while the row is still held. Reserves that waited on each
// other's turn rows ran one after another, which made a keyed queue's
// reserves on a cluster half as fast as a queue's without keys (issue 42).
func TestReserve_KeyTurnHeld(t *testing.T) {
	ctx := context.Background()
	n := startNode(t, server(t).CreateDatabase(t), "a")
	var reqs []task.PutRequest
	for _, k := range []string{"a", "b", "c", "a", "b", "c"} {
		reqs = append(reqs, task.PutRequest{Key: k})
	}
	for _, r := range n.PutBatch(ctx, "q", reqs) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	tx, err := n.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM hourglass_key_turns WHERE queue = 'q' AND task_key = 'a' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	// The row is given up after 15 s at the latest, so that a reserve
	// that waits for it returns, late.
	held := time.AfterFunc(15*time.Second, func() { tx.Rollback(context.Background()) })
	ts, err := svc(n).Reserve(ctx, "q", 2, 0)
	stillHeld := held.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if !stillHeld {
		t.Fatalf("the reserve returned once the turn row of key a was given up: it waited for it")
	}
	keys := map[string]bool{}
	for _, tk := range ts {
		keys[tk.Key] = true
	}
	if len(ts) != 2 || !keys["b"] || !keys["c"] {
		t.Errorf("reserve took %v; want one task of b and one of c, whose turns no one holds", ts)
	}
}

// TestFlush_HandsOverInTurn: the flush's hand-over to a waiting reserver
// takes the tasks falling due in turn across keys, as a reserve would:
// with five tasks of key big and one of key small falling due together,
// big served last, the waiter taking one gets small's.
func TestFlush_HandsOverInTurn(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	n := startNode(t, server(t).CreateDatabase(t), "a", func(o *cluster.Options) {
		o.Registerer = reg
		o.Lease = 10 * time.Second // the flusher is paused for a while below
	})
	must := func(rs []task.PutResult) {
		t.Helper()
		for _, r := range rs {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
	}
	must(n.PutBatch(ctx, "q", []task.PutRequest{{ID: "big-0", Key: "big"}}))
	at := time.Now().Add(3 * time.Second)
	reqs := []task.PutRequest{}
	for _, id := range []string{"big-1", "big-2", "big-3", "big-4", "big-5"} {
		reqs = append(reqs, task.PutRequest{ID: id, Key: "big", At: at})
	}
	reqs = append(reqs, task.PutRequest{ID: "small-1", Key: "small", At: at})
	must(n.PutBatch(ctx, "q", reqs))
	// big is served once: its turn comes after small's.
	ts, err := svc(n).Reserve(ctx, "q", 1, 0)
	if err != nil || len(ts) != 1 || ts[0].ID != "big-0" {
		t.Fatalf("Reserve = %v, %v; want big-0", ts, err)
	}
	if err := svc(n).Ack(ctx, "q", ts[0].ID, ts[0].Lease); err != nil {
		t.Fatal(err)
	}
	got := reserveAsync(ctx, n, "q", 1, 20*time.Second)
	eventually(t, 5*time.Second, "the reserver waiting", func() bool { return n.Waiting("q") == 1 })
	// One flush makes the six tasks due: the flusher waits until all
	// have fired.
	n.hooks.Pause()
	time.Sleep(time.Until(at) + 300*time.Millisecond)
	n.hooks.Resume()
	r := <-got
	if r.err != nil || len(r.ts) != 1 {
		t.Fatalf("Reserve = %v, %v; want one task", r.ts, r.err)
	}
	if h := counter(t, reg, "hourglass_cluster_flush_handed_total"); h != 1 {
		t.Fatalf("handed_total = %v, want 1: the reserver was not handed its task by the flush", h)
	}
	if r.ts[0].ID != "small-1" {
		t.Errorf("the waiter was handed %s; want small-1, of the key whose turn comes first", r.ts[0].ID)
	}
}
