package cluster_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/hourglass-go/hourglass/internal/pgtest"
	"github.com/hourglass-go/hourglass/task"
)

// BenchmarkNode_Reserve measures a reserve of one task (its statement,
// sqlReserve) from a queue of 20,000 ready tasks, one at a time: every
// task of the key "" (Keys_0: a queue that uses no keys), or spread over
// 100 keys. The tasks are put before the timer starts, and the queue is
// filled again, the timer stopped, when it runs low.
func BenchmarkNode_Reserve(b *testing.B) {
	srv := pgtest.Start(b, pgtest.Set("synchronous_commit", "off"))
	for _, keys := range []int{0, 100} {
		b.Run(fmt.Sprintf("Keys_%d", keys), func(b *testing.B) {
			n := startNode(b, srv.CreateDatabase(b), "a")
			ctx := context.Background()
			const backlog = 20_000
			fill := backlogFiller(b, n, backlog, keys)
			fill()
			left := backlog
			b.ResetTimer()
			for b.Loop() {
				if left == 0 {
					b.StopTimer()
					fill()
					left = backlog
					b.StartTimer()
				}
				ts, err := svc(n).Reserve(ctx, "q", 1, 0)
				if err != nil || len(ts) != 1 {
					b.Fatalf("reserve: %d, %v", len(ts), err)
				}
				left--
			}
		})
	}
}

// backlogFiller returns a function that puts backlog more ready tasks
// into the queue "q" of n, by batches of task.MaxBatch, with ids counting
// on from the last call's, priorities 0 to 2 in turn and, with keys > 0,
// keys k0 to k(keys-1) in turn (else none).
func backlogFiller(b *testing.B, n *testNode, backlog, keys int) func() {
	put := 0
	return func() {
		for k := 0; k < backlog; k += task.MaxBatch {
			reqs := make([]task.PutRequest, task.MaxBatch)
			for i := range reqs {
				put++
				reqs[i].ID = fmt.Sprint(put)
				reqs[i].Priority = uint32(put % 3)
				if keys > 0 {
					reqs[i].Key = fmt.Sprint("k", put%keys)
				}
			}
			for _, r := range n.PutBatch(context.Background(), "q", reqs) {
				if r.Err != nil {
					b.Fatal(r.Err)
				}
			}
		}
	}
}
