package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hourglass-go/hourglass/httpapi"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// do serves one request on h and returns the recorded answer.
func do(h http.Handler, method, path, body string, header ...string) *httptest.ResponseRecorder {
	var r *http.Request
	if body == "" {
		r = httptest.NewRequest(method, path, nil)
	} else {
		r = httptest.NewRequest(method, path, strings.NewReader(body))
	}
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	contract(h).ServeHTTP(w, r)
	return w
}

// errorText returns the error of an error body, failing the test if the
// body is not {"error":"hourglass: ..."} in JSON.
func errorText(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	var body map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatalf("error body %q is not JSON: %v", w.Body.String(), err)
	}
	msg, ok := body["error"].(string)
	if !ok || len(body) != 1 || !strings.HasPrefix(msg, "hourglass: ") {
		t.Fatalf("error body %s, want {\"error\":\"hourglass: ...\"}", w.Body.String())
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	return msg
}

// newServer returns a ready Server over a fake broker.
func newServer(t *testing.T, opts httpapi.Options) (*httpapi.Server, *fakeBroker) {
	f := &fakeBroker{t: t}
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	s := checked(t, httpapi.New(opts))
	s.SetService(service.New(f))
	return s, f
}

// TestWireErrors sends bad requests that the HTTP layer must refuse on
// its own: each answers its status and a JSON error naming the problem,
// and none reaches the broker.
func TestWireErrors(t *testing.T) {
	big := `{"payload":"` + strings.Repeat("x", 2000+httpapi.Envelope) + `"}`
	const task = "/v1/queues/q/tasks"
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		want                     string
	}{
		{"malformed JSON", "POST", task, `{"id":`, 400, "malformed JSON"},
		{"bad syntax", "POST", task, `{"id" "x"}`, 400, "malformed JSON"},
		{"not an object", "POST", task, `[1,2]`, 400, "want a JSON object"},
		{"trailing data", "POST", task, `{} {}`, 400, "trailing data"},
		{"unknown field", "POST", task, `{"id":"a","colour":"red"}`, 400, `unknown field "colour"`},
		{"number delay", "POST", task, `{"delay":5}`, 400, "not a number"},
		{"number ttr", "POST", task, `{"ttr":1000000000}`, 400, "not a number"},
		{"bad duration", "POST", task, `{"delay":"5 seconds"}`, 400, `bad duration "5 seconds"`},
		{"bad time", "POST", task, `{"at":"tomorrow"}`, 400, `bad time "tomorrow"`},
		{"number time", "POST", task, `{"at":1700000000}`, 400, "RFC 3339 string"},
		{"delay and at", "POST", task, `{"delay":"1s","at":"2030-01-01T00:00:00Z"}`, 400, "delay or at"},
		{"zero delay and at", "POST", task, `{"delay":"0s","at":"2030-01-01T00:00:00Z"}`, 400, "delay or at"},
		{"negative priority", "POST", task, `{"priority":-1}`, 400, `"priority"`},
		{"huge priority", "POST", task, `{"priority":4294967296}`, 400, "4294967295"},
		{"fractional priority", "POST", task, `{"priority":1.5}`, 400, `"priority"`},
		{"string priority", "POST", task, `{"priority":"1"}`, 400, `"priority"`},
		{"string replace", "POST", task, `{"replace":"yes"}`, 400, `"replace"`},
		{"oversize put", "POST", task, big, 413, "request body over"},

		{"batch not an object", "POST", task + ":batch", `[]`, 400, "want a JSON object"},
		{"batch empty body", "POST", task + ":batch", ``, 400, "empty body"},
		{"batch unknown field", "POST", task + ":batch", `{"tasks":[],"x":1}`, 400, `unknown field "x"`},
		{"batch items not objects", "POST", task + ":batch", `{"tasks":{}}`, 400, `"tasks"`},
		{"batch too many", "POST", task + ":batch", `{"tasks":[` + strings.Repeat(`{},`, 1000) + `{}]}`, 400, "1001 tasks"},

		{"reserve max 0", "POST", "/v1/queues/q/reserve", `{"max":0}`, 400, "max 0"},
		{"reserve max 1001", "POST", "/v1/queues/q/reserve", `{"max":1001}`, 400, "max 1001"},
		{"reserve max negative", "POST", "/v1/queues/q/reserve", `{"max":-1}`, 400, "max -1"},
		{"reserve wait number", "POST", "/v1/queues/q/reserve", `{"wait":30}`, 400, "not a number"},
		{"reserve wait too long", "POST", "/v1/queues/q/reserve", `{"wait":"5m1s"}`, 400, "wait 5m1s"},
		{"reserve wait negative", "POST", "/v1/queues/q/reserve", `{"wait":"-1s"}`, 400, "wait -1s"},
		{"reserve unknown field", "POST", "/v1/queues/q/reserve", `{"count":3}`, 400, `unknown field "count"`},

		{"ack no body", "POST", task + "/a/ack", ``, 400, "empty body"},
		{"ack no lease", "POST", task + "/a/ack", `{}`, 400, "lease missing"},
		{"ack empty lease", "POST", task + "/a/ack", `{"lease":""}`, 400, "lease missing"},
		{"touch no lease", "POST", task + "/a/touch", `{}`, 400, "lease missing"},
		{"nack no lease", "POST", task + "/a/nack", `{"delay":"1s"}`, 400, "lease missing"},
		{"nack number delay", "POST", task + "/a/nack", `{"lease":"l","delay":1}`, 400, "not a number"},
		{"ack oversize", "POST", task + "/a/ack", `{"lease":"` + strings.Repeat("l", 70<<10) + `"}`, 413, "request body over"},
		{"kick with fields", "POST", task + "/a/kick", `{"force":true}`, 400, `unknown field "force"`},

		{"schedule no body", "PUT", "/v1/schedules/s", ``, 400, "empty body"},
		{"schedule unknown field", "PUT", "/v1/schedules/s", `{"cron":"@daily","queue":"q","every":"1h"}`, 400, `unknown field "every"`},

		{"no such route", "GET", "/v1/nothing", ``, 404, "no such route"},
		{"no such route outside v1", "GET", "/", ``, 404, "no such route"},
		{"method not allowed", "PATCH", task + "/a", ``, 405, "method not allowed"},
		{"method not allowed on tasks", "PUT", task, ``, 405, "method not allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, f := newServer(t, httpapi.Options{MaxPayload: 1000})
			w := do(s, tc.method, tc.path, tc.body)
			if w.Code != tc.status {
				t.Errorf("status %d, want %d; body %s", w.Code, tc.status, w.Body.String())
			}
			if msg := errorText(t, w); !strings.Contains(msg, tc.want) {
				t.Errorf("error %q does not say %q", msg, tc.want)
			}
			if n := f.Calls(); n != 0 {
				t.Errorf("%d broker calls, want none", n)
			}
		})
	}
}

