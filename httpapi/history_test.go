package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/httpapi"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// historyFake is fakeBroker with the history's methods answering what
// the test sets (a method not set fails the test when called).
type historyFake struct {
	*fakeBroker
	attempts func(queue, id string) ([]task.Attempt, error)
	finished func(queue, outcome string, after uint64, limit int) ([]task.Finished, uint64, error)
}

func (f *historyFake) Attempts(ctx context.Context, queue, id string) ([]task.Attempt, error) {
	if f.call("Attempts", f.attempts != nil); f.attempts == nil {
		return nil, nil
	}
	return f.attempts(queue, id)
}

func (f *historyFake) FinishedTasks(ctx context.Context, queue string, o service.FinishedFilter, after uint64, limit int) ([]task.Finished, uint64, error) {
	if f.call("FinishedTasks", f.finished != nil && o.ID == ""); f.finished == nil || o.ID != "" {
		return nil, 0, nil
	}
	return f.finished(queue, o.Outcome, after, limit)
}

// newHistoryServer returns a ready Server over a historyFake.
func newHistoryServer(t *testing.T) (*httpapi.Server, *historyFake) {
	f := &historyFake{fakeBroker: &fakeBroker{t: t}}
	s := checked(t, httpapi.New(httpapi.Options{Logger: quiet}))
	s.SetService(service.New(f))
	return s, f
}

// TestHistoryOutcomes_MatchTask checks that the outcomes package api
// documents are the service's.
func TestHistoryOutcomes_MatchTask(t *testing.T) {
	for _, c := range [][2]string{
		{api.AttemptAcked, task.AttemptAcked},
		{api.AttemptNacked, task.AttemptNacked},
		{api.AttemptReleased, task.AttemptReleased},
		{api.AttemptBuried, task.AttemptBuried},
		{api.AttemptExpired, task.AttemptExpired},
		{api.AttemptPushed, task.AttemptPushed},
		{api.AttemptPushFailed, task.AttemptPushFailed},
		{api.FinishedAcked, task.FinishedAcked},
		{api.FinishedDead, task.FinishedDead},
		{api.FinishedDeleted, task.FinishedDeleted},
		{api.AttemptCancelled, task.AttemptCancelled},
		{api.FinishedCancelled, task.FinishedCancelled},
	} {
		if c[0] != c[1] {
			t.Errorf("api outcome %q, the service's %q", c[0], c[1])
		}
	}
	if api.MaxAttemptsListed != task.MaxAttemptsListed {
		t.Errorf("api.MaxAttemptsListed = %d, the service's %d", api.MaxAttemptsListed, task.MaxAttemptsListed)
	}
}

