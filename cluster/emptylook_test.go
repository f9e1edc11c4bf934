package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/task"
)

// TestReserve_EmptyLookStands: a reserver of one queue that a look has
// just found empty waits without a statement of its own
// (hourglass_cluster_reserve_looks_skipped_total counts it), and misses
// nothing by it: a task made ready on another node wakes it as it wakes
// the reserver that looked; after a task is made ready, the next
// reserver looks again; and a task made ready with no notice at all (as
// a notification lost with a listen connection) is found within the
// time an empty look stands for, not at the end of the wait.
func TestReserve_EmptyLookStands(t *testing.T) {
	ctx := context.Background()
	db := server(t).CreateDatabase(t)
	a, reg := startMetered(t, db, "a")
	b := startNode(t, db, "b")
	skipped := func() int { return int(counter(t, reg, "hourglass_cluster_reserve_looks_skipped_total")) }
	// Long enough to hold on a loaded machine between the steps below.
	a.hooks.EmptyFor(time.Minute)

	r1 := reserveAsync(ctx, a, "q", 1, 20*time.Second)
	eventually(t, 5*time.Second, "the first reserver waiting", func() bool { return a.Waiting("q") == 1 })
	if k := skipped(); k != 0 {
		t.Fatalf("looks skipped = %d before a second reserver, want 0", k)
	}
	r2 := reserveAsync(ctx, a, "q", 1, 20*time.Second)
	eventually(t, 5*time.Second, "the second reserver waiting", func() bool { return a.Waiting("q") == 2 })
	if k := skipped(); k != 1 {
		t.Fatalf("looks skipped = %d, want 1: the second reserver looked though the first had just found q empty", k)
	}

	// Tasks put on b reach both reservers, the one that skipped its look
	// included.
	put := func(id string) {
		t.Helper()
		if _, _, err := svc(b).Put(ctx, "q", task.PutRequest{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	put("t1")
	put("t2")
	got := map[string]bool{}
	for _, r := range []<-chan reserved{r1, r2} {
		select {
		case res := <-r:
			if res.err != nil || len(res.ts) != 1 {
				t.Fatalf("Reserve = %v, %v; want one of the tasks put on b", res.ts, res.err)
			}
			got[res.ts[0].ID] = true
		case <-time.After(10 * time.Second):
			t.Fatal("a reserver was not woken by the tasks put on b")
		}
	}
	if !got["t1"] || !got["t2"] {
		t.Fatalf("reserved %v, want t1 and t2", got)
	}

	// Tasks were made ready since the last empty look: the next reserver
	// looks, then stands for the one after it.
	r3 := reserveAsync(ctx, a, "q", 1, 20*time.Second)
	eventually(t, 5*time.Second, "the third reserver waiting", func() bool { return a.Waiting("q") == 1 })
	if k := skipped(); k != 1 {
		t.Fatalf("looks skipped = %d, want still 1: a reserver skipped its look after tasks were made ready", k)
	}

	_ = r3

	// A task made ready behind every node's back, in another queue: a
	// reserver that looked waits for a notice that never comes; one that
	// skipped its look looks again once the empty look it relied on
	// stops standing, and takes it.
	a.hooks.EmptyFor(3 * time.Second)
	r5 := reserveAsync(ctx, a, "p", 1, 30*time.Second)
	eventually(t, 5*time.Second, "a reserver of p waiting", func() bool { return a.Waiting("p") == 1 })
	r6 := reserveAsync(ctx, a, "p", 1, 30*time.Second)
	eventually(t, 5*time.Second, "a second reserver of p waiting", func() bool { return a.Waiting("p") == 2 })
	if k := skipped(); k != 2 {
		t.Fatalf("looks skipped = %d, want 2: the second reserver of p looked", k)
	}
	if _, _, err := svc(b).Put(ctx, "p", task.PutRequest{ID: "t3", Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.pool.Exec(ctx, "UPDATE hourglass_tasks SET state = 1, fire_at = NULL WHERE queue = 'p' AND id = 't3'"); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-r6:
		if res.err != nil || len(res.ts) != 1 || res.ts[0].ID != "t3" {
			t.Fatalf("Reserve = %v, %v; want t3", res.ts, res.err)
		}
	case res := <-r5:
		t.Fatalf("the reserver that looked returned %v, %v before its wait ran out", res.ts, res.err)
	case <-time.After(15 * time.Second):
		t.Fatal("t3, made ready with no notice, not reserved within 15 s: the reserver that skipped its look waits as if it had looked")
	}
}
