package servicetest

import (
	"context"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// Trace contexts of the suite: W3C's example, and one with a later
// version's extra field.
var (
	traceA   = task.Trace{Parent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", State: "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"}
	traceB   = task.Trace{Parent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"}
	traceBad = task.Trace{Parent: "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01", State: "a=1"}
)

// trace: a task keeps the trace context it was put with, single or in a
// batch, and hands it on in every answer that carries the task: the put,
// a get, a reserve (at once, and of a delayed task handed to a waiting
// reserver), a nack and the reserve of the retry. A malformed one is
// dropped, and the put succeeds; a valid parent with a malformed state
// keeps the parent alone.
func trace(t *testing.T, b service.Service) {
	ctx := context.Background()
	want := func(what string, got task.Task, tr task.Trace) {
		t.Helper()
		if got.Trace != tr {
			t.Fatalf("%s: task %s has trace %+v, want %+v", what, got.ID, got.Trace, tr)
		}
	}
	a, _, err := b.Put(ctx, "tr", task.PutRequest{ID: "a", Trace: traceA})
	must(t, "put a", err)
	want("put a", a, traceA)
	res := b.PutBatch(ctx, "tr", []task.PutRequest{
		{ID: "b", Trace: traceB, Priority: 1},
		{ID: "bad", Trace: traceBad, Priority: 2},
		{ID: "half", Trace: task.Trace{Parent: traceB.Parent, State: "Bad=1"}, Priority: 3},
		{ID: "none", Priority: 4},
	})
	for i, tr := range []task.Trace{traceB, {}, {Parent: traceB.Parent}, {}} {
		must(t, "batch put", res[i].Err)
		want("batch put", res[i].Task, tr)
	}
	got, err := b.Get("tr", "a")
	must(t, "get a", err)
	want("get a", got, traceA)

	ts, err := b.Reserve(ctx, "tr", 5, 0)
	must(t, "reserve", err)
	byID := map[string]task.Trace{"a": traceA, "b": traceB, "bad": {}, "half": {Parent: traceB.Parent}, "none": {}}
	if len(ts) != len(byID) {
		t.Fatalf("reserve: %d tasks, want %d", len(ts), len(byID))
	}
	for _, r := range ts {
		want("reserve", r, byID[r.ID])
	}
	for _, r := range ts {
		if r.ID == "b" {
			n, err := b.Nack(ctx, "tr", r.ID, r.Lease, 0, "boom")
			must(t, "nack b", err)
			want("nack b", n, traceB)
			continue
		}
		must(t, "ack "+r.ID, b.Ack(ctx, "tr", r.ID, r.Lease))
	}
	retry := ReserveOne(t, b, "tr", 5*time.Second)
	if retry.ID != "b" || retry.Attempts != 2 {
		t.Fatalf("the retry is %s, attempt %d; want b, attempt 2", retry.ID, retry.Attempts)
	}
	want("reserve of the retry", retry, traceB)
	must(t, "ack b", b.Ack(ctx, "tr", retry.ID, retry.Lease))

	// A delayed task, handed to a reserver waiting when it falls due.
	_, _, err = b.Put(ctx, "tr", task.PutRequest{ID: "later", Delay: 200 * time.Millisecond, Trace: traceA})
	must(t, "put later", err)
	later := ReserveOne(t, b, "tr", 10*time.Second)
	want("reserve of a delayed task", later, traceA)
	must(t, "ack later", b.Ack(ctx, "tr", later.ID, later.Lease))
	_, _, err = b.Put(ctx, "tr2", task.PutRequest{ID: "multi", Trace: traceB})
	must(t, "put multi", err)
	many, err := b.ReserveQueues(ctx, []string{"tr", "tr2"}, 1, 0)
	must(t, "reserve queues", err)
	if len(many) != 1 {
		t.Fatalf("reserve queues: %d tasks, want 1", len(many))
	}
	want("reserve of several queues", many[0], traceB)
}