// TestAttemptsRoute checks GET .../attempts: the service's attempts in
// order, ended ones with their end, outcome and duration, optional
// fields left out when empty, and a running one without end or outcome,
// lasting until the answer; an escaped id reaches the service as it was.
func TestAttemptsRoute(t *testing.T) {
	s, f := newHistoryServer(t)
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.FixedZone("CET", 3600))
	running := time.Now().Add(-3 * time.Second)
	f.attempts = func(queue, id string) ([]task.Attempt, error) {
		if queue != "mail" || id != "a?b%c" {
			t.Errorf("Attempts(%q, %q)", queue, id)
		}
		return []task.Attempt{
			{N: 1, Started: start, Ended: start.Add(2500 * time.Millisecond), Outcome: task.AttemptNacked, Error: "smtp: timeout"},
			{N: 2, Started: start.Add(time.Minute), Ended: start.Add(time.Minute + time.Second), Outcome: task.AttemptPushFailed, Error: "503 Service Unavailable", Status: 503, Node: "n1"},
			{N: 3, Started: start.Add(2 * time.Minute), Ended: start.Add(2*time.Minute + 30*time.Second), Outcome: task.AttemptExpired},
			{N: 4, Started: running},
		}, nil
	}
	w := do(s, "GET", "/v1/queues/mail/tasks/a%3Fb%25c/attempts", "")
	if w.Code != 200 {
		t.Fatalf("GET attempts: %d %s", w.Code, w.Body.String())
	}
	var raw struct {
		Attempts []map[string]any `json:"attempts"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &raw); err != nil || len(raw.Attempts) != 4 {
		t.Fatalf("GET attempts: %s (%v)", w.Body.String(), err)
	}
	lines := strings.Split(w.Body.String(), `{"attempt":`)
	for i, want := range []string{
		`1,"started":"2026-03-01T11:00:00Z","ended":"2026-03-01T11:00:02.5Z","outcome":"nacked","error":"smtp: timeout","duration":"2.5s"}`,
		`2,"started":"2026-03-01T11:01:00Z","ended":"2026-03-01T11:01:01Z","outcome":"push-failed","error":"503 Service Unavailable","status":503,"node":"n1","duration":"1s"}`,
		`3,"started":"2026-03-01T11:02:00Z","ended":"2026-03-01T11:02:30Z","outcome":"expired","duration":"30s"}`,
	} {
		if got := strings.TrimSuffix(lines[i+1], ","); got != want {
			t.Errorf("attempt %d:\n got %s\nwant %s", i+1, got, want)
		}
	}
	last := raw.Attempts[3]
	if _, ok := last["ended"]; ok {
		t.Errorf("a running attempt has an end: %v", last)
	}
	if _, ok := last["outcome"]; ok {
		t.Errorf("a running attempt has an outcome: %v", last)
	}
	d, err := time.ParseDuration(fmt.Sprint(last["duration"]))
	if err != nil || d < 3*time.Second || d > time.Minute {
		t.Errorf("a running attempt started 3s ago lasted %v (%v)", last["duration"], err)
	}

	// None: an empty list, not null.
	f.attempts = func(queue, id string) ([]task.Attempt, error) { return nil, nil }
	if w := do(s, "GET", "/v1/queues/mail/tasks/x/attempts", ""); w.Code != 200 || strings.TrimSpace(w.Body.String()) != `{"attempts":[]}` {
		t.Errorf("no attempts: %d %s", w.Code, w.Body.String())
	}
	// An unknown task: 404 with the service's error.
	f.attempts = func(queue, id string) ([]task.Attempt, error) {
		return nil, fmt.Errorf("%w: task %q of queue %q", task.ErrNotFound, id, queue)
	}
	if w := do(s, "GET", "/v1/queues/mail/tasks/x/attempts", ""); w.Code != 404 || !strings.Contains(errorText(t, w), `"x"`) {
		t.Errorf("unknown task: %d %s", w.Code, w.Body.String())
	}
	// A bad queue name is the service's to refuse: 400.
	f.attempts = func(queue, id string) ([]task.Attempt, error) {
		return nil, fmt.Errorf("%w: bad queue name", task.ErrInvalid)
	}
	if w := do(s, "GET", "/v1/queues/mail/tasks/x/attempts", ""); w.Code != 400 {
		t.Errorf("bad queue: %d %s", w.Code, w.Body.String())
	}
	if w := do(s, "POST", "/v1/queues/mail/tasks/x/attempts", ""); w.Code != 405 || w.Header().Get("Allow") != "GET, HEAD" {
		t.Errorf("POST attempts: %d Allow %q", w.Code, w.Header().Get("Allow"))
	}
}

// TestHistoryRoute checks GET .../history: the query reaches the service
// as given (defaults when absent), the page and its cursor come back in
// the wire form, and a bad outcome, after or limit answers 400 naming it
// without reaching the service.
func TestHistoryRoute(t *testing.T) {
	s, f := newHistoryServer(t)
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.FixedZone("CET", 3600))
	type query struct {
		queue, outcome string
		after          uint64
		limit          int
	}
	var got query
	f.finished = func(queue, outcome string, after uint64, limit int) ([]task.Finished, uint64, error) {
		got = query{queue, outcome, after, limit}
		return []task.Finished{
			{ID: "b", JobID: 9, Queue: queue, Outcome: task.FinishedDead, Finished: at.Add(time.Second), Attempts: 5, LastError: "smtp: timeout"},
			{ID: "a", JobID: 7, Queue: queue, Outcome: task.FinishedAcked, Finished: at, Attempts: 1},
		}, 41, nil
	}
	w := do(s, "GET", "/v1/queues/mail/history", "")
	want := `{"tasks":[{"id":"b","job_id":9,"outcome":"dead","finished":"2026-03-01T11:00:01Z","attempts":5,"last_error":"smtp: timeout"},` +
		`{"id":"a","job_id":7,"outcome":"acked","finished":"2026-03-01T11:00:00Z","attempts":1}],"next":41}`
	if w.Code != 200 || strings.TrimSpace(w.Body.String()) != want {
		t.Errorf("GET history: %d\n got %s\nwant %s", w.Code, w.Body.String(), want)
	}
	if want := (query{"mail", "", 0, api.DefaultListLimit}); got != want {
		t.Errorf("FinishedTasks%+v, want %+v", got, want)
	}
	for _, c := range []struct {
		q    string
		want query
	}{
		{"outcome=acked&after=41&limit=2", query{"mail", "acked", 41, 2}},
		{"outcome=dead&limit=1000", query{"mail", "dead", 0, 1000}},
		{"outcome=deleted&after=0&limit=1", query{"mail", "deleted", 0, 1}},
	} {
		if w := do(s, "GET", "/v1/queues/mail/history?"+c.q, ""); w.Code != 200 || got != c.want {
			t.Errorf("?%s: %d, FinishedTasks%+v, want %+v", c.q, w.Code, got, c.want)
		}
	}

	// The last page: an empty list and next 0, both present.
	f.finished = func(string, string, uint64, int) ([]task.Finished, uint64, error) { return nil, 0, nil }
	if w := do(s, "GET", "/v1/queues/mail/history?outcome=deleted", ""); w.Code != 200 || strings.TrimSpace(w.Body.String()) != `{"tasks":[],"next":0}` {
		t.Errorf("empty history: %d %s", w.Code, w.Body.String())
	}

	calls := f.Calls()
	for _, c := range []struct{ q, names string }{
		{"outcome=done", `outcome "done"`},
		{"outcome=ACKED", `outcome "ACKED"`},
		{"outcome=nacked", `outcome "nacked"`},
		{"after=-1", `after "-1"`},
		{"after=x", `after "x"`},
		{"limit=0", "limit 0"},
		{"limit=1001", "limit 1001"},
		{"limit=ten", `limit "ten"`},
	} {
		w := do(s, "GET", "/v1/queues/mail/history?"+c.q, "")
		if w.Code != 400 {
			t.Errorf("?%s: %d %s, want 400", c.q, w.Code, w.Body.String())
			continue
		}
		if msg := errorText(t, w); !strings.Contains(msg, c.names) {
			t.Errorf("?%s: %q does not name %s", c.q, msg, c.names)
		}
	}
	if f.Calls() != calls {
		t.Errorf("bad queries reached the service %d times", f.Calls()-calls)
	}

	// The service's errors: a bad queue name 400, a failure 500.
	f.finished = func(string, string, uint64, int) ([]task.Finished, uint64, error) {
		return nil, 0, fmt.Errorf("%w: bad queue name", task.ErrInvalid)
	}
	if w := do(s, "GET", "/v1/queues/mail/history", ""); w.Code != 400 {
		t.Errorf("bad queue: %d %s", w.Code, w.Body.String())
	}
	if w := do(s, "DELETE", "/v1/queues/mail/history", ""); w.Code != 405 {
		t.Errorf("DELETE history: %d", w.Code)
	}
}

// TestHistory_Token checks that the history's routes need the token, as
// every /v1 route.
func TestHistory_Token(t *testing.T) {
	f := &historyFake{fakeBroker: &fakeBroker{t: t}}
	s := httpapi.New(httpapi.Options{Token: "secret", Logger: quiet})
	s.SetService(service.New(f))
	for _, p := range []string{"/v1/queues/q/tasks/x/attempts", "/v1/queues/q/history"} {
		if w := do(s, "GET", p, ""); w.Code != 401 {
			t.Errorf("GET %s without the token: %d", p, w.Code)
		}
	}
	if f.Calls() != 0 {
		t.Errorf("%d calls reached the service without the token", f.Calls())
	}
}
