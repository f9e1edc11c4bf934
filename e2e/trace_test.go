package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/api"
)

// The black-box tests of trace context (api.TraceparentHeader): a put's
// W3C traceparent and tracestate, from the request's headers or a batch
// item's fields, come back unchanged in the reserve's answer and on the
// push request's headers, on both engines, across a retry and a restart.

// Trace contexts of the tests: W3C's example and two more.
var (
	traceA = [2]string{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"}
	traceB = [2]string{"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00", "b=1"}
	traceC = [2]string{"00-11111111111111111111111111111111-2222222222222222-01", ""}
)

// putTraced sends a put (path below /v1/queues/) with body and the trace
// context tr as headers ("" for none), and fails t unless it is answered
// 200 or 201.
func putTraced(t *testing.T, s *server, path, body string, tr [2]string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", s.url()+"/v1/queues/"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if tr[0] != "" {
		req.Header.Set("traceparent", tr[0])
	}
	if tr[1] != "" {
		req.Header.Set("tracestate", tr[1])
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 && resp.StatusCode != 201 {
		t.Fatalf("POST %s %s: %d %s %v", path, body, resp.StatusCode, b, err)
	}
	return b
}

// tracedPuts puts, into queue, the task "single" with traceA in its
// headers and a batch of "b-default" (the batch's headers, traceB),
// "b-own" (its own field, traceC) and "b-none" (a malformed traceparent:
// dropped), and returns the trace context each should carry.
func tracedPuts(t *testing.T, s *server, queue string) map[string][2]string {
	t.Helper()
	putTraced(t, s, queue+"/tasks", `{"id":"single","payload":1}`, traceA)
	body := fmt.Sprintf(`{"tasks":[{"id":"b-default"},{"id":"b-own","traceparent":%q},{"id":"b-none","traceparent":"00-zz"}]}`, traceC[0])
	var res api.BatchResponse
	if err := json.Unmarshal(putTraced(t, s, queue+"/tasks:batch", body, traceB), &res); err != nil {
		t.Fatal(err)
	}
	for i, r := range res.Results {
		if r.Task == nil {
			t.Fatalf("batch item %d: %s", i, r.Error)
		}
	}
	return map[string][2]string{"single": traceA, "b-default": traceB, "b-own": traceC, "b-none": {}}
}

// TestTrace_Reserve: the trace context of single and batch puts is in
// the reserve's answer after a restart, and again in the answer of the
// reserve of a retry.
func TestTrace_Reserve(t *testing.T) { engines(t, testTraceReserve) }

func testTraceReserve(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	want := tracedPuts(t, s, "tr")
	s.stop()
	s.start()
	c := s.client()
	ctx := context.Background()
	check := func(what string, tk api.Task) {
		t.Helper()
		w, ok := want[tk.ID]
		if !ok {
			t.Fatalf("%s: unknown task %s", what, tk.ID)
		}
		if tk.Traceparent != w[0] || tk.Tracestate != w[1] {
			t.Errorf("%s: task %s: traceparent %q, tracestate %q; want %q, %q", what, tk.ID, tk.Traceparent, tk.Tracestate, w[0], w[1])
		}
	}
	ts, err := c.Reserve(ctx, "tr", 10, 5*time.Second)
	if err != nil || len(ts) != len(want) {
		t.Fatalf("Reserve after a restart: %d tasks, %v; want %d", len(ts), err, len(want))
	}
	for _, tk := range ts {
		check("reserve after a restart", tk)
		if _, err := c.Nack(ctx, "tr", tk.ID, tk.Lease, 0, "again"); err != nil {
			t.Fatalf("Nack %s: %v", tk.ID, err)
		}
	}
	got := 0
	for deadline := time.Now().Add(30 * time.Second); got < len(want) && time.Now().Before(deadline); {
		ts, err := c.Reserve(ctx, "tr", 10, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range ts {
			if tk.Attempts != 2 {
				t.Errorf("task %s: attempt %d, want 2", tk.ID, tk.Attempts)
			}
			check("reserve of the retry", tk)
			got++
		}
	}
	if got != len(want) {
		t.Fatalf("the retries: %d tasks reserved, want %d", got, len(want))
	}
}

// TestTrace_Push: the trace context of single and batch puts is on the
// push request's headers, on a retry after a 503 too, and for tasks put
// before a restart.
func TestTrace_Push(t *testing.T) { engines(t, testTracePush) }

func testTracePush(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	want := tracedPuts(t, s, "hooks") // put before the restart, pushed after it
	s.stop()
	s.start()
	// The first push of each task is answered 503 with Retry-After 0,
	// the second 204. The endpoint has a traceparent header of its own,
	// which a task's trace context replaces.
	retried := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(api.PushAttemptHeader) == "1" {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	setPush(t, s, "hooks", fmt.Sprintf(`{"push":{"url":%q,"timeout":"5s","headers":{"traceparent":%q}}}`, retried.srv.URL+"/hook", traceC[0]))
	attempts := map[string]map[string]bool{}
	for n := 1; n <= 2*len(want); n++ {
		p := retried.wait(t, n, 30*time.Second)
		id, attempt := p.header.Get(api.PushTaskIDHeader), p.header.Get(api.PushAttemptHeader)
		w, ok := want[id]
		if !ok {
			t.Fatalf("push of unknown task %q", id)
		}
		if w[0] == "" {
			w[0] = traceC[0] // the endpoint's own header, for a task without a trace context
		}
		if got := p.header.Values("traceparent"); len(got) != 1 || got[0] != w[0] || p.header.Get("tracestate") != w[1] {
			t.Errorf("push of %s, attempt %s: traceparent %q, tracestate %q; want %q, %q", id, attempt, got, p.header.Get("tracestate"), w[0], w[1])
		}
		if attempts[id] == nil {
			attempts[id] = map[string]bool{}
		}
		attempts[id][attempt] = true
	}
	for id := range want {
		if !attempts[id]["1"] || !attempts[id]["2"] {
			t.Errorf("task %s: pushes of attempts %v, want 1 and 2", id, attempts[id])
		}
		waitPushed(t, s, "hooks", id, "gone", 30*time.Second)
	}
}
