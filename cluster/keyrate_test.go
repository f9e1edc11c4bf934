package cluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/task"
)

// TestLimits_KeyRateRowsBounded: a per-key rate's rows of
// hourglass_key_buckets live only while the bucket is not full: 200 keys
// handed a task each have 200 rows, and once their buckets are full again
// the next reserve of the queue deletes them (it deletes up to its max
// and 64 more); a change of the per-key rate deletes them all, and so
// does deleting the policy.
func TestLimits_KeyRateRowsBounded(t *testing.T) {
	ctx := context.Background()
	n := startNode(t, server(t).CreateDatabase(t), "a")
	const every = 50 * time.Millisecond
	if _, err := n.SetPolicy(ctx, "q", task.Policy{PerKey: &task.PerKey{Rate: &task.Rate{Limit: 1, Per: every, Burst: 1}}}); err != nil {
		t.Fatal(err)
	}
	const keys = 200
	reqs := make([]task.PutRequest, keys)
	for i := range reqs {
		reqs[i] = task.PutRequest{ID: fmt.Sprint(i), Key: fmt.Sprint("k", i)}
	}
	for _, r := range n.PutBatch(ctx, "q", reqs) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	rows := func() int {
		var c int
		if err := n.pool.QueryRow(ctx, "SELECT count(*) FROM hourglass_key_buckets").Scan(&c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	got := 0
	for got < keys {
		ts, err := n.Reserve(ctx, "q", keys, time.Second)
		if err != nil || len(ts) == 0 {
			t.Fatalf("reserve: %d tasks, %v, after %d", len(ts), err, got)
		}
		got += len(ts)
	}
	if c := rows(); c < keys/2 || c > keys {
		t.Fatalf("%d bucket rows after a task of each of %d keys within %v", c, keys, every)
	}
	time.Sleep(2 * every)
	if _, _, err := n.Put(ctx, "q", task.PutRequest{ID: "z", Key: "z"}); err != nil {
		t.Fatal(err)
	}
	if ts, err := n.Reserve(ctx, "q", keys, 0); err != nil || len(ts) != 1 {
		t.Fatalf("reserve of z: %d, %v", len(ts), err)
	}
	if c := rows(); c != 1 {
		t.Fatalf("%d bucket rows after every bucket but z's was full again; want 1 (z's)", c)
	}
	if _, err := n.SetPolicy(ctx, "q", task.Policy{PerKey: &task.PerKey{Rate: &task.Rate{Limit: 1, Per: time.Hour, Burst: 1}}}); err != nil {
		t.Fatal(err)
	}
	if c := rows(); c != 0 {
		t.Fatalf("%d bucket rows after a new per-key rate; want 0", c)
	}
	if _, _, err := n.Put(ctx, "q", task.PutRequest{ID: "y", Key: "y"}); err != nil {
		t.Fatal(err)
	}
	if ts, err := n.Reserve(ctx, "q", 1, 0); err != nil || len(ts) != 1 {
		t.Fatalf("reserve of y: %d, %v", len(ts), err)
	}
	if err := n.DeletePolicy(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	if c := rows(); c != 0 {
		t.Fatalf("%d bucket rows after the policy was deleted; want 0", c)
	}
}
