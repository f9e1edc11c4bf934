package cluster_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/task"
)

// TestLimits_Concurrency: with a concurrency limit of 3, workers on three
// nodes never hold more than 3 of the queue's tasks at once, and they
// get through every task (a waiting reserver is woken when a slot is
// freed, on whatever node).
func TestLimits_Concurrency(t *testing.T) {
	ctx := context.Background()
	url := server(t).CreateDatabase(t)
	nodes := []*testNode{startNode(t, url, "a"), startNode(t, url, "b"), startNode(t, url, "c")}
	const limit, total = 3, 45
	if _, err := svc(nodes[0]).SetPolicy(ctx, "q", task.Policy{Concurrency: limit}); err != nil {
		t.Fatal(err)
	}
	for _, r := range nodes[1].PutBatch(ctx, "q", make([]task.PutRequest, total)) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	var held, most, acked atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for _, n := range nodes {
		for range 3 {
			wg.Go(func() {
				for acked.Load() < total && time.Since(start) < 30*time.Second {
					ts, err := svc(n).Reserve(ctx, "q", 2, 500*time.Millisecond)
					if err != nil {
						t.Error(err)
						return
					}
					for _, tk := range ts {
						h := held.Add(1)
						for m := most.Load(); h > m && !most.CompareAndSwap(m, h); m = most.Load() {
						}
						time.Sleep(15 * time.Millisecond)
						held.Add(-1)
						if err := svc(n).Ack(ctx, "q", tk.ID, tk.Lease); err != nil {
							t.Error(err)
							return
						}
						acked.Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	if acked.Load() != total {
		t.Fatalf("acked %d of %d tasks in %v", acked.Load(), total, time.Since(start))
	}
	if m := most.Load(); m > limit || m < 2 {
		t.Fatalf("at most %d tasks held at once, want up to %d", m, limit)
	}
	t.Logf("%d tasks through a concurrency limit of %d on 3 nodes in %v (at most %d held)", total, limit, time.Since(start), most.Load())
}

// TestLimits_Rate: with a rate of 20 a second (burst 5), reservers on
// three nodes get no more than the bucket allows in any span of time, and
// about that many.
func TestLimits_Rate(t *testing.T) {
	ctx := context.Background()
	url := server(t).CreateDatabase(t)
	nodes := []*testNode{startNode(t, url, "a"), startNode(t, url, "b"), startNode(t, url, "c")}
	rate := task.Rate{Limit: 20, Per: time.Second, Burst: 5}
	if _, err := svc(nodes[0]).SetPolicy(ctx, "q", task.Policy{Rate: &rate}); err != nil {
		t.Fatal(err)
	}
	for _, r := range nodes[2].PutBatch(ctx, "q", make([]task.PutRequest, 200)) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	const span = 1500 * time.Millisecond
	var mu sync.Mutex
	var at []time.Duration
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
						// When the database reserved it, by its clock.
						at = append(at, tk.LeaseUntil.Add(-tk.TTR).Sub(start))
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	slices.Sort(at)
	// In any span [at[i], at[j]] of the database's clock the bucket hands
	// out at most its burst and what it refills meanwhile (the lease's
	// start is the clock the bucket was read with, to a microsecond).
	const slack = 0.01
	per := float64(rate.Per) / float64(rate.Limit)
	for i := range at {
		for j := i; j < len(at); j++ {
			allowed := float64(rate.Burst) + float64(at[j]-at[i])/per + slack
			if float64(j-i+1) > allowed {
				t.Fatalf("%d tasks handed out in %v (from %v), the bucket allows %.1f", j-i+1, at[j]-at[i], at[i], allowed)
			}
		}
	}
	if want := rate.Burst + 20; len(at) < want {
		t.Fatalf("%d tasks in %v, want at least %d", len(at), span, want)
	}
	t.Logf("%d tasks through a rate of %d/%v (burst %d) on 3 nodes in %v", len(at), rate.Limit, rate.Per, rate.Burst, span)
}

// TestLimits_Mixed: a reserve over a limited and an unlimited queue takes
// what the limit lets through and the rest from the other; ReserveJob is
// exempt from limits; a reserver blocked by a concurrency limit on one
// node is woken by an ack on another (whose notice of the limit came by
// notification), well before its fallback look.
func TestLimits_Mixed(t *testing.T) {
	ctx := context.Background()
	url := server(t).CreateDatabase(t)
	a := startNode(t, url, "a")
	b := startNode(t, url, "b")
	if _, err := svc(a).SetPolicy(ctx, "c", task.Policy{Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	var jobs []uint64
	for _, r := range a.PutBatch(ctx, "c", make([]task.PutRequest, 3)) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		jobs = append(jobs, r.Task.JobID)
	}
	for _, r := range a.PutBatch(ctx, "u", make([]task.PutRequest, 3)) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	ts, err := b.ReserveQueues(ctx, []string{"c", "u"}, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	byQueue := map[string]int{}
	var held task.Task
	for _, tk := range ts {
		byQueue[tk.Queue]++
		if tk.Queue == "c" {
			held = tk
		}
	}
	if byQueue["c"] != 1 || byQueue["u"] != 3 {
		t.Fatalf("reserve over c (concurrency 1) and u: %v", byQueue)
	}
	if ts, err := svc(a).Reserve(ctx, "c", 1, 0); err != nil || len(ts) != 0 {
		t.Fatalf("reserve of a full queue: %d tasks, %v", len(ts), err)
	}
	var other uint64
	for _, j := range jobs {
		if j != held.JobID {
			other = j
			break
		}
	}
	extra, err := a.ReserveJob(ctx, other)
	if err != nil {
		t.Fatalf("ReserveJob past the limit: %v", err)
	}
	if _, err := svc(a).Release(ctx, "c", extra.ID, extra.Lease, 0); err != nil {
		t.Fatal(err)
	}

	got := make(chan time.Time, 1)
	go func() {
		ts, err := svc(a).Reserve(ctx, "c", 1, 5*time.Second)
		if err != nil || len(ts) != 1 {
			t.Errorf("waiting reserve on a: %d tasks, %v", len(ts), err)
		}
		got <- time.Now()
	}()
	eventually(t, 2*time.Second, "a waiting", func() bool { return a.Waiting("c") == 1 })
	time.Sleep(100 * time.Millisecond)
	acked := time.Now()
	if err := svc(b).Ack(ctx, "c", held.ID, held.Lease); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-got:
		if d := at.Sub(acked); d > 600*time.Millisecond {
			t.Fatalf("the blocked reserver came %v after the ack on the other node", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the blocked reserver was not woken")
	}
}