// TestMethodNotAllowedAllow checks the Allow header of a 405.
func TestMethodNotAllowedAllow(t *testing.T) {
	s, _ := newServer(t, httpapi.Options{})
	w := do(s, "PUT", "/v1/queues/q/tasks/a", "")
	if got := w.Header().Get("Allow"); got != "GET, DELETE, HEAD" {
		t.Errorf("Allow %q", got)
	}
}

// TestBrokerErrors checks that each error of the broker answers its
// status with the broker's text.
func TestBrokerErrors(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
	}{
		{fmt.Errorf("%w: queue name %q: only letters", task.ErrInvalid, "a b"), 400},
		{task.ErrNotFound, 404},
		{task.ErrNoSchedule, 404},
		{task.ErrLease, 409},
		{task.ErrState, 409},
		{fmt.Errorf("%w: 2000 bytes", task.ErrTooLarge), 413},
		{task.ErrClosed, 503},
		{errors.New("disk on fire"), 500},
	} {
		s, f := newServer(t, httpapi.Options{})
		f.lease = func(op, queue, id, lease string, delay time.Duration) (task.Task, error) {
			return task.Task{}, tc.err
		}
		w := do(s, "POST", "/v1/queues/q/tasks/a/ack", `{"lease":"L"}`)
		if w.Code != tc.status {
			t.Errorf("%v: status %d, want %d", tc.err, w.Code, tc.status)
		}
		if msg := errorText(t, w); !strings.Contains(msg, strings.TrimPrefix(tc.err.Error(), "hourglass: ")) {
			t.Errorf("%v: error %q", tc.err, msg)
		}
	}
}

