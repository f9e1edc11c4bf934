package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/worker"
)

// Cancelling work under way (issue 42): POST .../cancel and DELETE of a
// reserved task stop its push or its worker's handler, on both engines;
// on a cluster also when the push or the worker's server is another
// node than the one that got the cancel.

// secondNode starts, on the cluster engine, another node of s's cluster
// and returns it; on the embedded engine it returns s.
func secondNode(t *testing.T, s *server) *server {
	t.Helper()
	if engineOf(t) != clusterEngine {
		return s
	}
	return startServer(t, withPostgres(s.postgres, "n2"), withFlags("--lease", clusterLease))
}

// TestCancel_Reserved: a cancel of a reserved task answers 204 and
// deletes it; its ack, touch and nack then answer 404 as for a deleted
// task, the leases check names its lease, the task is never reserved
// again, its attempt and history record say cancelled; a second cancel
// and a cancel of a task never put answer 404; a ready, delayed or dead
// task is cancelled as DELETE deletes it. DELETE of a reserved task
// names its lease too, and stays "deleted" in the history.
func TestCancel_Reserved(t *testing.T) { engines(t, testCancelReserved) }

func testCancelReserved(t *testing.T) {
	s := startServer(t)
	if a := s.call("POST", "/v1/queues/q/tasks", `{"id":"r","payload":1,"max_attempts":1}`); a.status != 201 {
		t.Fatalf("put: %v", a)
	}
	lease := reserveLease(t, s, "q", "r")
	if a := s.call("POST", "/v1/queues/q/tasks/r/cancel", ""); a.status != 204 {
		t.Fatalf("cancel of a reserved task: %v; want 204", a)
	}
	for _, c := range []struct{ path, body string }{
		{"/v1/queues/q/tasks/r/ack", fmt.Sprintf(`{"lease":%q}`, lease)},
		{"/v1/queues/q/tasks/r/touch", fmt.Sprintf(`{"lease":%q}`, lease)},
		{"/v1/queues/q/tasks/r/nack", fmt.Sprintf(`{"lease":%q}`, lease)},
		{"/v1/queues/q/tasks/r/cancel", ""},
		{"/v1/queues/q/tasks/never/cancel", ""},
	} {
		if a := s.call("POST", c.path, c.body); a.status != 404 {
			t.Errorf("POST %s after the cancel: %v; want 404", c.path, a)
		}
	}
	if got := cancelledLeases(t, s, lease, "not-a-lease"); !slices.Equal(got, []string{lease}) {
		t.Errorf("leases:cancelled = %q; want [%q]", got, lease)
	}
	if a := s.call("POST", "/v1/queues/q/reserve", `{"max":10}`); a.status != 200 || !strings.Contains(string(a.body), `"tasks":[]`) {
		t.Errorf("reserve after the cancel: %v; want no task", a)
	}
	var got api.Task
	if a := s.call("GET", "/v1/queues/q/tasks/r", ""); a.status != 200 || json.Unmarshal(a.body, &got) != nil || got.Outcome != api.FinishedCancelled {
		t.Errorf("GET of the cancelled task: %v; want its finished record, cancelled", a)
	}
	pushAttempts(t, s, "q", "r", "1 cancelled 0 ")

	// Ready, delayed, dead: 204, recorded cancelled.
	s.call("POST", "/v1/queues/q/tasks", `{"id":"x","payload":1,"max_attempts":1}`)
	xl := reserveLease(t, s, "q", "x")
	if a := s.call("POST", "/v1/queues/q/tasks/x/nack", fmt.Sprintf(`{"lease":%q}`, xl)); a.status != 200 {
		t.Fatalf("nack of x: %v", a)
	}
	s.call("POST", "/v1/queues/q/tasks", `{"id":"w","payload":1}`)
	s.call("POST", "/v1/queues/q/tasks", `{"id":"d","payload":1,"delay":"1h"}`)
	for _, id := range []string{"w", "d", "x"} {
		if a := s.call("POST", "/v1/queues/q/tasks/"+id+"/cancel", "{}"); a.status != 204 {
			t.Errorf("cancel of %s: %v; want 204", id, a)
		}
	}
	var h api.HistoryResponse
	if a := s.call("GET", "/v1/queues/q/history?outcome=cancelled", ""); a.status != 200 || json.Unmarshal(a.body, &h) != nil {
		t.Fatalf("history: %v", a)
	}
	var ids []string
	for _, f := range h.Tasks {
		ids = append(ids, f.ID)
	}
	if want := []string{"x", "d", "w", "r"}; !slices.Equal(ids, want) {
		t.Errorf("cancelled tasks in the history: %q; want %q", ids, want)
	}

	// DELETE of a reserved task names its lease; the history says deleted.
	s.call("POST", "/v1/queues/q/tasks", `{"id":"del","payload":1}`)
	dl := reserveLease(t, s, "q", "del")
	if a := s.call("DELETE", "/v1/queues/q/tasks/del", ""); a.status != 204 {
		t.Fatalf("DELETE of a reserved task: %v", a)
	}
	if got := cancelledLeases(t, s, dl); !slices.Equal(got, []string{dl}) {
		t.Errorf("leases:cancelled after a DELETE = %q; want [%q]", got, dl)
	}
	if a := s.call("POST", "/v1/leases:cancelled", `{"leases":[]}`); a.status != 400 {
		t.Errorf("leases:cancelled of none: %v; want 400", a)
	}
}

