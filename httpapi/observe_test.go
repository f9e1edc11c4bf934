package httpapi_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/broker"
	"github.com/hourglass-go/hourglass/httpapi"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/store/memstore"
	"github.com/prometheus/client_golang/prometheus"
)

// observed is a Server over a real broker on a memstore, for the routes
// of api/observe.go. Its helpers are its own, apart from the other tests'.
type observed struct {
	t     *testing.T
	b     *broker.Broker
	s     *httpapi.Server
	token string
}

// newObserved opens a broker on a fresh memstore and serves it with the
// token (none for "").
func newObserved(t *testing.T, token string) *observed {
	t.Helper()
	st := memstore.New()
	log := slog.New(slog.DiscardHandler)
	b, err := broker.Open(st, broker.Config{Logger: log, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close(); st.Close() })
	s := checked(t, httpapi.New(httpapi.Options{Token: token, Gatherer: prometheus.NewRegistry(), Logger: log}))
	s.SetService(service.New(b))
	return &observed{t: t, b: b, s: s, token: token}
}

// serve answers one request, with the token when o has one.
func (o *observed) serve(method, path, body string) *httptest.ResponseRecorder {
	if o.token != "" {
		return do(o.s, method, path, body, "Authorization", "Bearer "+o.token)
	}
	return do(o.s, method, path, body)
}

