package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/httpapi"
	"github.com/hourglass-go/hourglass/task"
)

// sample is a task as a broker might answer it, in a zone other than UTC
// to check that times go out in UTC.
func sample() task.Task {
	zone := time.FixedZone("X", 3600)
	return task.Task{
		ID: "a", JobID: 7, Queue: "q", State: task.Reserved,
		Payload: []byte(`{"to": "<x@y>"}`), Priority: 5,
		Due:      time.Date(2030, 1, 2, 4, 4, 5, 123456789, zone),
		TTR:      1500 * time.Millisecond,
		Attempts: 1, MaxAttempts: 3,
		Created: time.Date(2030, 1, 2, 4, 0, 0, 0, zone),
		Lease:   "L1",
	}
}

// sampleJSON is sample() on the wire, without its lease: the payload as
// it was put, white space and all.
const sampleJSON = `{"id":"a","job_id":7,"queue":"q","state":"reserved","payload":{"to": "<x@y>"},"priority":5,` +
	`"due":"2030-01-02T03:04:05.123456789Z","ttr":"1.5s","attempts":1,"max_attempts":3,"created":"2030-01-02T03:00:00Z"}`

// TestPutRequest checks how a put's body becomes the broker's request.
func TestPutRequest(t *testing.T) {
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		body string
		want task.PutRequest
	}{
		{``, task.PutRequest{Priority: 1024}},
		{`{}`, task.PutRequest{Priority: 1024}},
		{`{"payload":null}`, task.PutRequest{Priority: 1024}},
		{`{"priority":0}`, task.PutRequest{Priority: 0}},
		{`{"priority":4294967295}`, task.PutRequest{Priority: 4294967295}},
		{`{"id":"x","payload":{"a": [1, 2]},"delay":"1.5s","ttr":"2m","max_attempts":4,"replace":true}`,
			task.PutRequest{ID: "x", Payload: []byte(`{"a": [1, 2]}`), Delay: 1500 * time.Millisecond, Priority: 1024, TTR: 2 * time.Minute, MaxAttempts: 4, Replace: true}},
		{`{"at":"2030-01-01T01:00:00+01:00"}`, task.PutRequest{At: at, Priority: 1024}},
		{`{"payload":"text"}`, task.PutRequest{Payload: []byte(`"text"`), Priority: 1024}},
	} {
		s, f := newServer(t, httpapi.Options{})
		var got task.PutRequest
		f.put = func(queue string, r task.PutRequest) (task.Task, bool, error) {
			got = r
			return sample(), true, nil
		}
		w := do(s, "POST", "/v1/queues/q/tasks", tc.body)
		if w.Code != 201 {
			t.Errorf("%s: status %d %s", tc.body, w.Code, w.Body.String())
			continue
		}
		if !got.At.Equal(tc.want.At) {
			t.Errorf("%s: at %v, want %v", tc.body, got.At, tc.want.At)
		}
		got.At, tc.want.At = time.Time{}, time.Time{}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.body, got, tc.want)
		}
	}
}

// TestPutAnswer checks a put's answers: 201 with Location for a new task,
// 200 for an existing one, the task's JSON with times in UTC and no lease.
func TestPutAnswer(t *testing.T) {
	s, f := newServer(t, httpapi.Options{})
	created := true
	f.put = func(queue string, r task.PutRequest) (task.Task, bool, error) {
		if queue != "q" {
			t.Errorf("queue %q", queue)
		}
		return sample(), created, nil
	}
	w := do(s, "POST", "/v1/queues/q/tasks", `{"id":"a"}`)
	if w.Code != 201 || w.Header().Get("Location") != "/v1/queues/q/tasks/a" {
		t.Errorf("new: %d, Location %q", w.Code, w.Header().Get("Location"))
	}
	if got := strings.TrimSpace(w.Body.String()); got != sampleJSON {
		t.Errorf("body\n got %s\nwant %s", got, sampleJSON)
	}
	created = false
	if w := do(s, "POST", "/v1/queues/q/tasks", `{"id":"a"}`); w.Code != 200 || w.Header().Get("Location") != "" {
		t.Errorf("existing: %d", w.Code)
	}
}

// TestGetEscapedID checks that ids travel as escaped path segments.
func TestGetEscapedID(t *testing.T) {
	s, f := newServer(t, httpapi.Options{})
	var gotID string
	f.get = func(queue, id string) (task.Task, error) {
		gotID = id
		return sample(), nil
	}
	w := do(s, "GET", "/v1/queues/q/tasks/order%3F42%23%25x", "")
	if w.Code != 200 || gotID != "order?42#%x" {
		t.Errorf("status %d, id %q", w.Code, gotID)
	}
	if got := strings.TrimSpace(w.Body.String()); got != sampleJSON {
		t.Errorf("GET leaks or changes something:\n got %s\nwant %s", got, sampleJSON)
	}
}

