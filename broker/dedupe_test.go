package broker_test

import (
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/store"
	"github.com/hourglass-go/hourglass/store/memstore"
	"github.com/hourglass-go/hourglass/task"
)

// TestDedupe_Pruned: the finished-id records of a dedupe window live
// only for their window: the broker's pruner removes those past their
// end and keeps those within it, history kept or not.
func TestDedupe_Pruned(t *testing.T) {
	st := memstore.New()
	b := open(t, st)
	for queue, window := range map[string]time.Duration{"short": 100 * time.Millisecond, "long": time.Hour} {
		if _, err := svc(b).SetPolicy(ctx, queue, task.Policy{Dedupe: window}); err != nil {
			t.Fatal(err)
		}
		put(t, b, queue, task.PutRequest{ID: "a"})
		ts, err := svc(b).Reserve(ctx, queue, 1, time.Second)
		if err != nil || len(ts) != 1 {
			t.Fatalf("Reserve(%s): %+v, %v", queue, ts, err)
		}
		if err := svc(b).Ack(ctx, queue, "a", ts[0].Lease); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Deduped("long", "a"); err != nil {
		t.Fatalf("the long window's record: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := st.Deduped("short", "a"); err == store.ErrNotFound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the short window's record was not pruned within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := st.Deduped("long", "a"); err != nil {
		t.Fatalf("the long window's record after pruning: %v", err)
	}
}
