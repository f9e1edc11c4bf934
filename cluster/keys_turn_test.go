package cluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hourglass-go/hourglass/cluster"
	"github.com/hourglass-go/hourglass/task"
)

// TestReserve_KeyHeld: a reserve of a queue that uses keys leaves a key
// whose first ready task another transaction holds (as a reserve
// serving that key does until it commits) to that transaction, serves
// the other keys, and returns while the task is still held: reserves
// running at once serve different keys, one after another's, rather than
// the second task of the same keys.
func TestReserve_KeyHeld(t *testing.T) {
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
	if _, err := tx.Exec(ctx, `SELECT 1 FROM hourglass_tasks WHERE job_id = (SELECT min(job_id) FROM hourglass_tasks
		WHERE queue = 'q' AND task_key = 'a') FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	// The task is given up after 15 s at the latest, so that a reserve
	// that waits for it returns, late.
	held := time.AfterFunc(15*time.Second, func() { tx.Rollback(context.Background()) })
	ts, err := svc(n).Reserve(ctx, "q", 2, 0)
	stillHeld := held.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if !stillHeld {
		t.Fatalf("the reserve returned once key a's task was given up: it waited for it")
	}
	keys := map[string]bool{}
	for _, tk := range ts {
		keys[tk.Key] = true
	}
	if len(ts) != 2 || !keys["b"] || !keys["c"] {
		t.Errorf("reserve took %v; want one task of b and one of c: a is being served", ts)
	}
}

// TestReserve_KeyCursor: a reserve of a queue that uses keys serves its
// keys in a round in the order of their names, and records where it is
// in one row (the queue's cursor), not a row a key served: with 40 keys
// of three tasks each, two reserves of 32 serve every key once before
// any twice, and leave every key's turn row as the puts wrote it.
func TestReserve_KeyCursor(t *testing.T) {
	ctx := context.Background()
	n := startNode(t, server(t).CreateDatabase(t), "a")
	var reqs []task.PutRequest
	for range 3 {
		for k := range 40 {
			reqs = append(reqs, task.PutRequest{Key: fmt.Sprintf("k%02d", k)})
		}
	}
	for _, r := range n.PutBatch(ctx, "q", reqs) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	turns := func() string {
		t.Helper()
		var s string
		if err := n.pool.QueryRow(ctx, `SELECT string_agg(task_key || ':' || turn || ':' || seen, ',' ORDER BY task_key)
			FROM hourglass_key_turns`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := turns()
	served := map[string]int{}
	for i := range 2 {
		ts, err := svc(n).Reserve(ctx, "q", 32, 0)
		if err != nil || len(ts) != 32 {
			t.Fatalf("reserve %d: %d tasks, %v", i+1, len(ts), err)
		}
		for _, tk := range ts {
			served[tk.Key]++
		}
		if i == 0 {
			var cur string
			if err := n.pool.QueryRow(ctx, `SELECT task_key FROM hourglass_key_cursors WHERE queue = 'q'`).Scan(&cur); err != nil || cur != "k31" {
				t.Errorf("the cursor after the first reserve: %q, %v; want k31, the 32nd key", cur, err)
			}
		}
	}
	if len(served) != 40 {
		t.Errorf("two reserves of 32 served %d keys: %v; want all 40", len(served), served)
	}
	for k, c := range served {
		if c > 2 {
			t.Errorf("key %s served %d times in 64 tasks of 40 keys", k, c)
		}
	}
	if after := turns(); after != before {
		t.Errorf("the reserves wrote the keys' turn rows:\nbefore %s\nafter  %s", before, after)
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

// TestKeys_CursorPruned: the cursor of a queue whose keys are gone (no
// turn row left) is deleted by the prune of the keys' turns, a round
// after the last key's row.
func TestKeys_CursorPruned(t *testing.T) {
	ctx := context.Background()
	n := startNode(t, server(t).CreateDatabase(t), "a")
	for _, r := range n.PutBatch(ctx, "q", []task.PutRequest{{Key: "a"}, {Key: "b"}}) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	cursors := func() int {
		t.Helper()
		var k int
		if err := n.pool.QueryRow(ctx, "SELECT count(*) FROM hourglass_key_cursors").Scan(&k); err != nil {
			t.Fatal(err)
		}
		return k
	}
	ts, err := svc(n).Reserve(ctx, "q", 2, 0)
	if err != nil || len(ts) != 2 {
		t.Fatal(ts, err)
	}
	if k := cursors(); k != 1 {
		t.Fatalf("after a reserve of a queue with keys: %d cursors, want 1", k)
	}
	if _, err := n.PruneKeys(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if k := cursors(); k != 1 {
		t.Fatalf("the prune deleted the cursor of a queue whose keys have tasks: %d cursors", k)
	}
	for _, tk := range ts {
		if err := svc(n).Ack(ctx, "q", tk.ID, tk.Lease); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if _, err := n.PruneKeys(ctx, 0); err != nil {
			t.Fatal(err)
		}
	}
	if k := cursors(); k != 0 {
		t.Fatalf("after the keys' rows were pruned: %d cursors, want 0", k)
	}
}

// TestKeys_PruneBehindBacklog: the prune of key turns gets past a batch
// of keys that all have tasks (reserves do not write their rows, so a
// backlog keeps its rows' seen old): a key gone behind 1,000 such keys
// (the prune's batch) loses its row by the second prune.
func TestKeys_PruneBehindBacklog(t *testing.T) {
	ctx := context.Background()
	n := startNode(t, server(t).CreateDatabase(t), "a")
	var reqs []task.PutRequest
	for k := range 1000 {
		reqs = append(reqs, task.PutRequest{Key: fmt.Sprintf("live-%04d", k)})
		if len(reqs) == task.MaxBatch {
			for _, r := range n.PutBatch(ctx, "q", reqs) {
				if r.Err != nil {
					t.Fatal(r.Err)
				}
			}
			reqs = reqs[:0]
		}
	}
	for _, r := range n.PutBatch(ctx, "q", append(reqs, task.PutRequest{ID: "gone", Key: "gone"})) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if err := svc(n).Delete(ctx, "q", "gone"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := n.PruneKeys(ctx, 0); err != nil {
			t.Fatal(err)
		}
	}
	var k int
	if err := n.pool.QueryRow(ctx, `SELECT count(*) FROM hourglass_key_turns WHERE queue = 'q' AND task_key = 'gone'`).Scan(&k); err != nil || k != 0 {
		t.Fatalf("the row of key gone after two prunes: %d, %v; want none", k, err)
	}
}
