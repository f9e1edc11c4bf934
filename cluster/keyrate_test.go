package cluster_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
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
	if _, err := svc(n).SetPolicy(ctx, "q", task.Policy{PerKey: &task.PerKey{Rate: &task.Rate{Limit: 1, Per: every, Burst: 1}}}); err != nil {
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
		ts, err := svc(n).Reserve(ctx, "q", keys, time.Second)
		if err != nil || len(ts) == 0 {
			t.Fatalf("reserve: %d tasks, %v, after %d", len(ts), err, got)
		}
		got += len(ts)
	}
	if c := rows(); c < keys/2 || c > keys {
		t.Fatalf("%d bucket rows after a task of each of %d keys within %v", c, keys, every)
	}
	time.Sleep(2 * every)
	if _, _, err := svc(n).Put(ctx, "q", task.PutRequest{ID: "z", Key: "z"}); err != nil {
		t.Fatal(err)
	}
	if ts, err := svc(n).Reserve(ctx, "q", keys, 0); err != nil || len(ts) != 1 {
		t.Fatalf("reserve of z: %d, %v", len(ts), err)
	}
	if c := rows(); c != 1 {
		t.Fatalf("%d bucket rows after every bucket but z's was full again; want 1 (z's)", c)
	}
	if _, err := svc(n).SetPolicy(ctx, "q", task.Policy{PerKey: &task.PerKey{Rate: &task.Rate{Limit: 1, Per: time.Hour, Burst: 1}}}); err != nil {
		t.Fatal(err)
	}
	if c := rows(); c != 0 {
		t.Fatalf("%d bucket rows after a new per-key rate; want 0", c)
	}
	if _, _, err := svc(n).Put(ctx, "q", task.PutRequest{ID: "y", Key: "y"}); err != nil {
		t.Fatal(err)
	}
	if ts, err := svc(n).Reserve(ctx, "q", 1, 0); err != nil || len(ts) != 1 {
		t.Fatalf("reserve of y: %d, %v", len(ts), err)
	}
	if err := svc(n).DeletePolicy(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	if c := rows(); c != 0 {
		t.Fatalf("%d bucket rows after the policy was deleted; want 0", c)
	}
}

// TestLimits_KeyRate: a per-key rate holds across three nodes: keys A, B
// and C of 100 ready tasks each under a rate of 10/s per key (burst 3),
// six reservers on three nodes for 1.5 s; in any span of the database's
// clock each key is handed out at most its burst and what its bucket
// refills meanwhile, and every key gets through more than its burst.
func TestLimits_KeyRate(t *testing.T) {
	ctx := context.Background()
	url := server(t).CreateDatabase(t)
	nodes := []*testNode{startNode(t, url, "a"), startNode(t, url, "b"), startNode(t, url, "c")}
	rate := task.Rate{Limit: 10, Per: time.Second, Burst: 3}
	if _, err := svc(nodes[0]).SetPolicy(ctx, "q", task.Policy{PerKey: &task.PerKey{Rate: &rate}}); err != nil {
		t.Fatal(err)
	}
	keys := []string{"A", "B", "C"}
	var reqs []task.PutRequest
	for i := range 100 {
		for _, k := range keys {
			reqs = append(reqs, task.PutRequest{ID: fmt.Sprint(k, i), Key: k})
		}
	}
	for _, r := range nodes[2].PutBatch(ctx, "q", reqs) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	const span = 1500 * time.Millisecond
	var mu sync.Mutex
	at := map[string][]time.Duration{}
	var wg sync.WaitGroup
	start := time.Now()
	for _, n := range nodes {
		for range 2 {
			wg.Go(func() {
				for time.Since(start) < span {
					ts, err := svc(n).Reserve(ctx, "q", 4, 300*time.Millisecond)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					for _, tk := range ts {
						at[tk.Key] = append(at[tk.Key], tk.LeaseUntil.Add(-tk.TTR).Sub(start))
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	const slack = 0.01
	per := float64(rate.Per) / float64(rate.Limit)
	for _, k := range keys {
		got := at[k]
		slices.Sort(got)
		for i := range got {
			for j := i; j < len(got); j++ {
				allowed := float64(rate.Burst) + float64(got[j]-got[i])/per + slack
				if float64(j-i+1) > allowed {
					t.Fatalf("key %s: %d tasks handed out in %v (from %v), its bucket allows %.1f", k, j-i+1, got[j]-got[i], got[i], allowed)
				}
			}
		}
		if want := rate.Burst + 5; len(got) < want {
			t.Fatalf("key %s: %d tasks in %v, want at least %d", k, len(got), span, want)
		}
		t.Logf("key %s: %d tasks through a rate of %d/%v (burst %d) on 3 nodes in %v", k, len(got), rate.Limit, rate.Per, rate.Burst, span)
	}
}
