package cluster_test

import (
	"context"
	"testing"

	"github.com/hourglass-go/hourglass/cluster"
	"github.com/hourglass-go/hourglass/task"
)

// TestAck_DedupeLookupOnce: an ack of many tasks of a queue without a
// dedupe window reads the queues' table once, whatever the tasks, not
// once per task acked (the join of sqlDedupeHead looked up the queue's
// row for each: 64 index scans for an ack of 64).
func TestAck_DedupeLookupOnce(t *testing.T) {
	ctx := context.Background()
	n := startNode(t, server(t).CreateDatabase(t), "a")
	if _, err := svc(n).SetPolicy(ctx, "q", task.Policy{MaxAttempts: 3}); err != nil {
		t.Fatal(err) // the queue has a row in hourglass_queues, as with any policy
	}
	for _, r := range n.PutBatch(ctx, "q", make([]task.PutRequest, 64)) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	got, err := n.ReserveQueues(ctx, []string{"q"}, 64, 0)
	if err != nil || len(got) != 64 {
		t.Fatalf("reserved %d: %v", len(got), err)
	}
	var queues, ids, leases, outcomes []string
	var statuses []int32
	for _, tk := range got {
		queues, ids, leases = append(queues, "q"), append(ids, tk.ID), append(leases, tk.Lease)
		outcomes, statuses = append(outcomes, task.AttemptAcked), append(statuses, 0)
	}
	tx, err := n.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var plan []struct{ Plan planNode }
	if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+cluster.SQLAck,
		queues, ids, leases, true, "a", outcomes, statuses).Scan(&plan); err != nil {
		t.Fatal(err)
	}
	acked, loops := 0, 0
	var walk func(p planNode)
	walk = func(p planNode) {
		if p.Relation == "hourglass_tasks" && p.Operation == "Delete" {
			acked += p.Rows
		}
		if p.Relation == "hourglass_queues" {
			loops += p.Loops
		}
		for _, c := range p.Plans {
			walk(c)
		}
	}
	walk(plan[0].Plan)
	if acked != 64 {
		t.Fatalf("the ack deleted %d tasks, want 64", acked)
	}
	if loops > 1 {
		t.Errorf("the ack of 64 tasks read hourglass_queues %d times, want at most 1", loops)
	}
}

// planNode is a node of EXPLAIN (ANALYZE, FORMAT JSON)'s plan.
type planNode struct {
	Relation  string     `json:"Relation Name"`
	Operation string     `json:"Operation"`
	Rows      int        `json:"Actual Rows"`
	Loops     int        `json:"Actual Loops"`
	Plans     []planNode `json:"Plans"`
}
