package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/broker"
	"github.com/hourglass-go/hourglass/httpapi"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/store/pebblestore"
	"github.com/hourglass-go/hourglass/task"
	"github.com/prometheus/client_golang/prometheus"
)

// live is a Server over a real broker on a Pebble store in a directory.
type live struct {
	t   *testing.T
	dir string
	cfg broker.Config
	st  *pebblestore.Store
	b   *broker.Broker
	s   *httpapi.Server
	reg *prometheus.Registry
}

// quiet is a logger that drops everything.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// newLive opens a broker on a fresh directory with cfg and serves it.
func newLive(t *testing.T, cfg broker.Config) *live {
	l := &live{t: t, dir: t.TempDir(), cfg: cfg}
	l.open()
	t.Cleanup(l.close)
	return l
}

// open opens the store and the broker on l.dir and a new Server over them.
func (l *live) open() {
	l.t.Helper()
	st, err := pebblestore.Open(l.dir, pebblestore.Options{Logger: quiet, CacheSize: 1 << 20, MemTableSize: 1 << 20})
	if err != nil {
		l.t.Fatal(err)
	}
	l.reg = prometheus.NewRegistry()
	cfg := l.cfg
	cfg.Logger, cfg.Registerer = quiet, l.reg
	b, err := broker.Open(st, cfg)
	if err != nil {
		st.Close()
		l.t.Fatal(err)
	}
	l.st, l.b = st, b
	l.s = checked(l.t, httpapi.New(httpapi.Options{MaxPayload: cfg.MaxPayload, Gatherer: l.reg, Logger: quiet}))
	l.s.SetService(service.New(b))
}

// close closes the broker and the store, once.
func (l *live) close() {
	if l.b != nil {
		l.b.Close()
		l.st.Close()
		l.b = nil
	}
}

// restart closes everything and opens it again on the same directory.
func (l *live) restart() {
	l.close()
	l.open()
}

// call serves a request and checks its status; it decodes the answer
// into out when out is not nil.
func (l *live) call(method, path, body string, status int, out any) *httptest.ResponseRecorder {
	l.t.Helper()
	w := do(l.s, method, path, body)
	if w.Code != status {
		l.t.Fatalf("%s %s %s: status %d, want %d; %s", method, path, body, w.Code, status, w.Body.String())
	}
	if status >= 400 {
		errorText(l.t, w)
	}
	if out != nil {
		if err := json.Unmarshal(w.Body.Bytes(), out); err != nil {
			l.t.Fatalf("%s %s: %v in %s", method, path, err, w.Body.String())
		}
	}
	return w
}

// queues returns the queue listing as JSON text, to compare states.
func (l *live) queues() string {
	return strings.TrimSpace(l.call("GET", "/v1/queues", "", 200, nil).Body.String())
}

