package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hourglass-go/hourglass/task"
)

// flushStatements reads hourglass_cluster_flush_statements_total from
// reg: the due and whole statements run so far.
func flushStatements(t *testing.T, reg *prometheus.Registry) (due, whole float64) {
	t.Helper()
	c := counters(t, reg)
	return c[`hourglass_cluster_flush_statements_total{statement="due"}`],
		c[`hourglass_cluster_flush_statements_total{statement="whole"}`]
}

// TestFlush_LeaseWithDue: a flush that carries a lease ending and a
// delayed task falling due runs the common statement, which hands the
// delayed task to the waiter and leaves the lease to the whole
// statement, with what the waiter still takes (nothing): the task whose
// lease ran out is ready again, not handed and given back.
func TestFlush_LeaseWithDue(t *testing.T) {
	ctx := context.Background()
	n, reg := startMetered(t, server(t).CreateDatabase(t), "a")
	if r := n.PutBatch(ctx, "q", []task.PutRequest{{ID: "leased", TTR: 3 * time.Second}}); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	ts, err := svc(n).Reserve(ctx, "q", 1, 0)
	if err != nil || len(ts) != 1 {
		t.Fatalf("Reserve = %v, %v", ts, err)
	}
	if r := n.PutBatch(ctx, "q", []task.PutRequest{{ID: "delayed", At: ts[0].LeaseUntil}}); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	got := reserveAsync(ctx, n, "q", 1, 10*time.Second)
	eventually(t, 5*time.Second, "the reserver waiting", func() bool { return n.Waiting("q") == 1 })
	// One flush carries both: the flusher waits until both have fired.
	n.hooks.Pause()
	time.Sleep(time.Until(ts[0].LeaseUntil) + 300*time.Millisecond)
	n.hooks.Resume()
	r := <-got
	if r.err != nil || len(r.ts) != 1 || r.ts[0].ID != "delayed" {
		t.Fatalf("Reserve = %+v, %v; want the delayed task handed", r.ts, r.err)
	}
	eventually(t, 5*time.Second, "the task whose lease ran out ready", func() bool {
		tk, err := svc(n).Get("q", "leased")
		return err == nil && tk.State == task.Ready
	})
	back, err := svc(n).Reserve(ctx, "q", 1, 0)
	if err != nil || len(back) != 1 || back[0].ID != "leased" || back[0].Timeouts != 1 {
		t.Fatalf("Reserve = %+v, %v; want the task whose lease ran out, one timeout", back, err)
	}
	if g := counter(t, reg, "hourglass_cluster_flush_given_back_total"); g != 0 {
		t.Errorf("given_back_total = %v: the whole statement handed a task the waiter no longer took", g)
	}
	if due, whole := flushStatements(t, reg); due == 0 || whole == 0 {
		t.Errorf("flush statements: %v due, %v whole; want both", due, whole)
	}
}
