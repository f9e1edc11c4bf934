package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/task"
)

// TestReports checks that any node answers with the cluster's numbers:
// what one node served is counted in the queues' counters and the
// lateness that another node reports, within about a second (the
// reports' interval).
func TestReports(t *testing.T) {
	t.Parallel()
	url := server(t).CreateDatabase(t)
	a := startNode(t, url, "a")
	b := startNode(t, url, "b")
	ctx := context.Background()
	for _, id := range []string{"x", "y", "z"} {
		if _, _, err := svc(b).Put(ctx, "r", task.PutRequest{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := svc(b).Reserve(ctx, "r", 2, time.Second)
	if err != nil || len(got) != 2 {
		t.Fatalf("reserve: %v, %v", got, err)
	}
	if err := svc(b).Ack(ctx, "r", got[0].ID, got[0].Lease); err != nil {
		t.Fatal(err)
	}
	var q task.QueueStats
	eventually(t, 5*time.Second, "a counts what b served", func() bool {
		qs, err := a.Queues(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range qs {
			if s.Name == "r" {
				q = s
			}
		}
		return q.Puts == 3 && q.Deliveries == 2 && q.Acks == 1
	})
	if q.Ready != 1 || q.Reserved != 1 {
		t.Errorf("queue r on a: %+v; want 1 ready, 1 reserved", q)
	}
	ws, err := a.Lateness(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, w := range ws {
		n += w.Deliveries
	}
	if n != 2 {
		t.Errorf("lateness on a counts %d deliveries, want b's 2: %+v", n, ws)
	}
}