// TestLiveTaskLife puts, reads, reserves, touches and acks a task over
// the real broker, with idempotent and replacing puts, and checks that
// the task survives a restart with the same job id.
func TestLiveTaskLife(t *testing.T) {
	l := newLive(t, broker.Config{})
	var a, b api.Task
	w := l.call("POST", "/v1/queues/mail/tasks", `{"id":"m1","payload":{"to":"a@b"},"priority":5,"ttr":"30s","max_attempts":3}`, 201, &a)
	if w.Header().Get("Location") != "/v1/queues/mail/tasks/m1" {
		t.Errorf("Location %q", w.Header().Get("Location"))
	}
	if a.ID != "m1" || a.JobID == 0 || a.Queue != "mail" || a.State != "ready" || string(a.Payload) != `{"to":"a@b"}` ||
		a.Priority != 5 || a.TTR.D() != 30*time.Second || a.MaxAttempts != 3 || a.Attempts != 0 || a.Lease != "" {
		t.Errorf("put answered %+v", a)
	}
	if a.Due.Location() != time.UTC || a.Created.IsZero() || a.Due.Before(a.Created) {
		t.Errorf("due %v, created %v", a.Due, a.Created)
	}
	// The same id again: the task as it is, unchanged.
	l.call("POST", "/v1/queues/mail/tasks", `{"id":"m1","payload":"other"}`, 200, &b)
	if b.JobID != a.JobID || string(b.Payload) != `{"to":"a@b"}` {
		t.Errorf("idempotent put changed the task: %+v", b)
	}
	// With replace: the new one.
	l.call("POST", "/v1/queues/mail/tasks", `{"id":"m1","payload":"other","replace":true}`, 200, &b)
	if string(b.Payload) != `"other"` || b.Priority != api.DefaultPriority {
		t.Errorf("replaced task %+v", b)
	}
	// Without an id, the server makes one.
	var c api.Task
	l.call("POST", "/v1/queues/mail/tasks", ``, 201, &c)
	if c.ID == "" || c.JobID == a.JobID || string(c.Payload) != "null" {
		t.Errorf("task without id: %+v", c)
	}

	l.restart()
	var got api.Task
	l.call("GET", "/v1/queues/mail/tasks/m1", "", 200, &got)
	if got.JobID != b.JobID || string(got.Payload) != `"other"` || !got.Due.Equal(b.Due) {
		t.Errorf("after restart %+v, want %+v", got, b)
	}

	var res api.ReserveResponse
	l.call("POST", "/v1/queues/mail/reserve", `{"max":1}`, 200, &res)
	if len(res.Tasks) != 1 || res.Tasks[0].ID != "m1" || res.Tasks[0].Lease == "" || res.Tasks[0].Attempts != 1 || res.Tasks[0].State != "reserved" {
		t.Fatalf("reserve answered %+v", res)
	}
	lease := res.Tasks[0].Lease
	l.call("GET", "/v1/queues/mail/tasks/m1", "", 200, &got)
	if got.Lease != "" || got.State != "reserved" {
		t.Errorf("GET of a reserved task: %+v (the lease must not show)", got)
	}
	var touched api.Task
	l.call("POST", "/v1/queues/mail/tasks/m1/touch", `{"lease":"`+lease+`"}`, 200, &touched)
	if touched.Lease == "" || touched.State != "reserved" {
		t.Errorf("touch answered %+v", touched)
	}
	l.call("POST", "/v1/queues/mail/tasks/m1/ack", `{"lease":"not-it"}`, 409, nil)
	l.call("POST", "/v1/queues/mail/tasks/m1/ack", `{"lease":"`+touched.Lease+`"}`, 204, nil)
	var fin api.FinishedRecord
	l.call("GET", "/v1/queues/mail/tasks/m1", "", 200, &fin) // its finished record, from the history
	if fin.State != api.StateFinished || fin.Outcome != api.FinishedAcked {
		t.Errorf("GET after ack answered %+v", fin)
	}
	l.call("POST", "/v1/queues/mail/tasks/m1/ack", `{"lease":"`+touched.Lease+`"}`, 404, nil)
	l.call("DELETE", "/v1/queues/mail/tasks/"+c.ID, "", 204, nil)
	l.call("DELETE", "/v1/queues/mail/tasks/"+c.ID, "", 404, nil)
	l.restart()
	fin = api.FinishedRecord{}
	l.call("GET", "/v1/queues/mail/tasks/m1", "", 200, &fin)
	if fin.State != api.StateFinished || fin.Outcome != api.FinishedAcked {
		t.Errorf("GET after ack and a restart answered %+v", fin)
	}
	l.call("GET", "/v1/queues/mail/tasks/"+c.ID, "", 200, &fin)
	if fin.State != api.StateFinished || fin.Outcome != api.FinishedDeleted {
		t.Errorf("GET after delete and a restart answered %+v", fin)
	}
}

