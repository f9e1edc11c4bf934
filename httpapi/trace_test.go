package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/broker"
)

const (
	parentA = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	parentB = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
)

// TestLiveTrace: a put's traceparent and tracestate headers are kept with
// the task and shown in the answers that carry it, a reserve's among
// them; tracestate headers are joined, a repeated traceparent is ignored,
// a malformed one dropped without failing the put; the body's fields win
// over the headers; in a batch the request's headers stand for the items
// without their own; and the trace context survives a restart.
func TestLiveTrace(t *testing.T) {
	l := newLive(t, broker.Config{})
	put := func(path, body string, header http.Header, out any) {
		t.Helper()
		r := httptest.NewRequest("POST", path, strings.NewReader(body))
		r.Header = header
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		l.s.ServeHTTP(w, r)
		if w.Code != 201 && w.Code != 200 {
			t.Fatalf("POST %s %s: status %d; %s", path, body, w.Code, w.Body.String())
		}
		if err := json.Unmarshal(w.Body.Bytes(), out); err != nil {
			t.Fatal(err)
		}
	}
	check := func(what string, got api.Task, parent, state string) {
		t.Helper()
		if got.Traceparent != parent || got.Tracestate != state {
			t.Errorf("%s (%s): traceparent %q, tracestate %q; want %q, %q", what, got.ID, got.Traceparent, got.Tracestate, parent, state)
		}
	}
	want := map[string][2]string{}
	for _, c := range []struct {
		id            string
		header        http.Header
		body          string
		parent, state string
	}{
		{"h", http.Header{"Traceparent": {parentA}, "Tracestate": {"a=1", "b=2"}}, `{"id":"h"}`, parentA, "a=1,b=2"},
		{"twice", http.Header{"Traceparent": {parentA, parentB}}, `{"id":"twice"}`, "", ""},
		{"bad", http.Header{"Traceparent": {strings.ToUpper(parentA)}, "Tracestate": {"a=1"}}, `{"id":"bad"}`, "", ""},
		{"badstate", http.Header{"Traceparent": {parentA}, "Tracestate": {"A=1"}}, `{"id":"badstate"}`, parentA, ""},
		{"body", http.Header{"Traceparent": {parentA}}, `{"id":"body","traceparent":"` + parentB + `","tracestate":"x=y"}`, parentB, "x=y"},
	} {
		var got api.Task
		put("/v1/queues/q/tasks", c.body, c.header, &got)
		check("put "+c.id, got, c.parent, c.state)
		want[c.id] = [2]string{c.parent, c.state}
	}
	var batch api.BatchResponse
	put("/v1/queues/q/tasks:batch", `{"tasks":[{"id":"b1"},{"id":"b2","traceparent":"`+parentB+`"},{"id":"b3","traceparent":"junk"}]}`,
		http.Header{"Traceparent": {parentA}, "Tracestate": {"s=1"}}, &batch)
	for i, w := range [][2]string{{parentA, "s=1"}, {parentB, ""}, {"", ""}} {
		if batch.Results[i].Task == nil {
			t.Fatalf("batch item %d: %s", i, batch.Results[i].Error)
		}
		check("batch put", *batch.Results[i].Task, w[0], w[1])
		want[batch.Results[i].Task.ID] = w
	}
	l.restart()
	var res api.ReserveResponse
	l.call("POST", "/v1/queues/q/reserve", `{"max":100}`, 200, &res)
	if len(res.Tasks) != len(want) {
		t.Fatalf("reserve: %d tasks, want %d", len(res.Tasks), len(want))
	}
	for _, tk := range res.Tasks {
		check("reserve after a restart", tk, want[tk.ID][0], want[tk.ID][1])
	}
}
