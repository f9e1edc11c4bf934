package cluster_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hourglass-go/hourglass/cluster"
	"github.com/hourglass-go/hourglass/task"
)

// listenTimers listens on every partition channel of the database at url
// and returns a function that waits (up to a minute) until the jobs
// announced include every one of want, then reads what else arrives
// until nothing has for a while (what a batch sent with the last of
// want), and returns the jobs announced.
func listenTimers(t *testing.T, url string, partitions int) func(want ...uint64) map[uint64]bool {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	for p := range partitions {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{"hourglass_p" + strconv.Itoa(p)}.Sanitize()); err != nil {
			t.Fatal(err)
		}
	}
	return func(want ...uint64) map[uint64]bool {
		seen := map[uint64]bool{}
		deadline := time.Now().Add(time.Minute)
		all := func() bool {
			for _, j := range want {
				if !seen[j] {
					return false
				}
			}
			return true
		}
		for {
			wait := time.Until(deadline)
			if all() {
				wait = 300 * time.Millisecond
			}
			wctx, cancel := context.WithTimeout(ctx, wait)
			note, err := conn.WaitForNotification(wctx)
			cancel()
			if err != nil {
				if all() {
					return seen
				}
				t.Fatalf("waiting for the timers of jobs %v: %v (seen %v)", want, err, seen)
			}
			for line := range strings.SplitSeq(note.Payload, "\n") {
				j, _, _ := strings.Cut(line, " ")
				job, err := strconv.ParseUint(j, 10, 64)
				if err != nil {
					t.Fatalf("payload line %q", line)
				}
				seen[job] = true
			}
		}
	}
}

// TestReserve_HeldLeasesNotAnnounced: a node that holds every partition
// (one node) arms the lease timers of the tasks it reserves itself and
// announces none of them; a delayed task put afterwards is still
// announced (the listener's mark), and the leases still run out on
// time: the tasks are ready again after their TTR.
func TestReserve_HeldLeasesNotAnnounced(t *testing.T) {
	ctx := context.Background()
	url := server(t).CreateDatabase(t)
	// A lease of seconds, so that the node's leases surely run on
	// however loaded the machine.
	n := startNode(t, url, "a", func(o *cluster.Options) { o.Lease = 5 * time.Second })
	wait := listenTimers(t, url, n.Partitions())

	const ttr = 2 * time.Second
	reqs := make([]task.PutRequest, 20)
	for i := range reqs {
		reqs[i] = task.PutRequest{ID: "r" + strconv.Itoa(i), TTR: ttr}
	}
	for _, r := range n.PutBatch(ctx, "q", reqs) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	got, err := n.ReserveQueues(ctx, []string{"q"}, len(reqs), time.Second)
	if err != nil || len(got) != len(reqs) {
		t.Fatalf("reserved %d of %d: %v", len(got), len(reqs), err)
	}
	reservedAt := time.Now()
	mark := n.PutBatch(ctx, "q", []task.PutRequest{{ID: "mark", Delay: time.Hour}})[0]
	if mark.Err != nil {
		t.Fatal(mark.Err)
	}
	// A delay of an hour is past the window: announce it within, by a
	// second put.
	mark = n.PutBatch(ctx, "other", []task.PutRequest{{ID: "mark", Delay: time.Second}})[0]
	if mark.Err != nil {
		t.Fatal(mark.Err)
	}
	seen := wait(mark.Task.JobID)
	for _, g := range got {
		if seen[g.JobID] {
			t.Errorf("the lease of job %d, on a partition the node held throughout, was announced", g.JobID)
		}
	}

	// The leases run out at their TTR all the same, armed by the node
	// itself: every task is ready again, and reserved anew.
	again := 0
	for again < len(reqs) && time.Since(reservedAt) < time.Minute {
		more, err := n.ReserveQueues(ctx, []string{"q"}, len(reqs), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		again += len(more)
	}
	if again != len(reqs) {
		t.Fatalf("%d of %d tasks ready again after their leases ran out", again, len(reqs))
	}
	if d := time.Since(reservedAt); d < ttr {
		t.Errorf("leases of %v ran out after %v", ttr, d)
	}
}

// TestReserve_OthersLeasesAnnounced: the leases of tasks a node reserves
// on partitions another node owns are announced to their owner (within
// the notifier's linger: wait fails the test after a minute).
func TestReserve_OthersLeasesAnnounced(t *testing.T) {
	ctx := context.Background()
	url := server(t).CreateDatabase(t)
	long := func(o *cluster.Options) { o.Lease = 5 * time.Second }
	a := startNode(t, url, "a", long)
	b := startNode(t, url, "b", long)
	wait := listenTimers(t, url, a.Partitions())
	// Until both hold their shares.
	deadline := time.Now().Add(time.Minute)
	for len(a.Owned()) == 0 || len(b.Owned()) == 0 || len(a.Owned())+len(b.Owned()) != a.Partitions() {
		if time.Now().After(deadline) {
			t.Fatalf("partitions held: a %d, b %d", a.Owned(), b.Owned())
		}
		time.Sleep(20 * time.Millisecond)
	}

	const ttr = 2 * time.Second
	reqs := make([]task.PutRequest, 40)
	for i := range reqs {
		reqs[i] = task.PutRequest{ID: "r" + strconv.Itoa(i), TTR: ttr}
	}
	for _, r := range a.PutBatch(ctx, "q", reqs) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	got, err := b.ReserveQueues(ctx, []string{"q"}, len(reqs), time.Second)
	if err != nil || len(got) != len(reqs) {
		t.Fatalf("reserved %d of %d: %v", len(got), len(reqs), err)
	}
	mark := b.PutBatch(ctx, "other", []task.PutRequest{{ID: "mark", Delay: time.Second}})[0]
	if mark.Err != nil {
		t.Fatal(mark.Err)
	}
	var others []uint64
	for _, g := range got {
		if _, held := b.Owned()[b.PartitionOf(g.JobID)]; !held {
			others = append(others, g.JobID)
		}
	}
	if len(others) == 0 {
		t.Fatal("every task reserved was on b's partitions")
	}
	wait(append(others, mark.Task.JobID)...)
}