// TestLiveBadInputChangesNothing sends requests the broker refuses (and
// some the wire refuses) and checks their statuses and that the queues
// are as before.
func TestLiveBadInputChangesNothing(t *testing.T) {
	l := newLive(t, broker.Config{MaxPayload: 100, MaxDelay: time.Hour})
	l.call("POST", "/v1/queues/q/tasks", `{"id":"x","delay":"1m"}`, 201, nil)
	before := l.queues()
	for _, tc := range []struct {
		method, path, body string
		status             int
	}{
		{"POST", "/v1/queues/bad%20name/tasks", `{}`, 400},
		{"POST", "/v1/queues/q/tasks", `{"id":"has space"}`, 400},
		{"POST", "/v1/queues/q/tasks", `{"id":"` + strings.Repeat("i", 201) + `"}`, 400},
		{"POST", "/v1/queues/q/tasks", `{"delay":"1h1s"}`, 400},
		{"POST", "/v1/queues/q/tasks", `{"at":"2999-01-01T00:00:00Z"}`, 400},
		{"POST", "/v1/queues/q/tasks", `{"delay":"-1s"}`, 400},
		{"POST", "/v1/queues/q/tasks", `{"ttr":"-1s"}`, 400},
		{"POST", "/v1/queues/q/tasks", `{"max_attempts":-2}`, 400},
		{"POST", "/v1/queues/q/tasks", `{"priority":-1}`, 400},
		{"POST", "/v1/queues/q/tasks", `{"delay":"1s","at":"2030-01-01T00:00:00Z"}`, 400},
		{"POST", "/v1/queues/q/tasks", `{"payload":"` + strings.Repeat("p", 100) + `"}`, 413},
		{"POST", "/v1/queues/q/tasks", `{"payload":"` + strings.Repeat("p", 70<<10) + `"}`, 413},
		{"POST", "/v1/queues/q/tasks", `{"payload":{"x":1},"x":2}`, 400},
		{"POST", "/v1/queues/q/tasks/x/ack", `{"lease":"nope"}`, 409},
		{"POST", "/v1/queues/q/tasks/x/nack", `{"lease":"nope"}`, 409},
		{"POST", "/v1/queues/q/tasks/x/touch", `{"lease":"nope"}`, 409},
		{"POST", "/v1/queues/q/tasks/x/kick", ``, 409},
		{"POST", "/v1/queues/q/tasks/y/ack", `{"lease":"nope"}`, 404},
		{"POST", "/v1/queues/q/tasks/y/kick", ``, 404},
		{"DELETE", "/v1/queues/q/tasks/y", ``, 404},
		{"POST", "/v1/queues/q/reserve", `{"max":0}`, 400},
		{"PUT", "/v1/schedules/s", `{"cron":"every tuesday","queue":"q"}`, 400},
		{"PUT", "/v1/schedules/s", `{"cron":"@daily","queue":"q","timezone":"Mars/Olympus"}`, 400},
		{"PUT", "/v1/schedules/s", `{"cron":"@daily","queue":"no such/queue"}`, 400},
		{"DELETE", "/v1/schedules/s", ``, 404},
	} {
		l.call(tc.method, tc.path, tc.body, tc.status, nil)
	}
	if after := l.queues(); after != before {
		t.Errorf("queues changed:\nbefore %s\nafter  %s", before, after)
	}
	var scheds api.SchedulesResponse
	if l.call("GET", "/v1/schedules", "", 200, &scheds); len(scheds.Schedules) != 0 {
		t.Errorf("schedules %+v", scheds)
	}
}

// TestLiveOrderAndRetries checks reserve's order (priority, then due,
// then put order), nack with and without attempts left, dead and kick.
func TestLiveOrderAndRetries(t *testing.T) {
	l := newLive(t, broker.Config{})
	for _, body := range []string{
		`{"id":"p9","priority":9}`,
		`{"id":"p1a","priority":1}`,
		`{"id":"p1b","priority":1}`,
		`{"id":"p0","priority":0,"max_attempts":1}`,
	} {
		l.call("POST", "/v1/queues/q/tasks", body, 201, nil)
	}
	var res api.ReserveResponse
	l.call("POST", "/v1/queues/q/reserve", `{"max":10}`, 200, &res)
	var ids []string
	leases := map[string]string{}
	for _, t := range res.Tasks {
		ids = append(ids, t.ID)
		leases[t.ID] = t.Lease
	}
	if got := strings.Join(ids, ","); got != "p0,p1a,p1b,p9" {
		t.Fatalf("reserved %s, want p0,p1a,p1b,p9", got)
	}
	// p0 has one attempt: a nack makes it dead; kick makes it ready.
	l.call("POST", "/v1/queues/q/tasks/p0/nack", `{"lease":"`+leases["p0"]+`"}`, 200, nil)
	var got api.Task
	if l.call("GET", "/v1/queues/q/tasks/p0", "", 200, &got); got.State != "dead" {
		t.Errorf("p0 after its last nack: %s", got.State)
	}
	l.call("POST", "/v1/queues/q/tasks/p0/kick", ``, 204, nil)
	if l.call("GET", "/v1/queues/q/tasks/p0", "", 200, &got); got.State != "ready" {
		t.Errorf("p0 after kick: %s", got.State)
	}
	// p9 nacked with a delay is delayed, then ready again.
	l.call("POST", "/v1/queues/q/tasks/p9/nack", `{"lease":"`+leases["p9"]+`","delay":"1h"}`, 200, nil)
	if l.call("GET", "/v1/queues/q/tasks/p9", "", 200, &got); got.State != "delayed" || got.Attempts != 1 || time.Until(got.Due) < 59*time.Minute {
		t.Errorf("p9 after nack with delay: %+v", got)
	}
	want := `{"queues":[{"name":"q","delayed":1,"ready":1,"reserved":2,"dead":0}]}`
	if got := l.queues(); got != want {
		t.Errorf("queues\n got %s\nwant %s", got, want)
	}
}

