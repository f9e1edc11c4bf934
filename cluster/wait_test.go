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
	// The partitions' channels come with the partitions: count once b
	// holds its share (a rebalance under way would add to the count).
	eventually(t, 30*time.Second, "a and b holding half the partitions each", func() bool {
		return len(a.Owned()) == b.Partitions()/2 && len(b.Owned()) == b.Partitions()/2
	})
	listening := b.Listening()

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
	if n := b.Listening(); n != listening {
		t.Errorf("listening to %d channels after the waits, %d before", n, listening)
	}

	// A put on a wakes a reserver on b.
	got := reserveAsync(ctx, b, "q", 1, time.Minute)
	eventually(t, 30*time.Second, "b's reserver waiting", func() bool { return b.Waiting("q") == 1 })
	start := time.Now()
	if _, _, err := a.Put(ctx, "q", task.PutRequest{ID: "1"}); err != nil {
		t.Fatal(err)
	}
	if r := <-got; r.err != nil || len(r.ts) != 1 || time.Since(start) > 30*time.Second {
		t.Fatalf("b's reserve after a put on a: %v, %v after %s", r.ts, r.err, time.Since(start))
	}

	// The end of a pause on a wakes a reserver on b ("all").
	if err := a.PauseQueue(ctx, "p", task.PauseIndefinitely); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Put(ctx, "p", task.PutRequest{ID: "1"}); err != nil {
		t.Fatal(err)
	}
	got = reserveAsync(ctx, b, "p", 1, time.Minute)
	eventually(t, 30*time.Second, "b's reserver waiting", func() bool { return b.Waiting("p") == 1 })
	start = time.Now()
	if err := a.PauseQueue(ctx, "p", 0); err != nil {
		t.Fatal(err)
	}
	if r := <-got; r.err != nil || len(r.ts) != 1 || time.Since(start) > 30*time.Second {
		t.Fatalf("b's reserve after a's resume: %v, %v after %s", r.ts, r.err, time.Since(start))
	}
	if n := b.WaitedOn(); n != 0 {
		t.Errorf("waiting state kept for %d queues after the reserves", n)
	}
}
