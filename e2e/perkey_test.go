package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hourglass-go/hourglass/api"
)

// TestReserve_PerKeyConcurrency: a queue's per_key.concurrency (issue
// 42) over HTTP: PUT sets it and GET shows it, a 0 is refused (400); with
// keys A and B of 10 ready tasks each and per_key 2, a reserve of 10
// takes 2 of each, an ack of A's lets one more of A through; the policy
// holds after a restart, with the leases taken before it still counted.
func TestReserve_PerKeyConcurrency(t *testing.T) { engines(t, testReserve_PerKeyConcurrency) }

func testReserve_PerKeyConcurrency(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.client()
	ctx := context.Background()
	if a := s.call("PUT", "/v1/queues/q/policy", `{"per_key":{"concurrency":0}}`); a.status != 400 || !strings.Contains(string(a.body), "per_key.concurrency") {
		t.Fatalf("PUT of per_key.concurrency 0: %v, want 400 naming it", a)
	}
	if a := s.call("PUT", "/v1/queues/q/policy", `{"per_key":{"concurrency":2}}`); a.status != 200 || !strings.Contains(string(a.body), `"per_key":{"concurrency":2}`) {
		t.Fatalf("PUT of per_key.concurrency 2: %v", a)
	}
	if a := s.call("GET", "/v1/queues/q/policy", ""); a.status != 200 || !strings.Contains(string(a.body), `"per_key":{"concurrency":2}`) {
		t.Fatalf("GET of the policy: %v", a)
	}
	for _, key := range []string{"A", "B"} {
		for i := range 10 {
			if _, _, err := c.Put(ctx, "q", api.PutRequest{ID: fmt.Sprint(key, i), Key: key}); err != nil {
				t.Fatal(err)
			}
		}
	}
	reserve := func(want map[string]int) []api.Task {
		t.Helper()
		ts, err := c.Reserve(ctx, "q", 10, 0)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for _, tk := range ts {
			got[tk.Key]++
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("reserve of 10 took %v by key; want %v", got, want)
		}
		return ts
	}
	ts := reserve(map[string]int{"A": 2, "B": 2})
	reserve(map[string]int{})
	var a0 api.Task
	for _, tk := range ts {
		if tk.Key == "A" {
			a0 = tk
			break
		}
	}
	if err := c.Ack(ctx, "q", a0.ID, a0.Lease); err != nil {
		t.Fatal(err)
	}
	reserve(map[string]int{"A": 1})
	s.stop()
	s.start()
	reserve(map[string]int{})
}
