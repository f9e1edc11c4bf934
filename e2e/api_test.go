package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/client"
)

// TestAPI walks one server through every call of the API with the Go
// client: put (new, idempotent, replace, generated id), get, delete,
// reserve, touch, nack, ack, kick, batch, queues and schedules.
func TestAPI(t *testing.T) { engines(t, testAPI) }

func testAPI(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.client()
	ctx := context.Background()

	// A new task: 201 with every field as put.
	put := api.PutRequest{
		ID:          "order-1",
		Payload:     json.RawMessage(`{"order":1,"items":["a","b"]}`),
		Delay:       new(api.Duration(time.Hour)),
		Priority:    new(uint32(7)),
		TTR:         new(api.Duration(30 * time.Second)),
		MaxAttempts: 3,
	}
	before := time.Now()
	t1, created, err := c.Put(ctx, "orders", put)
	if err != nil || !created {
		t.Fatalf("Put: %+v, created %v, %v", t1, created, err)
	}
	if t1.ID != "order-1" || t1.Queue != "orders" || t1.State != api.StateDelayed || t1.JobID == 0 ||
		string(t1.Payload) != string(put.Payload) || t1.Priority != 7 || t1.TTR.D() != 30*time.Second ||
		t1.Attempts != 0 || t1.MaxAttempts != 3 || t1.Lease != "" {
		t.Errorf("Put answered %+v", t1)
	}
	if t1.Created.Before(before.Add(-time.Second)) || t1.Due.Sub(t1.Created) != time.Hour {
		t.Errorf("Put: created %v, due %v: want due = created + 1h", t1.Created, t1.Due)
	}

	// The same id again: 200 with the task unchanged, whatever else is
	// asked for.
	t2, created, err := c.Put(ctx, "orders", api.PutRequest{ID: "order-1", Payload: json.RawMessage(`"other"`)})
	if err != nil || created || !sameTask(t1, t2) {
		t.Errorf("idempotent Put: %+v, created %v, %v; want %+v unchanged", t2, created, err, t1)
	}
	// With replace: 200 and the new task.
	t3, created, err := c.Put(ctx, "orders", api.PutRequest{ID: "order-1", Payload: json.RawMessage(`"replaced"`), Replace: true})
	if err != nil || created || string(t3.Payload) != `"replaced"` || t3.State != api.StateReady || t3.Priority != api.DefaultPriority {
		t.Errorf("replacing Put: %+v, created %v, %v", t3, created, err)
	}
	if got, err := c.Get(ctx, "orders", "order-1"); err != nil || !sameTask(got, t3) {
		t.Errorf("Get after replace: %+v, %v; want %+v", got, err, t3)
	}

	// Without an id the server makes one; job ids are unique.
	g, created, err := c.Put(ctx, "orders", api.PutRequest{At: new(time.Now().Add(-time.Minute))})
	if err != nil || !created || g.ID == "" || g.State != api.StateReady || g.JobID == t1.JobID || g.JobID == t3.JobID {
		t.Errorf("Put without id: %+v, %v, %v", g, created, err)
	}

	// Get and delete.
	if err := c.Delete(ctx, "orders", g.ID); err != nil {
		t.Errorf("Delete: %v", err)
	}
	if f, err := c.Get(ctx, "orders", g.ID); err != nil || f.State != api.StateFinished || f.Outcome != api.FinishedDeleted {
		t.Errorf("Get after Delete: %+v, %v; want its finished record, deleted", f, err)
	}
	if err := c.Delete(ctx, "orders", g.ID); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("second Delete: %v, want ErrNotFound", err)
	}
	if _, err := c.Get(ctx, "orders", "never-put"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("Get of a task never put: %v, want ErrNotFound", err)
	}

	// Reserve, touch, nack, reserve again, ack.
	tasks, err := c.Reserve(ctx, "orders", 10, 0)
	if err != nil || len(tasks) != 1 || tasks[0].ID != "order-1" || tasks[0].Lease == "" || tasks[0].Attempts != 1 || tasks[0].State != api.StateReserved {
		t.Fatalf("Reserve: %+v, %v", tasks, err)
	}
	lease := tasks[0].Lease
	if got, err := c.Get(ctx, "orders", "order-1"); err != nil || got.State != api.StateReserved || got.Lease != "" {
		t.Errorf("Get of a reserved task: %+v, %v (want reserved, and no lease shown)", got, err)
	}
	touched, err := c.Touch(ctx, "orders", "order-1", lease)
	if err != nil || touched.Lease == "" || touched.State != api.StateReserved {
		t.Fatalf("Touch: %+v, %v", touched, err)
	}
	lease = touched.Lease
	if _, err := c.Nack(ctx, "orders", "order-1", lease, 0, ""); err != nil {
		t.Fatalf("Nack: %v", err)
	}
	if err := c.Ack(ctx, "orders", "order-1", lease); !errors.Is(err, client.ErrConflict) {
		t.Errorf("Ack with the lease of a nacked reservation: %v, want ErrConflict", err)
	}
	tasks, err = c.Reserve(ctx, "orders", 10, time.Second)
	if err != nil || len(tasks) != 1 || tasks[0].Attempts != 2 {
		t.Fatalf("Reserve after Nack: %+v, %v", tasks, err)
	}
	if err := c.Ack(ctx, "orders", "order-1", "no-such-lease"); !errors.Is(err, client.ErrConflict) {
		t.Errorf("Ack with a wrong lease: %v, want ErrConflict", err)
	}
	if err := c.Ack(ctx, "orders", "order-1", tasks[0].Lease); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	if f, err := c.Get(ctx, "orders", "order-1"); err != nil || f.State != api.StateFinished || f.Outcome != api.FinishedAcked {
		t.Errorf("Get after Ack: %+v, %v; want its finished record, acked", f, err)
	}
	if err := c.Ack(ctx, "orders", "order-1", tasks[0].Lease); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("second Ack: %v, want ErrNotFound", err)
	}

	// Kick of a task that is not dead: 409; of none: 404.
	if _, _, err := c.Put(ctx, "orders", api.PutRequest{ID: "waiting", Delay: new(api.Duration(time.Hour))}); err != nil {
		t.Fatal(err)
	}
	if err := c.Kick(ctx, "orders", "waiting"); !errors.Is(err, client.ErrConflict) {
		t.Errorf("Kick of a delayed task: %v, want ErrConflict", err)
	}
	if err := c.Kick(ctx, "orders", "nope"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("Kick of no task: %v, want ErrNotFound", err)
	}

	// A batch, then the queues.
	res, err := c.PutBatch(ctx, "mail", []api.PutRequest{{ID: "m1"}, {ID: "m2", Delay: new(api.Duration(time.Hour))}, {ID: "m1"}})
	if err != nil || len(res) != 3 || res[0].Task == nil || res[1].Task == nil || res[2].Task == nil ||
		res[2].Task.JobID != res[0].Task.JobID || res[1].Task.State != api.StateDelayed {
		t.Fatalf("PutBatch: %+v, %v", res, err)
	}
	qs, err := c.Queues(ctx)
	want := []api.Queue{{Name: "mail", Delayed: 1, Ready: 1}, {Name: "orders", Delayed: 1}}
	if err != nil || !slices.Equal(qs, want) {
		t.Errorf("Queues: %+v, %v; want %+v", qs, err, want)
	}

	// Schedules: put, list, delete.
	sched, err := c.SetSchedule(ctx, "nightly", api.ScheduleRequest{Cron: "0 3 * * *", Queue: "mail", Payload: json.RawMessage(`{"job":"report"}`), Timezone: "Europe/Paris"})
	if err != nil || sched.Name != "nightly" || sched.Next.IsZero() || sched.Next.Location() != time.UTC || !sched.Next.After(time.Now()) {
		t.Fatalf("SetSchedule: %+v, %v", sched, err)
	}
	if h, m, _ := sched.Next.In(mustZone(t, "Europe/Paris")).Clock(); h != 3 || m != 0 {
		t.Errorf("next of 0 3 * * * in Europe/Paris is %v", sched.Next)
	}
	list, err := c.Schedules(ctx)
	if err != nil || len(list) != 1 || list[0].Name != "nightly" || list[0].Queue != "mail" || !list[0].Next.Equal(sched.Next) || string(list[0].Payload) != `{"job":"report"}` {
		t.Errorf("Schedules: %+v, %v", list, err)
	}
	if err := c.DeleteSchedule(ctx, "nightly"); err != nil {
		t.Errorf("DeleteSchedule: %v", err)
	}
	if err := c.DeleteSchedule(ctx, "nightly"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("second DeleteSchedule: %v, want ErrNotFound", err)
	}
	if list, err := c.Schedules(ctx); err != nil || len(list) != 0 {
		t.Errorf("Schedules after delete: %+v, %v", list, err)
	}
}

