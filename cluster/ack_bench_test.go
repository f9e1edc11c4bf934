package cluster_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/hourglass-go/hourglass/internal/pgtest"
	"github.com/hourglass-go/hourglass/task"
)

// BenchmarkNode_AckMany_64 measures an ack of 64 reserved tasks in one
// call, as a worker's batched acks (POST /v1/acks) make it, with the
// history kept: its statement and the node's work around it (allocs/op
// is the node's, and its background work's, per 64 tasks). The tasks
// are put and reserved with the timer stopped.
func BenchmarkNode_AckMany_64(b *testing.B) {
	srv := pgtest.Start(b, pgtest.Set("synchronous_commit", "off"))
	n := startNode(b, srv.CreateDatabase(b), "a")
	ctx := context.Background()
	reqs := make([]task.PutRequest, 64)
	for i := range reqs {
		reqs[i].Payload = []byte(`"` + string(bytes.Repeat([]byte("x"), 198)) + `"`)
	}
	acks := make([]task.Ack, 64)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		for _, r := range n.PutBatch(ctx, "q", reqs) {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
		ts, err := n.ReserveQueues(ctx, []string{"q"}, 64, 0)
		if err != nil || len(ts) != 64 {
			b.Fatalf("reserve: %d, %v", len(ts), err)
		}
		for i, t := range ts {
			acks[i] = task.Ack{Queue: "q", ID: t.ID, Lease: t.Lease}
		}
		b.StartTimer()
		errs, err := n.AckMany(ctx, acks)
		if err != nil {
			b.Fatal(err)
		}
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
}