// TestBatch checks that a batch answers one result per item in order,
// with items bad on the wire or to the service's checks refused in
// place and the others passed to one PutBatch call.
func TestBatch(t *testing.T) {
	s, f := newServer(t, httpapi.Options{})
	f.putBatch = func(queue string, rs []task.PutRequest) []task.PutResult {
		if len(rs) != 2 || rs[0].ID != "a" || rs[1].ID != "d" {
			t.Errorf("PutBatch(%+v)", rs)
		}
		out := make([]task.PutResult, len(rs))
		for i, r := range rs {
			out[i].Task = sample()
			out[i].Task.ID = r.ID
		}
		return out
	}
	body := `{"tasks":[{"id":"a"},{"id":"x","delay":5},{"id":"b/c"},{"id":"y","colour":1},{"id":"d"},{"delay":"1s","at":"2030-01-01T00:00:00Z"}]}`
	w := do(s, "POST", "/v1/queues/q/tasks:batch", body)
	if w.Code != 200 {
		t.Fatalf("status %d %s", w.Code, w.Body.String())
	}
	var out struct {
		Results []struct {
			Task  *struct{ ID string }
			Error string
		}
	}
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	want := []string{"task a", "error not a number", "error no '/'", `error unknown field "colour"`, "task d", "error delay or at"}
	if len(out.Results) != len(want) {
		t.Fatalf("%d results, want %d: %s", len(out.Results), len(want), w.Body.String())
	}
	for i, r := range out.Results {
		kind, what, _ := strings.Cut(want[i], " ")
		switch {
		case kind == "task" && (r.Task == nil || r.Task.ID != what || r.Error != ""):
			t.Errorf("result %d: %+v, want task %s", i, r, what)
		case kind == "error" && (r.Task != nil || !strings.HasPrefix(r.Error, "hourglass: ") || !strings.Contains(r.Error, what)):
			t.Errorf("result %d: %+v, want an error saying %s", i, r, what)
		}
	}
	// An empty batch is answered without a call.
	s, _ = newServer(t, httpapi.Options{})
	if w := do(s, "POST", "/v1/queues/q/tasks:batch", `{"tasks":[]}`); w.Code != 200 || strings.TrimSpace(w.Body.String()) != `{"results":[]}` {
		t.Errorf("empty batch: %d %s", w.Code, w.Body.String())
	}
}

// TestLeaseCalls checks reserve, ack, touch, nack and kick: arguments in,
// statuses and leases out.
func TestLeaseCalls(t *testing.T) {
	s, f := newServer(t, httpapi.Options{})
	f.reserve = func(_ context.Context, queue string, max int, wait time.Duration) ([]task.Task, error) {
		if queue != "q" || max != 10 || wait != 250*time.Millisecond {
			t.Errorf("Reserve(%q, %d, %s)", queue, max, wait)
		}
		return []task.Task{sample()}, nil
	}
	w := do(s, "POST", "/v1/queues/q/reserve", `{"max":10,"wait":"250ms"}`)
	want := `{"tasks":[` + strings.TrimSuffix(sampleJSON, "}") + `,"lease":"L1"}]}`
	if w.Code != 200 || strings.TrimSpace(w.Body.String()) != want {
		t.Errorf("reserve: %d\n got %s\nwant %s", w.Code, w.Body.String(), want)
	}
	f.reserve = func(_ context.Context, queue string, max int, wait time.Duration) ([]task.Task, error) {
		if max != 1 || wait != 0 {
			t.Errorf("default Reserve(%d, %s)", max, wait)
		}
		return nil, nil
	}
	for _, body := range []string{``, `{}`} {
		if w := do(s, "POST", "/v1/queues/q/reserve", body); w.Code != 200 || strings.TrimSpace(w.Body.String()) != `{"tasks":[]}` {
			t.Errorf("reserve %q: %d %s", body, w.Code, w.Body.String())
		}
	}

	var calls []string
	f.lease = func(op, queue, id, lease string, delay time.Duration) (task.Task, error) {
		calls = append(calls, fmt.Sprint(op, " ", queue, " ", id, " ", lease, " ", delay))
		return sample(), nil
	}
	f.other = func(op string, args ...string) error {
		calls = append(calls, fmt.Sprint(op, " ", args))
		return nil
	}
	for _, tc := range []struct {
		path, body string
		status     int
	}{
		{"/v1/queues/q/tasks/a/ack", `{"lease":"L1"}`, 204},
		{"/v1/queues/q/tasks/a/touch", `{"lease":"L1"}`, 200},
		{"/v1/queues/q/tasks/a/nack", `{"lease":"L1"}`, 200},
		{"/v1/queues/q/tasks/a/nack", `{"lease":"L1","delay":"3s"}`, 200},
		{"/v1/queues/q/tasks/a/kick", ``, 204},
		{"/v1/queues/q/tasks/a/kick", `{}`, 204},
	} {
		w := do(s, "POST", tc.path, tc.body)
		if w.Code != tc.status {
			t.Errorf("%s %s: %d %s", tc.path, tc.body, w.Code, w.Body.String())
		}
		if tc.status == 204 && w.Body.Len() != 0 {
			t.Errorf("%s: 204 with a body %q", tc.path, w.Body.String())
		}
		if strings.HasSuffix(tc.path, "touch") && !strings.Contains(w.Body.String(), `"lease":"L1"`) {
			t.Errorf("touch answer without the lease: %s", w.Body.String())
		}
	}
	if w := do(s, "DELETE", "/v1/queues/q/tasks/a", ""); w.Code != 204 {
		t.Errorf("delete: %d", w.Code)
	}
	want2 := "ack q a L1 0s|touch q a L1 0s|nack q a L1 -1ns|nack q a L1 3s|kick [q a]|kick [q a]|delete [q a]"
	if got := strings.Join(calls, "|"); got != want2 {
		t.Errorf("calls\n got %s\nwant %s", got, want2)
	}
}