// TestAPI_Wire checks the answers byte for byte where the issue fixes
// them: the fields of a task, times in RFC 3339 UTC with nanoseconds,
// durations as strings, the Location of a new task, and JSON errors for
// unknown routes and methods.
func TestAPI_Wire(t *testing.T) { engines(t, testAPI_Wire) }

func testAPI_Wire(t *testing.T) {
	t.Parallel()
	s := startServer(t)

	a := s.call("POST", "/v1/queues/q/tasks", `{"id":"w1","payload":[1,{"x":"<&>"}],"delay":"1.5s","ttr":"90s"}`)
	if a.status != 201 || a.header.Get("Content-Type") != "application/json" || a.header.Get("Location") != "/v1/queues/q/tasks/w1" {
		t.Fatalf("put: %v, headers %v", a, a.header)
	}
	var task map[string]json.RawMessage
	if err := json.Unmarshal(a.body, &task); err != nil {
		t.Fatal(err)
	}
	keys := slices.Sorted(maps.Keys(task))
	want := []string{"attempts", "created", "due", "id", "job_id", "max_attempts", "payload", "priority", "queue", "state", "ttr"}
	if !slices.Equal(keys, want) {
		t.Errorf("task fields %v, want %v", keys, want)
	}
	if string(task["payload"]) != `[1,{"x":"<&>"}]` || string(task["ttr"]) != `"1m30s"` || string(task["state"]) != `"delayed"` ||
		string(task["priority"]) != "1024" || string(task["max_attempts"]) != "25" || string(task["attempts"]) != "0" {
		t.Errorf("task %s", a.body)
	}
	for _, f := range []string{"due", "created"} {
		var ts string
		if err := json.Unmarshal(task[f], &ts); err != nil {
			t.Fatalf("%s: %s", f, task[f])
		}
		tm, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil || !strings.HasSuffix(ts, "Z") || tm.Location() != time.UTC {
			t.Errorf("%s %q: want RFC 3339 in UTC (%v)", f, ts, err)
		}
	}
	var jobID uint64
	if err := json.Unmarshal(task["job_id"], &jobID); err != nil || jobID == 0 {
		t.Errorf("job_id %s: want a positive integer", task["job_id"])
	}

	// The same id: 200, no Location.
	if a := s.call("POST", "/v1/queues/q/tasks", `{"id":"w1"}`); a.status != 200 || a.header.Get("Location") != "" {
		t.Errorf("idempotent put: %v, Location %q", a, a.header.Get("Location"))
	}
	// An id that needs escaping in a path.
	if a := s.call("POST", "/v1/queues/q/tasks", `{"id":"a?b#c%d"}`); a.status != 201 || a.header.Get("Location") != "/v1/queues/q/tasks/a%3Fb%23c%25d" {
		t.Errorf("put of an id needing escapes: %v, Location %q", a, a.header.Get("Location"))
	}
	if a := s.call("GET", "/v1/queues/q/tasks/a%3Fb%23c%25d", ""); a.status != 200 || !strings.Contains(string(a.body), `"id":"a?b#c%d"`) {
		t.Errorf("get of an escaped id: %v", a)
	}

	// Reserve: an empty body takes the defaults (one task, no wait).
	s.call("POST", "/v1/queues/r/tasks", `{"id":"r1"}`)
	s.call("POST", "/v1/queues/r/tasks", `{"id":"r2"}`)
	a = s.call("POST", "/v1/queues/r/reserve", "")
	var rr struct {
		Tasks []map[string]json.RawMessage `json:"tasks"`
	}
	if err := json.Unmarshal(a.body, &rr); err != nil || a.status != 200 || len(rr.Tasks) != 1 || len(rr.Tasks[0]["lease"]) < 3 {
		t.Errorf("reserve with an empty body: %v", a)
	}
	// An empty queue answers an empty list, not null.
	if a := s.call("POST", "/v1/queues/empty/reserve", `{"max":5}`); a.status != 200 || strings.TrimSpace(string(a.body)) != `{"tasks":[]}` {
		t.Errorf("reserve of an empty queue: %v", a)
	}
	// Ack answers 204 with no body.
	var lease string
	json.Unmarshal(rr.Tasks[0]["lease"], &lease)
	var id string
	json.Unmarshal(rr.Tasks[0]["id"], &id)
	if a := s.call("POST", "/v1/queues/r/tasks/"+id+"/ack", `{"lease":"`+lease+`"}`); a.status != 204 || len(a.body) != 0 {
		t.Errorf("ack: %v", a)
	}

	// Unknown routes and methods answer JSON errors too.
	for _, c := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/v1/nope", 404},
		{"GET", "/nope", 404},
		{"PUT", "/v1/queues/q/tasks", 405},
		{"GET", "/v1/queues/q/reserve", 405},
		{"POST", "/v1/queues", 405},
	} {
		a := s.call(c.method, c.path, "")
		if a.status != c.status || !isAPIError(a) {
			t.Errorf("%s %s: %v, want %d with an API error", c.method, c.path, a, c.status)
		}
	}
}