// TestAuth checks the bearer token: /v1 and /metrics need it, answering
// 401 in JSON without it; health and readiness do not, nor /metrics with
// Options.MetricsWithoutToken.
func TestAuth(t *testing.T) {
	s, f := newServer(t, httpapi.Options{Token: "s3cret", Gatherer: prometheus.NewRegistry()})
	f.queues = func() []task.QueueStats { return nil }
	for _, tc := range []struct {
		name, header string
		status       int
	}{
		{"none", "", 401},
		{"wrong", "Bearer guess", 401},
		{"prefix of the token", "Bearer s3cre", 401},
		{"longer", "Bearer s3cret2", 401},
		{"other scheme", "Basic s3cret", 401},
		{"no scheme", "s3cret", 401},
		{"right", "Bearer s3cret", 200},
		{"scheme in lower case", "bearer s3cret", 200},
	} {
		w := do(s, "GET", "/v1/queues", "", "Authorization", tc.header)
		if w.Code != tc.status {
			t.Errorf("%s: status %d, want %d", tc.name, w.Code, tc.status)
		}
		if w.Code == 401 {
			errorText(t, w)
			if w.Header().Get("WWW-Authenticate") == "" {
				t.Errorf("%s: no WWW-Authenticate", tc.name)
			}
		}
	}
	// Refused before anything else, unknown routes included.
	for _, path := range []string{"/v1/queues/q/tasks", "/v1/nothing"} {
		if w := do(s, "POST", path, `{"bad json`); w.Code != 401 {
			t.Errorf("POST %s without token: %d, want 401", path, w.Code)
		}
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if w := do(s, "GET", path, ""); w.Code != 200 {
			t.Errorf("GET %s without token: %d, want 200", path, w.Code)
		}
	}
	if w := do(s, "GET", "/metrics", ""); w.Code != 401 || w.Header().Get("WWW-Authenticate") == "" {
		t.Errorf("GET /metrics without token: %d, want 401", w.Code)
	} else {
		errorText(t, w)
	}
	if w := do(s, "GET", "/metrics", "", "Authorization", "Bearer s3cret"); w.Code != 200 {
		t.Errorf("GET /metrics with the token: %d, want 200", w.Code)
	}
	open, _ := newServer(t, httpapi.Options{Token: "s3cret", MetricsWithoutToken: true, Gatherer: prometheus.NewRegistry()})
	if w := do(open, "GET", "/metrics", ""); w.Code != 200 {
		t.Errorf("GET /metrics without token, MetricsWithoutToken: %d, want 200", w.Code)
	}
}

// TestReadiness walks a server through its life: listening before the
// broker is set (healthz 200, readyz and /v1 503), ready, then draining.
func TestReadiness(t *testing.T) {
	s := httpapi.New(httpapi.Options{Gatherer: prometheus.NewRegistry()})
	check := func(path string, status int) {
		t.Helper()
		w := do(s, "GET", path, "")
		if w.Code != status {
			t.Errorf("GET %s: %d, want %d", path, w.Code, status)
		}
		if status >= 400 {
			errorText(t, w)
		}
	}
	check("/healthz", 200)
	check("/readyz", 503)
	check("/v1/queues", 503)
	if w := do(s, "POST", "/v1/queues/q/tasks", `{}`); w.Code != 503 || !strings.Contains(errorText(t, w), "recovering") {
		t.Errorf("put before ready: %d %s", w.Code, w.Body.String())
	}
	f := &fakeBroker{t: t, queues: func() []task.QueueStats { return nil }}
	s.SetService(service.New(f))
	check("/readyz", 200)
	check("/v1/queues", 200)
	s.Drain()
	check("/readyz", 503)
	check("/healthz", 200)
	check("/v1/queues", 200) // in-flight and late requests are still served
}

// TestMetrics checks that /metrics serves the given gatherer in the
// Prometheus text format.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "hourglass_test_total", Help: "A test."})
	reg.MustRegister(c)
	c.Add(3)
	s, _ := newServer(t, httpapi.Options{Gatherer: reg})
	w := do(s, "GET", "/metrics", "")
	if w.Code != 200 || !strings.Contains(w.Body.String(), "hourglass_test_total 3") {
		t.Errorf("GET /metrics: %d\n%s", w.Code, w.Body.String())
	}
}

// TestReserveDrain checks that Drain ends a long poll at once with an
// empty answer, and that a client going away ends it too.
func TestReserveDrain(t *testing.T) {
	s, f := newServer(t, httpapi.Options{})
	started := make(chan struct{}, 1)
	f.reserve = func(ctx context.Context, queue string, max int, wait time.Duration) ([]task.Task, error) {
		if wait != 5*time.Minute || max != 1 {
			t.Errorf("Reserve(max %d, wait %s)", max, wait)
		}
		started <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- do(s, "POST", "/v1/queues/q/reserve", `{"wait":"5m"}`) }()
	<-started
	s.Drain()
	w := <-done
	if w.Code != 200 || strings.TrimSpace(w.Body.String()) != `{"tasks":[]}` {
		t.Errorf("drained reserve: %d %s", w.Code, w.Body.String())
	}

	// A client that goes away: the broker sees the context end, and
	// nothing is written.
	s, f = newServer(t, httpapi.Options{})
	f.reserve = func(ctx context.Context, queue string, max int, wait time.Duration) ([]task.Task, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := httptest.NewRequestWithContext(ctx, "POST", "/v1/queues/q/reserve", strings.NewReader(`{"wait":"1m"}`))
	rec := httptest.NewRecorder()
	go func() { s.ServeHTTP(rec, r); close(done) }()
	<-started
	cancel()
	<-done
	if rec.Body.Len() != 0 {
		t.Errorf("answer to a client gone: %s", rec.Body.String())
	}
}