// reserveLease reserves one task of queue over HTTP, fails t unless it
// is id, and returns its lease.
func reserveLease(t *testing.T, s *server, queue, id string) string {
	t.Helper()
	var r api.ReserveResponse
	a := s.call("POST", "/v1/queues/"+queue+"/reserve", `{"max":1,"wait":"5s"}`)
	if a.status != 200 || json.Unmarshal(a.body, &r) != nil || len(r.Tasks) != 1 || r.Tasks[0].ID != id {
		t.Fatalf("reserve of %s: %v", id, a)
	}
	return r.Tasks[0].Lease
}

// cancelledLeases asks s which of leases were cancelled.
func cancelledLeases(t *testing.T, s *server, leases ...string) []string {
	t.Helper()
	body, _ := json.Marshal(api.LeasesRequest{Leases: leases})
	var out api.LeasesResponse
	if a := s.call("POST", "/v1/leases:cancelled", string(body)); a.status != 200 || json.Unmarshal(a.body, &out) != nil {
		t.Fatalf("leases:cancelled: %v", a)
	}
	return out.Cancelled
}

// TestCancel_Push: a task whose push hangs (the receiver never answers,
// the push's timeout a minute) is cancelled, and the receiver sees the
// push's request cancelled within seconds; the task is never pushed
// again, and its attempt and history say cancelled. A DELETE of a pushed
// task stops its push likewise. On a cluster both pushes run on the
// first node (the only one when they began), and the cancel and the
// DELETE go through a second node.
func TestCancel_Push(t *testing.T) { engines(t, testCancelPush) }

func testCancelPush(t *testing.T) {
	s := startServer(t)
	aborted := make(chan time.Time, 10)
	hang := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
			aborted <- time.Now()
		case <-time.After(2 * time.Minute):
		}
	})
	setPush(t, s, "p", fmt.Sprintf(`{"push":{"url":%q,"timeout":"60s"}}`, hang.srv.URL))
	s.call("POST", "/v1/queues/p/tasks", `{"id":"a","payload":1}`)
	s.call("POST", "/v1/queues/p/tasks", `{"id":"b","payload":1}`)
	hang.wait(t, 2, 20*time.Second)
	// Both pushes run on s; on a cluster the second node starts only now.
	other := secondNode(t, s)

	for _, how := range []struct{ method, path string }{
		{"POST", "/v1/queues/p/tasks/a/cancel"},
		{"DELETE", "/v1/queues/p/tasks/b"},
	} {
		sent := time.Now()
		if a := other.call(how.method, how.path, ""); a.status != 204 {
			t.Fatalf("%s %s: %v; want 204", how.method, how.path, a)
		}
		select {
		case at := <-aborted:
			t.Logf("%s %s: the receiver saw the push cancelled %s after it was sent", how.method, how.path, at.Sub(sent).Round(time.Millisecond))
		case <-time.After(15 * time.Second):
			t.Fatalf("%s %s: the push was not cancelled within 15 s", how.method, how.path)
		}
	}
	pushAttempts(t, s, "p", "a", "1 cancelled 0 ")
	var got api.Task
	if a := s.call("GET", "/v1/queues/p/tasks/a", ""); a.status != 200 || json.Unmarshal(a.body, &got) != nil || got.Outcome != api.FinishedCancelled {
		t.Errorf("GET of the cancelled task: %v; want its finished record, cancelled", a)
	}
	time.Sleep(2 * time.Second)
	if n := hang.count(); n != 2 {
		t.Errorf("%d pushes; want 2, the cancelled tasks never pushed again", n)
	}
}

// TestCancel_Worker: a Go worker's handler runs a task with a minute's
// ttr (its first touch 30 s away); the task is cancelled, on a cluster
// through another node than the worker's, and the handler's context
// ends with worker.ErrCancelled within seconds. The worker goes on with
// the next task.
func TestCancel_Worker(t *testing.T) { engines(t, testCancelWorker) }

func testCancelWorker(t *testing.T) {
	s := startServer(t)
	other := secondNode(t, s)
	c := s.client()
	started := make(chan string, 10)
	cause := make(chan error, 1)
	w := worker.New(c, worker.Options{Logger: slog.New(slog.DiscardHandler)})
	w.Handle("wq", func(ctx context.Context, tk *worker.Task) error {
		started <- tk.ID
		if tk.ID != "long" {
			return nil
		}
		select {
		case <-ctx.Done():
			cause <- context.Cause(ctx)
		case <-time.After(30 * time.Second):
			cause <- errors.New("context not cancelled in 30 s")
		}
		return ctx.Err()
	})
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	s.call("POST", "/v1/queues/wq/tasks", `{"id":"long","payload":1,"ttr":"1m"}`)
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("the handler did not start in 20 s")
	}
	sent := time.Now()
	if a := other.call("POST", "/v1/queues/wq/tasks/long/cancel", ""); a.status != 204 {
		t.Fatalf("cancel: %v", a)
	}
	if err := <-cause; !errors.Is(err, worker.ErrCancelled) {
		t.Fatalf("the handler's context: %v; want worker.ErrCancelled", err)
	}
	t.Logf("the handler's context ended %s after the cancel was sent", time.Since(sent).Round(time.Millisecond))
	pushAttempts(t, s, "wq", "long", "1 cancelled 0 ")
	s.call("POST", "/v1/queues/wq/tasks", `{"id":"next","payload":1}`)
	select {
	case id := <-started:
		if id != "next" {
			t.Fatalf("handler ran %s; want next", id)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the worker did not go on with the next task")
	}
}