// TestQueuesAndSchedules checks the listings and the schedule calls.
func TestQueuesAndSchedules(t *testing.T) {
	s, f := newServer(t, httpapi.Options{})
	f.queues = func() []task.QueueStats {
		return []task.QueueStats{{Name: "b", Ready: 2, Puts: 9}, {Name: "a", Delayed: 1, Reserved: 3, Dead: 4}}
	}
	w := do(s, "GET", "/v1/queues", "")
	want := `{"queues":[{"name":"a","delayed":1,"ready":0,"reserved":3,"dead":4},{"name":"b","delayed":0,"ready":2,"reserved":0,"dead":0}]}`
	if got := strings.TrimSpace(w.Body.String()); w.Code != 200 || got != want {
		t.Errorf("queues: %d\n got %s\nwant %s", w.Code, got, want)
	}
	f.queues = func() []task.QueueStats { return nil }
	if w := do(s, "GET", "/v1/queues", ""); strings.TrimSpace(w.Body.String()) != `{"queues":[]}` {
		t.Errorf("no queues: %s", w.Body.String())
	}

	next := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	f.schedule = func(sp task.ScheduleSpec) (task.ScheduleInfo, bool, error) {
		if sp.Name != "nightly" || sp.Cron != "0 3 * * *" || sp.Queue != "q" || string(sp.Payload) != `{"k":1}` || sp.Timezone != "Europe/Paris" {
			t.Errorf("SetSchedule(%+v)", sp)
		}
		return task.ScheduleInfo{ScheduleSpec: sp, Next: next}, true, nil
	}
	w = do(s, "PUT", "/v1/schedules/nightly", `{"cron":"0 3 * * *","queue":"q","payload":{"k":1},"timezone":"Europe/Paris"}`)
	want = `{"name":"nightly","cron":"0 3 * * *","queue":"q","payload":{"k":1},"timezone":"Europe/Paris","misfire":"one","catch_up":"24h0m0s","overlap":"allow","priority":1024,"paused":false,"next":"2030-01-01T00:00:00Z"}`
	if got := strings.TrimSpace(w.Body.String()); w.Code != 200 || got != want {
		t.Errorf("set schedule: %d\n got %s\nwant %s", w.Code, got, want)
	}
	f.scheds = func() []task.ScheduleInfo {
		return []task.ScheduleInfo{{ScheduleSpec: task.ScheduleSpec{Name: "z", Cron: "@daily", Queue: "q"}}, {ScheduleSpec: task.ScheduleSpec{Name: "a", Cron: "@hourly", Queue: "q"}, Next: next, Last: next.Add(-time.Hour), LastTaskID: "a@2029-12-31T23:00:00Z", LastOutcome: "acked"}}
	}
	w = do(s, "GET", "/v1/schedules", "")
	want = `{"schedules":[{"name":"a","cron":"@hourly","queue":"q","misfire":"one","catch_up":"24h0m0s","overlap":"allow","priority":1024,"paused":false,"next":"2030-01-01T00:00:00Z","last":{"time":"2029-12-31T23:00:00Z","task_id":"a@2029-12-31T23:00:00Z","outcome":"acked"}},{"name":"z","cron":"@daily","queue":"q","misfire":"one","catch_up":"24h0m0s","overlap":"allow","priority":1024,"paused":false}]}`
	if got := strings.TrimSpace(w.Body.String()); w.Code != 200 || got != want {
		t.Errorf("schedules: %d\n got %s\nwant %s", w.Code, got, want)
	}
	f.other = func(op string, args ...string) error {
		if op != "deleteSchedule" || args[0] != "nightly" {
			t.Errorf("%s %v", op, args)
		}
		return task.ErrNoSchedule
	}
	if w := do(s, "DELETE", "/v1/schedules/nightly", ""); w.Code != 404 {
		t.Errorf("delete schedule: %d", w.Code)
	}
}

// TestPayloadNotJSON checks that bytes put by another protocol that are
// not JSON come back as a JSON string rather than breaking the answer.
func TestPayloadNotJSON(t *testing.T) {
	s, f := newServer(t, httpapi.Options{})
	f.get = func(queue, id string) (task.Task, error) {
		t := sample()
		t.Payload = []byte("plain text\n")
		return t, nil
	}
	w := do(s, "GET", "/v1/queues/q/tasks/a", "")
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"payload":"plain text\n"`) {
		t.Errorf("%d %s", w.Code, w.Body.String())
	}
}
