package cluster_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/cluster"
	"github.com/hourglass-go/hourglass/internal/pgtest"
	"github.com/hourglass-go/hourglass/task"
)

// BenchmarkNode_Ack measures the ack, the hottest write, with the history
// kept (its statement inserts the attempt and the finished task) and
// with none kept (the same statement, inserting nothing): one ack at a
// time (Serial: its latency), and 16 at once (Parallel: they share
// statements, see group.go). The tasks are put and reserved before the
// timer starts. The server commits without waiting for the WAL flush:
// an ack commits once with the history or without, and what the history
// adds is the statement's work, which a shared disk's fsync (milliseconds
// each) would drown.
func BenchmarkNode_Ack(b *testing.B) {
	srv := pgtest.Start(b, pgtest.Set("max_connections", "400"), pgtest.Set("synchronous_commit", "off"))
	for _, keep := range []struct {
		name    string
		history time.Duration
	}{{"Kept", 0}, {"None", -1}} {
		for _, shape := range []struct {
			name    string
			callers int
		}{{"Serial", 1}, {"Parallel", 16}} {
			b.Run(keep.name+"_"+shape.name, func(b *testing.B) {
				n := startNode(b, srv.CreateDatabase(b), "a", func(o *cluster.Options) { o.History = keep.history })
				ctx := context.Background()
				var held []task.Task
				for len(held) < b.N {
					k := min(b.N-len(held), task.MaxBatch)
					reqs := make([]task.PutRequest, k)
					for i := range reqs {
						reqs[i].ID = strconv.Itoa(len(held) + i)
					}
					for _, r := range n.PutBatch(ctx, "q", reqs) {
						if r.Err != nil {
							b.Fatal(r.Err)
						}
					}
					ts, err := svc(n).Reserve(ctx, "q", k, time.Second)
					if err != nil || len(ts) != k {
						b.Fatalf("reserve: %d, %v", len(ts), err)
					}
					held = append(held, ts...)
				}
				b.ResetTimer()
				var wg sync.WaitGroup
				for c := range shape.callers {
					wg.Go(func() {
						for i := c; i < len(held); i += shape.callers {
							if err := svc(n).Ack(ctx, "q", held[i].ID, held[i].Lease); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
			})
		}
	}
}
