package servicetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// fairnessBacklog is the ready tasks of the big key in fairness.
const fairnessBacklog = 100_000

// fairness: with key A's backlog of fairnessBacklog ready tasks in a
// queue and keys B to K one ready task each, put after it, every one of
// B to K is handed out within the first 20 reserves of one task (issue
// 42: a key waits for at most one task of each other key); within a key
// tasks come in priority order, and a task of a higher priority goes
// first whatever its key.
func fairness(t *testing.T, b service.Service) {
	ctx := context.Background()
	rs := make([]task.PutRequest, 0, task.MaxBatch)
	flush := func() {
		t.Helper()
		for i, r := range b.PutBatch(ctx, "fair", rs) {
			if r.Err != nil {
				t.Fatalf("put %s: %v", rs[i].ID, r.Err)
			}
		}
		rs = rs[:0]
	}
	for i := range fairnessBacklog {
		rs = append(rs, task.PutRequest{ID: fmt.Sprintf("a%d", i), Key: "A", Priority: 10})
		if len(rs) == cap(rs) {
			flush()
		}
	}
	flush()
	small := map[string]bool{}
	for c := 'B'; c <= 'K'; c++ {
		k := string(c)
		rs = append(rs, task.PutRequest{ID: "small-" + k, Key: k, Priority: 10})
		small["small-"+k] = true
	}
	rs = append(rs, task.PutRequest{ID: "urgent", Key: "A", Priority: 1})
	flush()

	var order []string
	for i := 0; i < 20 && len(small) > 0; i++ {
		ts, err := b.Reserve(ctx, "fair", 1, 0)
		if err != nil || len(ts) != 1 {
			t.Fatalf("reserve %d: %d tasks, %v", i+1, len(ts), err)
		}
		tk := ts[0]
		order = append(order, tk.ID)
		if i == 0 && tk.ID != "urgent" {
			t.Fatalf("the first reserve took %s (key %s); want urgent, of the highest priority", tk.ID, tk.Key)
		}
		delete(small, tk.ID)
		must(t, "ack "+tk.ID, b.Ack(ctx, "fair", tk.ID, tk.Lease))
	}
	if len(small) > 0 {
		t.Fatalf("after 20 reserves %d one-task keys still wait: %v", len(small), order)
	}
	// Within A, priority then put order: a0, a1, ...
	next := 0
	for _, id := range order {
		if id[0] == 'a' {
			if want := fmt.Sprintf("a%d", next); id != want {
				t.Fatalf("A's tasks came as %v; want in put order", order)
			}
			next++
		}
	}
	if next > 3 {
		t.Errorf("A had %d tasks among the first reserves %v; want at most 3 while 10 other keys wait", next, order)
	}
}
