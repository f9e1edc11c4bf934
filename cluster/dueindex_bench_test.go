package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/internal/pgtest"
	"github.com/hourglass-go/hourglass/task"
)

// BenchmarkNode_PutBatch_DueIndex measures what the index of migration
// 015, hourglass_tasks_queue_due, costs the writes: batches of 100
// delayed puts, then each batch's tasks retried (made ready now, their
// due time moved) by job id, with the index (With) and with it dropped
// (Without), each on a database of its own. The server commits without
// waiting for the WAL flush, as in BenchmarkNode_Ack, so that the rows'
// and indexes' writes show rather than the fsync.
func BenchmarkNode_PutBatch_DueIndex(b *testing.B) {
	srv := pgtest.Start(b, pgtest.Set("max_connections", "400"), pgtest.Set("synchronous_commit", "off"))
	for _, c := range []struct {
		name string
		drop bool
	}{{"With", false}, {"Without", true}} {
		b.Run(c.name, func(b *testing.B) {
			n := startNode(b, srv.CreateDatabase(b), "a")
			ctx := context.Background()
			if c.drop {
				if _, err := n.pool.Exec(ctx, "DROP INDEX hourglass_tasks_queue_due"); err != nil {
					b.Fatal(err)
				}
			}
			rs := make([]task.PutRequest, 100)
			for i := range rs {
				rs[i] = task.PutRequest{Delay: time.Hour}
			}
			b.ResetTimer()
			for b.Loop() {
				for _, r := range n.PutBatch(ctx, "q", rs) {
					if r.Err != nil {
						b.Fatal(r.Err)
					}
					if err := svc(n).KickJob(ctx, r.Task.JobID); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rs)), "ns/task")
		})
	}
}
