package cluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/task"
)

// TestWait_AcrossNodes: a reserver waiting on one node is woken through
// the one channel of readiness (notifications.go) by a put on another
// node, and by the end of a pause there; the waiting state of the names
// reservers waited on goes with their waits, and the node listens to no
// more channels than before. Each wait is far longer than the wake needs
// takes, so a lost wake-up fails the test, not a slow machine.
func TestWait_AcrossNodes(t *testing.T) {
	ctx := context.Background()
	url := server(t).CreateDatabase(t)
	a := startNode(t, url, "a")
	b := startNode(t, url, "b")
	// The channels b listens to are its fixed ones and one a partition
	// it owns; the partitions move while the two nodes balance them, so
	// the count is taken net of them.
	queueChannels := func() int { return b.Listening() - len(b.Owned()) }
	listening := queueChannels()

	// Many names waited on and left: nothing kept.
	names := make([]string, 500)
	for i := range names {
		names[i] = fmt.Sprintf("n%d", i)
	}
	for i := 0; i < len(names); i += 100 {
		if _, err := b.ReserveQueues(ctx, names[i:i+100], 1, time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	if n := b.WaitedOn(); n != 0 {
		t.Errorf("waiting state kept for %d queues after the waits", n)
	}
	eventually(t, 30*time.Second, fmt.Sprintf("b listening to its %d channels but its partitions' as before the waits", listening), func() bool {
		return queueChannels() == listening
	})

	// A put on a wakes a reserver on b.
	got := reserveAsync(ctx, b, "q", 1, time.Minute)
	eventually(t, 30*time.Second, "b's reserver waiting", func() bool { return b.Waiting("q") == 1 })
	start := time.Now()
	if _, _, err := svc(a).Put(ctx, "q", task.PutRequest{ID: "1"}); err != nil {
		t.Fatal(err)
	}
	if r := <-got; r.err != nil || len(r.ts) != 1 || time.Since(start) > 30*time.Second {
		t.Fatalf("b's reserve after a put on a: %v, %v after %s", r.ts, r.err, time.Since(start))
	}

	// The end of a pause on a wakes a reserver on b ("all").
	if err := svc(a).PauseQueue(ctx, "p", task.PauseIndefinitely); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc(a).Put(ctx, "p", task.PutRequest{ID: "1"}); err != nil {
		t.Fatal(err)
	}
	got = reserveAsync(ctx, b, "p", 1, time.Minute)
	eventually(t, 30*time.Second, "b's reserver waiting", func() bool { return b.Waiting("p") == 1 })
	start = time.Now()
	if err := svc(a).PauseQueue(ctx, "p", 0); err != nil {
		t.Fatal(err)
	}
	if r := <-got; r.err != nil || len(r.ts) != 1 || time.Since(start) > 30*time.Second {
		t.Fatalf("b's reserve after a's resume: %v, %v after %s", r.ts, r.err, time.Since(start))
	}
	if n := b.WaitedOn(); n != 0 {
		t.Errorf("waiting state kept for %d queues after the reserves", n)
	}
}
