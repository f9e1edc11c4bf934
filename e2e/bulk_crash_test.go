package e2e_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/api"
)

// TestBulk_CrashMidMove kills the server with SIGKILL while it moves a
// large set of tasks into another queue (POST tasks:move), restarts it,
// and checks that every task is in one queue or the other, once: none
// lost, none in both.
func TestBulk_CrashMidMove(t *testing.T) { engines(t, testBulkCrashMidMove) }

func testBulkCrashMidMove(t *testing.T) {
	t.Parallel()
	const n = 20 * api.MaxBatch
	s := startServer(t)
	c := s.client()
	ctx := context.Background()
	for i := 0; i < n; i += api.MaxBatch {
		rs := make([]api.PutRequest, api.MaxBatch)
		for j := range rs {
			rs[j] = api.PutRequest{ID: fmt.Sprintf("t-%05d", i+j), Payload: []byte(fmt.Sprintf(`{"n":%d}`, i+j))}
		}
		res, err := c.PutBatch(ctx, "src", rs)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Error != "" {
				t.Fatal(r.Error)
			}
		}
	}
	done := make(chan answer, 1)
	go func() {
		a, _ := s.try("POST", "/v1/queues/src/tasks:move", `{"to":"dst"}`, "")
		done <- a
	}()
	// Kill once some tasks moved, or when the move is done: bounded.
	moved := 0
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		qs, err := c.Queues(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range qs {
			if q.Name == "dst" {
				moved = q.Ready
			}
		}
		if moved >= n/20 {
			break
		}
	}
	s.kill()
	a := <-done
	t.Logf("killed with %d of %d moved; the move's answer: %v", moved, n, a)
	s.start()

	seen := map[string]string{}
	for _, q := range []string{"src", "dst"} {
		var after string
		for pages := 0; pages <= n/api.MaxListLimit+1; pages++ {
			page, next, err := c.ListTasks(ctx, q, "", after, api.MaxListLimit)
			if err != nil {
				t.Fatal(err)
			}
			for _, tk := range page {
				if other, ok := seen[tk.ID]; ok {
					t.Fatalf("task %s in %s and in %s", tk.ID, other, q)
				}
				seen[tk.ID] = q
			}
			if next == "" {
				break
			}
			after = next
		}
	}
	if len(seen) != n {
		t.Fatalf("%d tasks after the crash, want %d", len(seen), n)
	}
	// The counts read before the kill may include moves not yet durable
	// (no answer had promised them), so dst may hold fewer after the
	// restart: each such task is back in src, whole.
	inDst := 0
	for _, q := range seen {
		if q == "dst" {
			inDst++
		}
	}
	t.Logf("%d tasks in dst after the restart", inDst)
	for _, id := range []string{"t-00000", fmt.Sprintf("t-%05d", n-1)} {
		tk, err := c.Get(ctx, seen[id], id)
		if err != nil {
			t.Fatal(err)
		}
		var want int
		fmt.Sscanf(id, "t-%d", &want)
		if string(tk.Payload) != fmt.Sprintf(`{"n":%d}`, want) {
			t.Fatalf("%s's payload after the crash: %s", id, tk.Payload)
		}
	}
}
