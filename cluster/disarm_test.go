package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/task"
)

// TestAck_DisarmsLeaseTimer: a reserve arms the lease's timer on the
// node that owns the task's partition, and the ack of the task on that
// node drops it, rather than leaving it to fire a TTR later into a flush
// that finds no task.
func TestAck_DisarmsLeaseTimer(t *testing.T) {
	ctx := context.Background()
	n := startNode(t, server(t).CreateDatabase(t), "a")
	if _, _, err := svc(n).Put(ctx, "q", task.PutRequest{ID: "x", TTR: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	ts, err := svc(n).Reserve(ctx, "q", 1, time.Second)
	if err != nil || len(ts) != 1 {
		t.Fatalf("Reserve = %v, %v", ts, err)
	}
	job := ts[0].JobID
	if !n.TimerArmed(job) {
		t.Fatalf("no timer armed for the lease of job %d", job)
	}
	if err := svc(n).Ack(ctx, "q", "x", ts[0].Lease); err != nil {
		t.Fatal(err)
	}
	if n.TimerArmed(job) {
		t.Fatalf("the lease's timer of job %d is still armed after its ack", job)
	}
}
