package servicetest

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// putKeyed puts n tasks of key into queue, ids key+"0" ... in put order.
func putKeyed(t *testing.T, b service.Service, queue, key string, n int, ttr time.Duration) {
	t.Helper()
	for i := range n {
		putTask(t, b, queue, task.PutRequest{ID: fmt.Sprintf("%s%d", key, i), Key: key, TTR: ttr})
	}
}

// byKey returns the tasks of ts by key.
func byKey(ts []task.Task) map[string][]task.Task {
	m := map[string][]task.Task{}
	for _, tk := range ts {
		m[tk.Key] = append(m[tk.Key], tk)
	}
	return m
}

// reserveKeys reserves up to max tasks of queue on b, waiting wait for
// the first, and fails t unless it got want tasks of each key.
func reserveKeys(t *testing.T, b service.Service, queue string, max int, wait time.Duration, want map[string]int) []task.Task {
	t.Helper()
	ts, err := b.Reserve(context.Background(), queue, max, wait)
	must(t, "reserve "+queue, err)
	got := map[string]int{}
	for _, tk := range ts {
		got[tk.Key]++
	}
	if !reflect.DeepEqual(got, want) {
		ids := make([]string, len(ts))
		for i, tk := range ts {
			ids[i] = tk.ID
		}
		t.Fatalf("reserve %d of %s took %v by key (%v); want %v", max, queue, got, ids, want)
	}
	return ts
}

// perKeyConcurrency: with per_key.concurrency 2, a reserve takes at
// most 2 tasks of each key and goes on to the next key's (key A with 10
// ready and B with 10: 2 of each), and each way a reservation ends (ack,
// nack, release, delete, cancel, a lease running out) lets one more of
// its key through. Tasks without a key are of the key "". The queue-wide
// concurrency holds beside it.
func perKeyConcurrency(t *testing.T, b service.Service) {
	ctx := context.Background()
	const q = "perkey"
	p := setPolicy(t, b, q, task.Policy{PerKey: &task.PerKey{Concurrency: 2}})
	if got, err := b.Policy(ctx, q); err != nil || !reflect.DeepEqual(got, p) || got.PerKey == nil || got.PerKey.Concurrency != 2 {
		t.Fatalf("Policy = %s, %v; want per_key.concurrency 2", showPolicy(got), err)
	}
	putKeyed(t, b, q, "A", 10, 0)
	putKeyed(t, b, q, "B", 10, 0)
	ts := reserveKeys(t, b, q, 10, 0, map[string]int{"A": 2, "B": 2})
	reserveKeys(t, b, q, 10, 0, map[string]int{})
	held := byKey(ts)

	// Each end of a reservation frees one place of its key.
	a0, a1, b0, b1 := held["A"][0], held["A"][1], held["B"][0], held["B"][1]
	must(t, "ack", b.Ack(ctx, q, a0.ID, a0.Lease))
	a2 := reserveKeys(t, b, q, 10, 0, map[string]int{"A": 1})[0]
	_, err := b.Nack(ctx, q, a1.ID, a1.Lease, time.Hour, "later")
	must(t, "nack", err)
	a3 := reserveKeys(t, b, q, 10, 0, map[string]int{"A": 1})[0]
	_, err = b.Release(ctx, q, b0.ID, b0.Lease, time.Hour)
	must(t, "release", err)
	b2 := reserveKeys(t, b, q, 10, 0, map[string]int{"B": 1})[0]
	must(t, "delete", b.Delete(ctx, q, b1.ID))
	reserveKeys(t, b, q, 10, 0, map[string]int{"B": 1})
	must(t, "cancel", b.Cancel(ctx, q, b2.ID))
	reserveKeys(t, b, q, 10, 0, map[string]int{"B": 1})
	must(t, "ack", b.Ack(ctx, q, a2.ID, a2.Lease))
	must(t, "ack", b.Ack(ctx, q, a3.ID, a3.Lease))
	as := reserveKeys(t, b, q, 10, 0, map[string]int{"A": 2})

	// A reserver waiting while every key is full is woken by an ack.
	got := waitingReserve(t, b, q, 10, 2*lateSlack, 50*time.Millisecond, "a reserve with every key at its limit got %d tasks")
	must(t, "ack", b.Ack(ctx, q, as[0].ID, as[0].Lease))
	if ts := <-got; len(ts) != 1 || ts[0].Key != "A" {
		t.Fatalf("the waiting reserver got %v after an ack; want 1 task of A", ts)
	}

	// A lease that runs out frees its place: key C's 2 tasks leased for
	// ttr, and its third waits for one of them. The leases start after
	// start, so a task of C handed out before start+ttr broke the limit
	// (a bound below only, which a loaded machine cannot break).
	const ttr = 300 * time.Millisecond
	putKeyed(t, b, q, "C", 3, ttr)
	start := time.Now()
	reserveKeys(t, b, q, 10, 0, map[string]int{"C": 2})
	again := reserveKeys(t, b, q, 1, 10*time.Second, map[string]int{"C": 1})[0]
	if since := time.Since(start); since < ttr-50*time.Millisecond {
		t.Fatalf("a third task of C (%s) came %v after its key was full, before a lease of %v could run out", again.ID, since, ttr)
	}

	// The key "": tasks put without one.
	const plain = "perkey-plain"
	setPolicy(t, b, plain, task.Policy{PerKey: &task.PerKey{Concurrency: 3}})
	putKeyed(t, b, plain, "", 5, 0)
	reserveKeys(t, b, plain, 10, 0, map[string]int{"": 3})

	// Beside the queue-wide concurrency: both hold.
	const both = "perkey-both"
	setPolicy(t, b, both, task.Policy{Concurrency: 3, PerKey: &task.PerKey{Concurrency: 2}})
	putKeyed(t, b, both, "A", 5, 0)
	putKeyed(t, b, both, "B", 5, 0)
	reserveKeys(t, b, both, 10, 0, map[string]int{"A": 2, "B": 1})
	// Lifting the per-key limit lets A through, up to the queue's.
	setPolicy(t, b, both, task.Policy{Concurrency: 5})
	reserveKeys(t, b, both, 10, 0, map[string]int{"A": 1, "B": 1})
}

// perKeyAcross: per_key.concurrency holds over reservers of both
// handles, and an ack through one wakes a reserver waiting on the other.
func perKeyAcross(t *testing.T, a, b service.Service) {
	ctx := context.Background()
	const q = "across-perkey"
	setPolicy(t, a, q, task.Policy{PerKey: &task.PerKey{Concurrency: 2}})
	putKeyed(t, a, q, "A", 10, 0)
	putKeyed(t, b, q, "B", 10, 0)
	ts := reserveKeys(t, a, q, 10, 0, map[string]int{"A": 2, "B": 2})
	reserveKeys(t, b, q, 10, 0, map[string]int{})
	a0 := byKey(ts)["A"][0]
	got := waitingReserve(t, a, q, 10, 2*lateSlack, 50*time.Millisecond, "a reserve at the per-key limit got %d tasks")
	must(t, "ack through the other", b.Ack(ctx, q, a0.ID, a0.Lease))
	if ts := <-got; len(ts) != 1 || ts[0].Key != "A" {
		t.Fatalf("a reserver waiting on one got %v after an ack through the other; want 1 task of A", ts)
	}
	reserveKeys(t, b, q, 10, 0, map[string]int{})
}
