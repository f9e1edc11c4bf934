package e2e_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/client"
)

// TestPut_Dedupe: a queue's dedupe window (policy "dedupe", issue 42)
// over HTTP, on a server that keeps no history (--history 0), so that
// the window stands on its own records: a window over 30 days is
// refused (400); PUT and PATCH set it; within the window a put of an acked id answers 200 with
// the finished record (state "finished", outcome, when) and puts
// nothing, a batch item answers status 200 and "finished" beside a new
// item's 201; the Go client sees state finished; and so after a restart.
func TestPut_Dedupe(t *testing.T) { engines(t, testPut_Dedupe) }

func testPut_Dedupe(t *testing.T) {
	t.Parallel()
	s := startServer(t, withFlags("--history", "0"))
	c := s.client()
	ctx := context.Background()
	before := time.Now().Add(-time.Second)

	if a := s.call("PUT", "/v1/queues/q/policy", `{"dedupe":"721h"}`); a.status != 400 || !strings.Contains(string(a.body), `"hourglass: `) ||
		!strings.Contains(string(a.body), "dedupe") {
		t.Fatalf("PUT of a policy with dedupe 721h: %v, want 400 naming dedupe", a)
	}
	if a := s.call("PUT", "/v1/queues/q/policy", `{"dedupe":"30m"}`); a.status != 200 || !strings.Contains(string(a.body), `"dedupe":"30m0s"`) {
		t.Fatalf("PUT of a policy with dedupe 30m: %v", a)
	}
	// A merge patch changes the window and keeps it through other fields.
	if a := s.call("PATCH", "/v1/queues/q/policy", `{"dedupe":"1h"}`); a.status != 200 || !strings.Contains(string(a.body), `"dedupe":"1h0m0s"`) {
		t.Fatalf("PATCH of dedupe 1h: %v", a)
	}
	if a := s.call("PATCH", "/v1/queues/q/policy", `{"max_attempts":3}`); a.status != 200 || !strings.Contains(string(a.body), `"dedupe":"1h0m0s"`) {
		t.Fatalf("PATCH of max_attempts: %v; want dedupe kept", a)
	}
	if _, _, err := c.Put(ctx, "q", api.PutRequest{ID: "x1"}); err != nil {
		t.Fatal(err)
	}
	tasks, err := c.Reserve(ctx, "q", 1, 0)
	if err != nil || len(tasks) != 1 {
		t.Fatalf("reserve: %+v, %v", tasks, err)
	}
	if err := c.Ack(ctx, "q", "x1", tasks[0].Lease); err != nil {
		t.Fatal(err)
	}

	check := func(when string) {
		t.Helper()
		a := s.call("POST", "/v1/queues/q/tasks", `{"id":"x1","payload":"again"}`)
		var f api.FinishedRecord
		if a.status != 200 || json.Unmarshal(a.body, &f) != nil || f.ID != "x1" || f.Queue != "q" || f.JobID != tasks[0].JobID ||
			f.State != api.StateFinished || f.Outcome != api.FinishedAcked || f.Attempts != 1 ||
			f.Finished.Before(before) || f.Finished.After(time.Now().Add(time.Second)) {
			t.Fatalf("%s: put of the acked id: %v; want 200 with its finished record", when, a)
		}
		a = s.call("POST", "/v1/queues/q/tasks:batch", `{"tasks":[{"id":"x1"},{"id":"`+when+`"}]}`)
		var br api.BatchResponse
		if a.status != 200 || json.Unmarshal(a.body, &br) != nil || len(br.Results) != 2 {
			t.Fatalf("%s: batch: %v", when, a)
		}
		if r := br.Results[0]; r.Status != 200 || r.Task != nil || r.Finished == nil || r.Finished.State != api.StateFinished ||
			r.Finished.Outcome != api.FinishedAcked || r.Finished.JobID != f.JobID {
			t.Fatalf("%s: batch item of the acked id: %s", when, a.body)
		}
		if r := br.Results[1]; r.Status != 201 || r.Task == nil || r.Task.State != api.StateReady {
			t.Fatalf("%s: batch item of a new id: %s", when, a.body)
		}
		// The Go client sees the put deduped: not created, state finished.
		got, created, err := c.Put(ctx, "q", api.PutRequest{ID: "x1"})
		if err != nil || created || !client.Deduped(got) || got.Outcome != api.FinishedAcked || got.Finished == nil {
			t.Fatalf("%s: client put of the acked id: %+v created %v, %v", when, got, created, err)
		}
		// Nothing was put but the batch's new id.
		ts, err := c.Reserve(ctx, "q", 10, 0)
		if err != nil || len(ts) != 1 || ts[0].ID != when {
			t.Fatalf("%s: reserve after the deduped puts: %+v, %v; want %s alone", when, ts, err, when)
		}
		if err := c.Ack(ctx, "q", when, ts[0].Lease); err != nil {
			t.Fatal(err)
		}
	}
	check("before-restart")
	s.stop()
	s.start()
	check("after-restart")
}
