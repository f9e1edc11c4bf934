package cluster_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/hourglass-go/hourglass/internal/pgtest"
	"github.com/hourglass-go/hourglass/task"
)

// BenchmarkNode_Reserve_Max64 measures a reserve of 64 tasks of 200-byte
// payloads at a time from a queue of ready tasks, as benchmarks/river's
// worker makes them: the statement and the node's reading of its rows
// (allocs/op is the node's, and its background work's, per 64 tasks).
// The queue is filled again, the timer stopped, when it runs low.
func BenchmarkNode_Reserve_Max64(b *testing.B) {
	srv := pgtest.Start(b, pgtest.Set("synchronous_commit", "off"))
	n := startNode(b, srv.CreateDatabase(b), "a")
	ctx := context.Background()
	payload := []byte(`"` + string(bytes.Repeat([]byte("x"), 198)) + `"`)
	const backlog = 20_000
	fill := func() {
		for k := 0; k < backlog; k += task.MaxBatch {
			reqs := make([]task.PutRequest, task.MaxBatch)
			for i := range reqs {
				reqs[i].Payload = payload
			}
			for _, r := range n.PutBatch(ctx, "q", reqs) {
				if r.Err != nil {
					b.Fatal(r.Err)
				}
			}
		}
	}
	fill()
	left := backlog
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if left < 64 {
			b.StopTimer()
			fill()
			left += backlog
			b.StartTimer()
		}
		ts, err := n.ReserveQueues(ctx, []string{"q"}, 64, 0)
		if err != nil || len(ts) != 64 {
			b.Fatalf("reserve: %d, %v", len(ts), err)
		}
		left -= 64
	}
}