// TestLiveLongPoll checks that a waiting reserve answers as soon as a
// task falls due, never before its due time, and that a batch with a bad
// item puts the others.
func TestLiveLongPoll(t *testing.T) {
	l := newLive(t, broker.Config{})
	var wg sync.WaitGroup
	var res api.ReserveResponse
	wg.Go(func() { l.call("POST", "/v1/queues/q/reserve", `{"wait":"10s","max":5}`, 200, &res) })
	var batch api.BatchResponse
	l.call("POST", "/v1/queues/q/tasks:batch", `{"tasks":[{"id":"soon","delay":"50ms"},{"id":"bad id"},{"id":"later","delay":"1h"}]}`, 200, &batch)
	if len(batch.Results) != 3 || batch.Results[0].Task == nil || batch.Results[1].Error == "" || batch.Results[2].Task == nil {
		t.Fatalf("batch answered %+v", batch)
	}
	due := batch.Results[0].Task.Due
	start := time.Now()
	wg.Wait()
	if len(res.Tasks) != 1 || res.Tasks[0].ID != "soon" {
		t.Fatalf("reserve answered %+v", res)
	}
	if now := time.Now(); now.Before(due) {
		t.Errorf("delivered at %v, before its due time %v", now, due)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("long poll answered after %v", took)
	}
	// Nothing ready: a wait of 0 answers at once, empty.
	l.call("POST", "/v1/queues/q/reserve", `{}`, 200, &res)
	if len(res.Tasks) != 0 {
		t.Errorf("reserve with nothing ready: %+v", res)
	}
}

// TestLiveSchedules creates, lists and deletes a schedule, across a
// restart.
func TestLiveSchedules(t *testing.T) {
	l := newLive(t, broker.Config{})
	var s api.Schedule
	l.call("PUT", "/v1/schedules/nightly", `{"cron":"0 3 * * *","queue":"reports","payload":{"kind":"daily"},"timezone":"UTC"}`, 200, &s)
	if s.Name != "nightly" || s.Queue != "reports" || s.Next.IsZero() || s.Next.Hour() != 3 || string(s.Payload) != `{"kind":"daily"}` {
		t.Errorf("schedule %+v", s)
	}
	l.restart()
	var list api.SchedulesResponse
	l.call("GET", "/v1/schedules", "", 200, &list)
	if len(list.Schedules) != 1 || list.Schedules[0].Name != "nightly" || !list.Schedules[0].Next.Equal(s.Next) {
		t.Errorf("schedules after restart %+v", list)
	}
	l.call("DELETE", "/v1/schedules/nightly", "", 204, nil)
	l.call("DELETE", "/v1/schedules/nightly", "", 404, nil)
}

// TestLiveReadiness checks /readyz and /metrics over the real broker: 200
// while it serves, 503 once it is closed.
func TestLiveReadiness(t *testing.T) {
	l := newLive(t, broker.Config{})
	l.call("POST", "/v1/queues/q/tasks", `{}`, 201, nil)
	l.call("GET", "/readyz", "", 200, nil)
	if w := l.call("GET", "/metrics", "", 200, nil); !strings.Contains(w.Body.String(), "hourglass_") {
		t.Errorf("metrics without hourglass_ series:\n%.500s", w.Body.String())
	}
	l.b.Close()
	l.call("GET", "/readyz", "", 503, nil)
	l.call("POST", "/v1/queues/q/tasks", `{}`, 503, nil)
}

// TestPayload_BytesOfAnotherProtocol checks that a payload put as bytes
// (the beanstalkd protocol takes any) that are not JSON in valid UTF-8 is
// answered as a JSON string in valid UTF-8, so that a strict reader can
// parse the answer that carries it.
func TestPayload_BytesOfAnotherProtocol(t *testing.T) {
	l := newLive(t, broker.Config{})
	for i, p := range []string{"caf\xe9", `"caf` + "\xe9" + `"`, "plain text", "\xff\xfe"} {
		id := fmt.Sprintf("b%d", i)
		if _, _, err := service.New(l.b).Put(context.Background(), "q", task.PutRequest{ID: id, Payload: []byte(p)}); err != nil {
			t.Fatal(err)
		}
		w := do(l.s, "GET", "/v1/queues/q/tasks/"+id, "")
		if w.Code != 200 || !utf8.Valid(w.Body.Bytes()) || !json.Valid(w.Body.Bytes()) {
			t.Errorf("payload %q answered %d %q: want valid JSON in valid UTF-8", p, w.Code, w.Body.String())
		}
	}
}
