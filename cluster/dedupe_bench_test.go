package cluster_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/internal/pgtest"
	"github.com/hourglass-go/hourglass/task"
)

// BenchmarkNode_Put_Dedupe measures one put at a time (its latency) of a
// new id into a queue without a dedupe window (None) and with one
// (Window), and a put of an id that the window answers (Deduped): what
// the window's statements add (sqlInsert's filter, sqlUndoDeduped in the
// same round trip, the record's read). The server commits without
// waiting for the WAL flush, as in BenchmarkNode_Ack.
func BenchmarkNode_Put_Dedupe(b *testing.B) {
	srv := pgtest.Start(b, pgtest.Set("max_connections", "400"), pgtest.Set("synchronous_commit", "off"))
	for _, c := range []struct {
		name   string
		window time.Duration
		again  bool
	}{{"None", 0, false}, {"Window", time.Hour, false}, {"Deduped", time.Hour, true}} {
		b.Run(c.name, func(b *testing.B) {
			n := startNode(b, srv.CreateDatabase(b), "a")
			ctx := context.Background()
			if _, err := svc(n).SetPolicy(ctx, "q", task.Policy{Dedupe: c.window, MaxAttempts: 5}); err != nil {
				b.Fatal(err)
			}
			if c.again {
				if _, _, err := svc(n).Put(ctx, "q", task.PutRequest{ID: "x"}); err != nil {
					b.Fatal(err)
				}
				if err := svc(n).Delete(ctx, "q", "x"); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := range b.N {
				id := "x"
				if !c.again {
					id = strconv.Itoa(i)
				}
				t, _, err := svc(n).Put(ctx, "q", task.PutRequest{ID: id})
				if err != nil || c.again != (t.State == task.Done) {
					b.Fatalf("put %s: %+v, %v", id, t, err)
				}
			}
		})
	}
}