// TestAPI_Restart checks what a restart (SIGTERM, then start on the same
// directory) keeps: every task with its job id, due time and payload,
// its state, the schedules; and that job ids stay unique afterwards.
func TestAPI_Restart(t *testing.T) { engines(t, testAPI_Restart) }

func testAPI_Restart(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.client()
	ctx := context.Background()
	var put []api.Task
	for i, r := range []api.PutRequest{
		{ID: "far", Delay: new(api.Duration(240 * time.Hour)), Payload: json.RawMessage(`{"far":true}`)},
		{ID: "at", At: new(time.Date(2031, 2, 3, 4, 5, 6, 789012345, time.UTC)), Priority: new(uint32(0))},
		{ID: "ready", Payload: json.RawMessage(`"now"`)},
		{ID: "held", TTR: new(api.Duration(time.Hour))},
	} {
		task, _, err := c.Put(ctx, "keep", r)
		if err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
		put = append(put, task)
	}
	held, err := c.Reserve(ctx, "keep", 1, 0) // "ready": put first of the ready ones
	if err != nil || len(held) != 1 {
		t.Fatalf("Reserve: %+v, %v", held, err)
	}
	if _, err := c.SetSchedule(ctx, "hourly", api.ScheduleRequest{Cron: "@hourly", Queue: "keep"}); err != nil {
		t.Fatal(err)
	}

	if took := s.stop(); took > 5*time.Second {
		t.Errorf("SIGTERM of an idle server took %v", took)
	}
	s.start()

	for _, p := range put {
		got, err := c.Get(ctx, "keep", p.ID)
		if err != nil {
			t.Errorf("Get %s after restart: %v", p.ID, err)
			continue
		}
		want := p
		if p.ID == held[0].ID {
			want.State, want.Attempts = api.StateReserved, 1
		}
		if !sameTask(got, want) {
			t.Errorf("after restart %+v\nwant           %+v", got, want)
		}
	}
	// The lease survives the restart.
	if _, err := c.Touch(ctx, "keep", held[0].ID, held[0].Lease); err != nil {
		t.Errorf("Touch with the lease from before the restart: %v", err)
	}
	if list, err := c.Schedules(ctx); err != nil || len(list) != 1 || list[0].Name != "hourly" {
		t.Errorf("Schedules after restart: %+v, %v", list, err)
	}
	n, _, err := c.Put(ctx, "keep", api.PutRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range put {
		if n.JobID <= p.JobID {
			t.Errorf("job id %d after the restart, not above %d of before", n.JobID, p.JobID)
		}
	}
}

// sameTask reports whether a and b are the same task in the same state,
// comparing times as instants.
func sameTask(a, b api.Task) bool {
	return a.ID == b.ID && a.JobID == b.JobID && a.Queue == b.Queue && a.State == b.State &&
		string(a.Payload) == string(b.Payload) && a.Priority == b.Priority && a.Due.Equal(b.Due) &&
		a.TTR == b.TTR && a.Attempts == b.Attempts && a.MaxAttempts == b.MaxAttempts && a.Created.Equal(b.Created)
}

// isAPIError reports whether a is an error answer of the API: JSON
// {"error":"hourglass: ..."} and nothing else.
func isAPIError(a answer) bool {
	var e map[string]any
	if json.Unmarshal(a.body, &e) != nil || len(e) != 1 || a.header.Get("Content-Type") != "application/json" {
		return false
	}
	msg, ok := e["error"].(string)
	return ok && strings.HasPrefix(msg, "hourglass: ") && len(msg) > len("hourglass: ")
}

// mustZone loads an IANA zone.
func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Skipf("no zone %s: %v", name, err)
	}
	return loc
}
