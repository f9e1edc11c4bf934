package cluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hourglass-go/hourglass/task"
)

// TestPolicy_Metrics: retries (a nack, and a lease run out in a queue
// without a policy, which the flush settles), dead-lettered tasks and
// throttled reserves are counted per queue, under the embedded engine's
// names.
func TestPolicy_Metrics(t *testing.T) {
	ctx := context.Background()
	n, reg := startMetered(t, server(t).CreateDatabase(t), "a")
	for q, p := range map[string]task.Policy{
		"q": {DeadLetter: "dlq", Concurrency: 1, Retry: &task.Retry{}},
		"r": {Rate: &task.Rate{Limit: 1, Per: time.Hour}},
	} {
		if _, err := svc(n).SetPolicy(ctx, q, p); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []struct {
		q string
		r task.PutRequest
	}{
		{"q", task.PutRequest{ID: "a", MaxAttempts: 2}},
		{"q", task.PutRequest{ID: "b", Priority: 9}},
		{"r", task.PutRequest{ID: "a"}},
		{"r", task.PutRequest{ID: "b"}},
		{"e", task.PutRequest{ID: "a", TTR: 100 * time.Millisecond}},
	} {
		if _, _, err := svc(n).Put(ctx, p.q, p.r); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		r := reserveOne(t, n, "q", time.Second)
		if ts, err := svc(n).Reserve(ctx, "q", 1, 0); err != nil || len(ts) != 0 {
			t.Fatalf("over the concurrency limit: %d tasks, %v", len(ts), err)
		}
		if _, err := svc(n).Nack(ctx, "q", "a", r.Lease, task.RetryDelay, ""); err != nil {
			t.Fatal(err)
		}
	}
	reserveOne(t, n, "r", time.Second)
	if ts, err := svc(n).Reserve(ctx, "r", 1, 0); err != nil || len(ts) != 0 {
		t.Fatalf("over the rate limit: %d tasks, %v", len(ts), err)
	}
	reserveOne(t, n, "e", time.Second)
	want := map[string]float64{
		`hourglass_task_retries_total{queue="q"}`:                            1,
		`hourglass_task_retries_total{queue="e"}`:                            1,
		`hourglass_tasks_dead_lettered_total{queue="q"}`:                     1,
		`hourglass_reserves_throttled_total{queue="q",reason="concurrency"}`: 2,
		`hourglass_reserves_throttled_total{queue="r",reason="rate"}`:        1,
	}
	var got map[string]float64
	eventually(t, 5*time.Second, "the lease of e/a run out and counted", func() bool {
		got = counters(t, reg)
		return got[`hourglass_task_retries_total{queue="e"}`] >= 1
	})
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

// counters gathers reg's counters by name and labels.
func counters(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName() + "{"
			for i, l := range m.GetLabel() {
				if i > 0 {
					name += ","
				}
				name += fmt.Sprintf("%s=%q", l.GetName(), l.GetValue())
			}
			if m.GetCounter() != nil {
				got[name+"}"] = m.GetCounter().GetValue()
			}
		}
	}
	return got
}
