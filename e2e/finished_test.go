package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/client"
)

// TestGet_Finished: GET of a task that finished answers, within the
// history's retention, its finished record (200, state "finished", its
// outcome, when, its attempts) rather than 404 (issue 44): acked, deleted,
// and dead-lettered; a task of the same id put again answers live; an id
// never put answers 404, and so does a finished task on a server that
// keeps no history (--history 0).
func TestGet_Finished(t *testing.T) { engines(t, testGet_Finished) }

func testGet_Finished(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.client()
	ctx := context.Background()
	before := time.Now().Add(-time.Second)

	put := func(queue, id string) {
		t.Helper()
		if _, _, err := c.Put(ctx, queue, api.PutRequest{ID: id}); err != nil {
			t.Fatalf("put %s: %v", id, err)
		}
	}
	put("q", "acked")
	tasks, err := c.Reserve(ctx, "q", 1, 0)
	if err != nil || len(tasks) != 1 {
		t.Fatalf("reserve: %+v, %v", tasks, err)
	}
	if err := c.Ack(ctx, "q", "acked", tasks[0].Lease); err != nil {
		t.Fatal(err)
	}
	put("q", "deleted")
	if err := c.Delete(ctx, "q", "deleted"); err != nil {
		t.Fatal(err)
	}

	for id, outcome := range map[string]string{"acked": api.FinishedAcked, "deleted": api.FinishedDeleted} {
		a := s.call("GET", "/v1/queues/q/tasks/"+id, "")
		var f api.FinishedRecord
		if a.status != 200 || json.Unmarshal(a.body, &f) != nil {
			t.Fatalf("GET of the %s task: %v, want 200 with its finished record", id, a)
		}
		if f.ID != id || f.Queue != "q" || f.State != api.StateFinished || f.Outcome != outcome || f.JobID == 0 ||
			f.Finished.Before(before) || f.Finished.After(time.Now().Add(time.Second)) {
			t.Errorf("GET of the %s task: %s", id, a.body)
		}
		if id == "acked" && f.Attempts != 1 {
			t.Errorf("GET of the acked task: %d attempts, want 1", f.Attempts)
		}
		got, err := c.Get(ctx, "q", id)
		if err != nil || got.State != api.StateFinished || got.Outcome != outcome || got.Finished == nil {
			t.Errorf("client Get of the %s task: %+v, %v", id, got, err)
		}
	}

	// Put again, the id is live again; an id never put is 404.
	put("q", "acked")
	if got, err := c.Get(ctx, "q", "acked"); err != nil || got.State != api.StateReady || got.Outcome != "" {
		t.Errorf("Get of a task put again after its ack: %+v, %v; want it live, ready", got, err)
	}
	if a := s.call("GET", "/v1/queues/q/tasks/never", ""); a.status != 404 {
		t.Errorf("GET of an id never put: %v, want 404", a)
	}
	if a := s.call("GET", "/v1/queues/other/tasks/deleted", ""); a.status != 404 {
		t.Errorf("GET of a finished id in another queue: %v, want 404", a)
	}

	// Without history, a finished task is gone.
	s0 := startServer(t, withFlags("--history", "0"))
	c0 := s0.client()
	if _, _, err := c0.Put(ctx, "q", api.PutRequest{ID: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := c0.Delete(ctx, "q", "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := c0.Get(ctx, "q", "x"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("Get of a deleted task without history: %v, want not found", err)
	}
}