// call serves a request, checks its status and decodes the answer into
// out unless out is nil. For an error status it checks the error body
// and returns its message.
func (o *observed) call(method, path, body string, status int, out any) string {
	o.t.Helper()
	w := o.serve(method, path, body)
	if w.Code != status {
		o.t.Fatalf("%s %s %s: status %d, want %d; %s", method, path, body, w.Code, status, w.Body.String())
	}
	if ct := w.Header().Get("Content-Type"); w.Code != http.StatusNoContent && ct != "application/json" {
		o.t.Errorf("%s %s: Content-Type %q", method, path, ct)
	}
	if status >= 400 {
		var e map[string]string
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || len(e) != 1 || !strings.HasPrefix(e["error"], "hourglass: ") {
			o.t.Fatalf("%s %s: error body %q, want {\"error\":\"hourglass: ...\"}", method, path, w.Body.String())
		}
		return e["error"]
	}
	if out != nil {
		dec := json.NewDecoder(w.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(out); err != nil {
			o.t.Fatalf("%s %s: %v in %s", method, path, err, w.Body.String())
		}
	}
	return ""
}

// fourStates puts into queue q one delayed task "d", two ready "r1" and
// "r2", one reserved "v" and one dead "x", in that order of job ids.
func (o *observed) fourStates() {
	o.t.Helper()
	o.call("POST", "/v1/queues/q/tasks", `{"id":"d","delay":"1h","payload":{"big":"x"}}`, 201, nil)
	o.call("POST", "/v1/queues/q/tasks", `{"id":"v","priority":0}`, 201, nil)
	o.call("POST", "/v1/queues/q/tasks", `{"id":"x","priority":1,"max_attempts":1}`, 201, nil)
	o.call("POST", "/v1/queues/q/tasks", `{"id":"r1"}`, 201, nil)
	o.call("POST", "/v1/queues/q/tasks", `{"id":"r2"}`, 201, nil)
	var res api.ReserveResponse
	o.call("POST", "/v1/queues/q/reserve", `{"max":2}`, 200, &res)
	if len(res.Tasks) != 2 || res.Tasks[1].ID != "x" {
		o.t.Fatalf("reserved %+v, want v and x", res.Tasks)
	}
	o.call("POST", "/v1/queues/q/tasks/x/nack", `{"lease":"`+res.Tasks[1].Lease+`"}`, 200, nil)
}

// ids lists the ids and states of tasks as "id:state,...".
func ids(tasks []api.Task) string {
	var s []string
	for _, t := range tasks {
		s = append(s, t.ID+":"+t.State)
	}
	return strings.Join(s, ",")
}

// TestObserveListTasks lists a queue's tasks by state and in pages, and
// refuses a bad state, cursor or limit.
func TestObserveListTasks(t *testing.T) {
	o := newObserved(t, "")
	o.fourStates()

	var page api.TasksResponse
	o.call("GET", "/v1/queues/q/tasks", "", 200, &page)
	// In due order: the delayed d, due in an hour, last.
	if got, want := ids(page.Tasks), "v:reserved,x:dead,r1:ready,r2:ready,d:delayed"; got != want || page.Next != "" {
		t.Errorf("every task: %s next %q, want %s next \"\"", got, page.Next, want)
	}
	for _, task := range page.Tasks {
		if string(task.Payload) != "null" || task.Lease != "" || task.JobID == 0 || task.Queue != "q" || task.Due.Location() != time.UTC {
			t.Errorf("listed %+v: want a null payload, no lease, a job id, the queue, a UTC due time", task)
		}
	}
	if d := page.Tasks[4]; time.Until(d.Due) < 59*time.Minute || d.Priority != api.DefaultPriority {
		t.Errorf("delayed task listed as %+v", d)
	}
	if x := page.Tasks[1]; x.Attempts != 1 || x.MaxAttempts != 1 || x.Priority != 1 {
		t.Errorf("dead task listed as %+v", x)
	}

	for state, want := range map[string]string{
		"delayed": "d:delayed", "ready": "r1:ready,r2:ready", "reserved": "v:reserved", "dead": "x:dead",
	} {
		var p api.TasksResponse
		o.call("GET", "/v1/queues/q/tasks?state="+state, "", 200, &p)
		if got := ids(p.Tasks); got != want || p.Next != "" {
			t.Errorf("state %s: %s next %q, want %s next \"\"", state, got, p.Next, want)
		}
	}

	// Pages of two, each after the opaque cursor of the one before
	// ("0", the first page of the job id cursor, is the first page too).
	var all []string
	after := "0"
	for range 5 {
		var p api.TasksResponse
		o.call("GET", "/v1/queues/q/tasks?limit=2&after="+url.QueryEscape(after), "", 200, &p)
		all = append(all, ids(p.Tasks))
		if p.Next == "" {
			break
		}
		after = p.Next
	}
	if got, want := strings.Join(all, " | "), "v:reserved,x:dead | r1:ready,r2:ready | d:delayed"; got != want {
		t.Errorf("pages %s, want %s", got, want)
	}

	// A queue never used is an empty page, not an error.
	var empty api.TasksResponse
	o.call("GET", "/v1/queues/other/tasks", "", 200, &empty)
	if empty.Tasks == nil || len(empty.Tasks) != 0 || empty.Next != "" {
		t.Errorf("unused queue: %+v", empty)
	}

	for _, c := range []struct{ query, want string }{
		{"state=buried", `state "buried"`},
		{"state=Ready", `state "Ready"`},
		// A cursor is only ever what the server gave: a job id of the
		// cursor before it, or a cursor of another version or altered,
		// is refused.
		{"after=-1", `after "-1": not a cursor`},
		{"after=x", `after "x": not a cursor`},
		{"after=7", `after "7": not a cursor`},
		{"after=" + (service.Cursor{Due: 1, Job: 2}).String() + "A", "not a cursor"},
		{"after=" + strings.Replace((service.Cursor{Due: 1, Job: 2}).String(), "A", "B", 1), "not a cursor"},
		{"after=" + strings.Repeat("_", 23), "not a cursor"},
		{"after=" + strings.Repeat("A", 23), "not a cursor"},
		{"limit=0", "limit 0: want 1 to 1000"},
		{"limit=1001", "limit 1001"},
		{"limit=1.5", `limit "1.5"`},
	} {
		if msg := o.call("GET", "/v1/queues/q/tasks?"+c.query, "", 400, nil); !strings.Contains(msg, c.want) {
			t.Errorf("?%s: %q, want it to say %q", c.query, msg, c.want)
		}
	}
	o.call("GET", "/v1/queues/"+strings.Repeat("a", 201)+"/tasks", "", 400, nil)
	o.call("GET", "/v1/queues/b%20ad/tasks", "", 400, nil)
}

// TestObserveDead kicks every dead task of a queue, then deletes every
// dead one, and checks both change only the dead.
func TestObserveDead(t *testing.T) {
	o := newObserved(t, "")
	o.fourStates()
	// A second dead task.
	o.call("POST", "/v1/queues/q/tasks", `{"id":"y","priority":0,"max_attempts":1}`, 201, nil)
	var res api.ReserveResponse
	o.call("POST", "/v1/queues/q/reserve", `{}`, 200, &res)
	o.call("POST", "/v1/queues/q/tasks/y/nack", `{"lease":"`+res.Tasks[0].Lease+`"}`, 200, nil)

	var kicked api.KickedResponse
	o.call("POST", "/v1/queues/q/dead:kick", "", 200, &kicked)
	if kicked.Kicked != 2 {
		t.Errorf("kicked %d, want 2", kicked.Kicked)
	}
	var p api.TasksResponse
	o.call("GET", "/v1/queues/q/tasks", "", 200, &p)
	if got, want := ids(p.Tasks), "v:reserved,x:ready,r1:ready,r2:ready,y:ready,d:delayed"; got != want {
		t.Errorf("after kick: %s, want %s", got, want)
	}
	o.call("POST", "/v1/queues/q/dead:kick", "", 200, &kicked)
	if kicked.Kicked != 0 {
		t.Errorf("kicked %d with none dead", kicked.Kicked)
	}

	// Make x and y dead again (priority 0 and 1 come first), then delete.
	o.call("POST", "/v1/queues/q/reserve", `{"max":2}`, 200, &res)
	for _, task := range res.Tasks {
		o.call("POST", "/v1/queues/q/tasks/"+task.ID+"/nack", `{"lease":"`+task.Lease+`"}`, 200, nil)
	}
	var deleted api.DeletedResponse
	o.call("DELETE", "/v1/queues/q/dead", "", 200, &deleted)
	if deleted.Deleted != 2 {
		t.Errorf("deleted %d, want 2", deleted.Deleted)
	}
	o.call("GET", "/v1/queues/q/tasks", "", 200, &p)
	if got, want := ids(p.Tasks), "v:reserved,r1:ready,r2:ready,d:delayed"; got != want {
		t.Errorf("after delete: %s, want %s", got, want)
	}
	var fin api.FinishedRecord
	o.call("GET", "/v1/queues/q/tasks/x", "", 200, &fin) // its finished record, from the history
	if fin.State != api.StateFinished || fin.Outcome != api.FinishedDeleted {
		t.Errorf("GET after delete answered %+v", fin)
	}

	// A queue never used has no dead tasks; a bad name is refused.
	o.call("DELETE", "/v1/queues/none/dead", "", 200, &deleted)
	if deleted.Deleted != 0 {
		t.Errorf("deleted %d in an unused queue", deleted.Deleted)
	}
	o.call("POST", "/v1/queues/b%20ad/dead:kick", "", 400, nil)
	o.call("GET", "/v1/queues/q/dead", "", 405, nil)
}

// TestObserveStats reads the counters, the lateness history and the
// due-time histogram after a few puts and deliveries.
func TestObserveStats(t *testing.T) {
	o := newObserved(t, "")
	before := time.Now()
	o.call("POST", "/v1/queues/a/tasks", `{"id":"1"}`, 201, nil)
	o.call("POST", "/v1/queues/a/tasks", `{"id":"2"}`, 201, nil)
	for _, delay := range []string{"30s", "40s", "90s", "150s", "2h"} {
		o.call("POST", "/v1/queues/b/tasks", `{"delay":"`+delay+`"}`, 201, nil)
	}
	o.call("POST", "/v1/queues/c/tasks", `{"delay":"30s"}`, 201, nil)
	var res api.ReserveResponse
	o.call("POST", "/v1/queues/a/reserve", `{"max":2}`, 200, &res)
	o.call("POST", "/v1/queues/a/tasks/1/ack", `{"lease":"`+res.Tasks[0].Lease+`"}`, 204, nil)

	var qs api.QueueStatsResponse
	o.call("GET", "/v1/stats/queues", "", 200, &qs)
	if qs.Time.Before(before) || qs.Time.Location() != time.UTC {
		t.Errorf("time %v, want a UTC time after %v", qs.Time, before)
	}
	want := []api.QueueStats{
		{Queue: api.Queue{Name: "a", Reserved: 1}, Puts: 2, Deliveries: 2, Acks: 1},
		{Queue: api.Queue{Name: "b", Delayed: 5}, Puts: 5},
		{Queue: api.Queue{Name: "c", Delayed: 1}, Puts: 1},
	}
	if !slices.Equal(qs.Queues, want) {
		t.Errorf("queue stats\n got %+v\nwant %+v", qs.Queues, want)
	}

	var late api.LatenessResponse
	o.call("GET", "/v1/stats/lateness", "", 200, &late)
	total := 0
	for _, w := range late.Windows {
		total += w.Deliveries
		if w.Start.After(time.Now()) || w.Start.Before(before.Add(-10*time.Second)) || w.P50 > w.P99 || w.P99.D() <= 0 || w.Max.D() > time.Since(before) {
			t.Errorf("lateness window %+v", w)
		}
	}
	if total != 2 {
		t.Errorf("lateness windows count %d deliveries, want 2: %+v", total, late.Windows)
	}

	var due api.DueResponse
	o.call("GET", "/v1/stats/due", "", 200, &due)
	if due.Width.D() != time.Minute || len(due.Counts) != 60 || due.Counts[0] != 3 || due.Counts[1] != 1 || due.Counts[2] != 1 || sum(due.Counts) != 5 {
		t.Errorf("due, every queue, by default: %+v", due)
	}
	if due.Start.Before(before) || due.Start.Location() != time.UTC {
		t.Errorf("due start %v", due.Start)
	}
	o.call("GET", "/v1/stats/due?queue=b&width=1m&n=3", "", 200, &due)
	if !slices.Equal(due.Counts, []int{2, 1, 1}) {
		t.Errorf("due of b by minute: %v, want [2 1 1]", due.Counts)
	}
	o.call("GET", "/v1/stats/due?queue=b&width=3h&n=1", "", 200, &due)
	if !slices.Equal(due.Counts, []int{5}) || due.Width.D() != 3*time.Hour {
		t.Errorf("due of b in 3h: %+v", due)
	}
	o.call("GET", "/v1/stats/due?queue=none", "", 200, &due)
	if len(due.Counts) != 60 || sum(due.Counts) != 0 {
		t.Errorf("due of an unused queue: %v", due.Counts)
	}
	for _, c := range []struct{ query, want string }{
		{"width=60", `width "60"`},
		{"width=-1m", `width "-1m"`},
		{"width=0s", `width "0s"`},
		{"n=0", "n 0: want 1 to 10000"},
		{"n=10001", "n 10001"},
		{"n=x", `n "x"`},
	} {
		if msg := o.call("GET", "/v1/stats/due?"+c.query, "", 400, nil); !strings.Contains(msg, c.want) {
			t.Errorf("?%s: %q, want it to say %q", c.query, msg, c.want)
		}
	}
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// TestObserveCronCheck checks cron lines with the server's parser: the
// next five times of a good line, in its zone, and the parser's error for
// a bad one.
func TestObserveCronCheck(t *testing.T) {
	o := newObserved(t, "")
	var res api.CronCheckResponse
	before := time.Now()
	o.call("POST", "/v1/cron:check", `{"cron":"*/5 * * * *"}`, 200, &res)
	if len(res.Next) != api.CronCheckTimes {
		t.Fatalf("next %v, want 5 times", res.Next)
	}
	for i, next := range res.Next {
		if next.Location() != time.UTC || next.Minute()%5 != 0 || next.Second() != 0 || !next.After(before) ||
			i > 0 && next.Sub(res.Next[i-1]) != 5*time.Minute {
			t.Errorf("next %v", res.Next)
			break
		}
	}
	o.call("POST", "/v1/cron:check", `{"cron":"30 9 * * *","timezone":"Asia/Kolkata"}`, 200, &res)
	for _, next := range res.Next {
		if next.Hour() != 4 || next.Minute() != 0 { // 09:30 at +05:30
			t.Errorf("09:30 in Kolkata: %v", res.Next)
			break
		}
	}
	for _, c := range []struct{ body, want string }{
		{`{"cron":"61 * * * *"}`, "61"},
		{`{"cron":""}`, "hourglass: "},
		{`{"cron":"* * * *"}`, "hourglass: "},
		{`{"cron":"@hourly","timezone":"Mars/Olympus"}`, "Mars/Olympus"},
		{`{"cron":"@hourly","name":"x"}`, `unknown field "name"`},
		{`{"cron":5}`, `field "cron"`},
		{``, "empty body"},
	} {
		if msg := o.call("POST", "/v1/cron:check", c.body, 400, nil); !strings.Contains(msg, c.want) {
			t.Errorf("%s: %q, want it to say %q", c.body, msg, c.want)
		}
	}
	o.call("GET", "/v1/cron:check", "", 405, nil)
}

// TestObserveAuth checks that every route of observe.go needs the token.
func TestObserveAuth(t *testing.T) {
	o := newObserved(t, "s3cret")
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/v1/queues/q/tasks", ""},
		{"POST", "/v1/queues/q/dead:kick", ""},
		{"DELETE", "/v1/queues/q/dead", ""},
		{"GET", "/v1/stats/queues", ""},
		{"GET", "/v1/stats/lateness", ""},
		{"GET", "/v1/stats/due", ""},
		{"POST", "/v1/cron:check", `{"cron":"@hourly"}`},
	} {
		r := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body))
		w := httptest.NewRecorder()
		o.s.ServeHTTP(w, r)
		if w.Code != http.StatusUnauthorized || !strings.Contains(w.Body.String(), "hourglass: missing bearer token") {
			t.Errorf("%s %s without the token: %d %s", c.method, c.path, w.Code, w.Body.String())
		}
		if w := o.serve(c.method, c.path, c.body); w.Code != http.StatusOK {
			t.Errorf("%s %s with the token: %d %s", c.method, c.path, w.Code, w.Body.String())
		}
	}
}
