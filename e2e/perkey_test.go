package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/client"
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
	reserve := func(want map[string]int) []api.Task { t.Helper(); return reserveByKey(t, c, "q", want) }
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

// TestReserve_PerKeyRate: a queue's per_key.rate (issue 42) over HTTP on
// both engines: a bad rate is refused (400 naming the field), a good one
// is accepted (no more "not supported") and shown with its burst; with
// keys A and B of 5 ready tasks each and a rate of 1 an hour per key, a
// reserve of 10 takes 1 of each and the next none, while a key new to
// the queue still gets its first task; after a restart every key handed
// a task is still spent.
func TestReserve_PerKeyRate(t *testing.T) { engines(t, testReserve_PerKeyRate) }

func testReserve_PerKeyRate(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.client()
	ctx := context.Background()
	for _, tc := range []struct{ body, field string }{
		{`{"per_key":{"rate":{"limit":0,"per":"1s"}}}`, "per_key.rate.limit"},
		{`{"per_key":{"rate":{"limit":1,"per":"0s"}}}`, "per_key.rate.per"},
		{`{"per_key":{"rate":{"limit":1,"per":"1s","burst":-1}}}`, "per_key.rate.burst"},
	} {
		if a := s.call("PUT", "/v1/queues/q/policy", tc.body); a.status != 400 || !strings.Contains(string(a.body), tc.field) {
			t.Fatalf("PUT of %s: %v, want 400 naming %s", tc.body, a, tc.field)
		}
	}
	const shown = `"per_key":{"rate":{"limit":1,"per":"1h0m0s","burst":1}}`
	if a := s.call("PUT", "/v1/queues/q/policy", `{"per_key":{"rate":{"limit":1,"per":"1h"}}}`); a.status != 200 || !strings.Contains(string(a.body), shown) {
		t.Fatalf("PUT of per_key.rate 1/1h: %v; want 200 with %s", a, shown)
	}
	if a := s.call("GET", "/v1/queues/q/policy", ""); a.status != 200 || !strings.Contains(string(a.body), shown) {
		t.Fatalf("GET of the policy: %v", a)
	}
	for _, key := range []string{"A", "B"} {
		for i := range 5 {
			if _, _, err := c.Put(ctx, "q", api.PutRequest{ID: fmt.Sprint(key, i), Key: key}); err != nil {
				t.Fatal(err)
			}
		}
	}
	reserve := func(want map[string]int) []api.Task { t.Helper(); return reserveByKey(t, c, "q", want) }
	reserve(map[string]int{"A": 1, "B": 1})
	reserve(map[string]int{})
	if _, _, err := c.Put(ctx, "q", api.PutRequest{ID: "C0", Key: "C"}); err != nil {
		t.Fatal(err)
	}
	reserve(map[string]int{"C": 1})
	// A restart keeps the keys' buckets: A, B and C stay spent.
	if _, _, err := c.Put(ctx, "q", api.PutRequest{ID: "C1", Key: "C"}); err != nil {
		t.Fatal(err)
	}
	s.stop()
	s.start()
	reserve(map[string]int{})
}

// reserveByKey reserves up to 10 tasks of queue, at once, and fails t
// unless they count want by key.
func reserveByKey(t testing.TB, c *client.Client, queue string, want map[string]int) []api.Task {
	t.Helper()
	ts, err := c.Reserve(context.Background(), queue, 10, 0)
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
