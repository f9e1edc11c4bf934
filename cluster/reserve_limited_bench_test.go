package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/internal/pgtest"
	"github.com/hourglass-go/hourglass/task"
)

// BenchmarkNode_ReserveLimited measures a reserve of one task of a
// limited queue (its statement, sqlReserveLimited) of 20,000 ready
// tasks over 100 keys, under a queue rate that never runs out (Rate)
// or a per-key concurrency of 1 (PerKey), each task acked once
// reserved. The queue is filled again, the timer stopped, when it runs
// low. One reserve and ack at a time.
func BenchmarkNode_ReserveLimited(b *testing.B) {
	srv := pgtest.Start(b, pgtest.Set("synchronous_commit", "off"))
	for _, c := range []struct {
		name   string
		policy task.Policy
	}{
		{"Rate", task.Policy{Rate: &task.Rate{Limit: 1_000_000_000, Per: time.Second, Burst: 1_000_000_000}}},
		{"PerKey", task.Policy{PerKey: &task.PerKey{Concurrency: 1}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			n := startNode(b, srv.CreateDatabase(b), "a")
			ctx := context.Background()
			s := svc(n)
			if _, err := s.SetPolicy(ctx, "q", c.policy); err != nil {
				b.Fatal(err)
			}
			const backlog = 20_000
			fill := backlogFiller(b, n, backlog, 100)
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
				ts, err := s.Reserve(ctx, "q", 1, 0)
				if err != nil || len(ts) != 1 {
					b.Fatalf("reserve: %d, %v", len(ts), err)
				}
				if err := s.Ack(ctx, "q", ts[0].ID, ts[0].Lease); err != nil {
					b.Fatal(err)
				}
				left--
			}
		})
	}
}
