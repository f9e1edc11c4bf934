package e2e_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// badInputMaxPayload is the --max-payload of TestBadInput's server: small,
// so that payloads over it are cheap to send.
const badInputMaxPayload = 1024

// TestBadInput sends every kind of bad input of the issue over raw HTTP
// and checks each answer (status, a JSON error starting "hourglass: ",
// and for some what the message names), then that none of them changed
// anything: the queues, the tasks put before (one of them reserved, and
// still held by its lease), and the schedules read the same, byte for
// byte, before and after.
func TestBadInput(t *testing.T) { engines(t, testBadInput) }

func testBadInput(t *testing.T) {
	t.Parallel()
	s := startServer(t, withFlags("--max-payload", fmt.Sprint(badInputMaxPayload)))

	// The state the bad requests must not change.
	mustStatus(t, s.call("POST", "/v1/queues/q/tasks", `{"id":"existing","payload":{"v":1},"delay":"1h","priority":5}`), 201)
	mustStatus(t, s.call("POST", "/v1/queues/q/tasks", `{"id":"held","payload":"h","ttr":"1h"}`), 201)
	mustStatus(t, s.call("PUT", "/v1/schedules/s1", `{"cron":"@hourly","queue":"q","payload":1}`), 200)
	a := s.call("POST", "/v1/queues/q/reserve", `{"max":1}`)
	var rr struct {
		Tasks []struct{ ID, Lease string }
	}
	if err := json.Unmarshal(a.body, &rr); err != nil || len(rr.Tasks) != 1 || rr.Tasks[0].ID != "held" {
		t.Fatalf("reserve: %v", a)
	}
	lease := rr.Tasks[0].Lease
	before := snapshot(t, s, "existing", "held")

	long := strings.Repeat("x", 201)
	bigPayload := `"` + strings.Repeat("p", 2*badInputMaxPayload) + `"`
	hugeBody := `{"payload":"` + strings.Repeat("p", 70<<10) + `"}` // over max-payload + 64 KiB envelope
	cases := []struct {
		name, method, path, body string
		status                   int
		says                     string // the message contains it, if set
	}{
		// Malformed JSON and unknown fields.
		{"truncated JSON", "POST", "/v1/queues/q/tasks", `{"payload":`, 400, "malformed"},
		{"not JSON", "POST", "/v1/queues/q/tasks", `hello`, 400, "malformed"},
		{"array body", "POST", "/v1/queues/q/tasks", `[]`, 400, ""},
		{"trailing data", "POST", "/v1/queues/q/tasks", `{} {}`, 400, "trailing"},
		{"unknown field", "POST", "/v1/queues/q/tasks", `{"dealy":"1s"}`, 400, "dealy"},
		{"unknown field on an existing id", "POST", "/v1/queues/q/tasks", `{"id":"existing","replace":true,"x":1}`, 400, "x"},
		// Durations.
		{"number as delay", "POST", "/v1/queues/q/tasks", `{"delay":5}`, 400, "duration"},
		{"number as ttr", "POST", "/v1/queues/q/tasks", `{"ttr":60}`, 400, "duration"},
		{"number as delay, replacing", "POST", "/v1/queues/q/tasks", `{"id":"existing","replace":true,"delay":5}`, 400, "duration"},
		{"bad duration", "POST", "/v1/queues/q/tasks", `{"delay":"5 seconds"}`, 400, "duration"},
		{"negative delay", "POST", "/v1/queues/q/tasks", `{"delay":"-1s"}`, 400, "delay"},
		{"delay over max", "POST", "/v1/queues/q/tasks", `{"delay":"100000h"}`, 400, "delay"},
		{"ttr under 1ms", "POST", "/v1/queues/q/tasks", `{"ttr":"500us"}`, 400, "ttr"},
		{"negative ttr", "POST", "/v1/queues/q/tasks", `{"ttr":"-1s"}`, 400, "ttr"},
		{"ttr 0s", "POST", "/v1/queues/q/tasks", `{"ttr":"0s"}`, 400, "ttr"},
		{"ttr over a day", "POST", "/v1/queues/q/tasks", `{"ttr":"2562047h"}`, 400, "ttr"},
		{"ttr over a day, replacing", "POST", "/v1/queues/q/tasks", `{"id":"existing","replace":true,"ttr":"1000000h"}`, 400, "ttr"},
		// Payloads a strict JSON reader refuses.
		{"payload not UTF-8", "POST", "/v1/queues/q/tasks", "{\"payload\":\"caf\xe9\"}", 400, "UTF-8"},
		{"schedule payload not UTF-8", "PUT", "/v1/schedules/s2", "{\"cron\":\"@hourly\",\"queue\":\"q\",\"payload\":\"\xff\"}", 400, "UTF-8"},
		// Delay and at.
		{"delay and at", "POST", "/v1/queues/q/tasks", `{"delay":"1s","at":"2030-01-02T15:04:05Z"}`, 400, "not both"},
		{"delay 0s and at", "POST", "/v1/queues/q/tasks", `{"delay":"0s","at":"2030-01-02T15:04:05Z"}`, 400, "not both"},
		{"delay and at, replacing", "POST", "/v1/queues/q/tasks", `{"id":"existing","replace":true,"delay":"1s","at":"2030-01-02T15:04:05Z"}`, 400, ""},
		// Times.
		{"time in words", "POST", "/v1/queues/q/tasks", `{"at":"tomorrow"}`, 400, "time"},
		{"time without T", "POST", "/v1/queues/q/tasks", `{"at":"2030-01-02 15:04:05Z"}`, 400, "time"},
		{"time without zone", "POST", "/v1/queues/q/tasks", `{"at":"2030-01-02T15:04:05"}`, 400, "time"},
		{"number as time", "POST", "/v1/queues/q/tasks", `{"at":1893456000}`, 400, ""},
		{"zero time", "POST", "/v1/queues/q/tasks", `{"at":"0001-01-01T00:00:00Z"}`, 400, ""},
		{"time before 1970", "POST", "/v1/queues/q/tasks", `{"at":"1960-01-01T00:00:00Z"}`, 400, ""},
		{"time beyond max delay", "POST", "/v1/queues/q/tasks", `{"at":"2300-01-01T00:00:00Z"}`, 400, ""},
		// Numbers.
		{"negative priority", "POST", "/v1/queues/q/tasks", `{"priority":-1}`, 400, "priority"},
		{"priority over 2^32-1", "POST", "/v1/queues/q/tasks", `{"priority":4294967296}`, 400, "priority"},
		{"fractional priority", "POST", "/v1/queues/q/tasks", `{"priority":1.5}`, 400, "priority"},
		{"string priority", "POST", "/v1/queues/q/tasks", `{"priority":"1"}`, 400, "priority"},
		{"negative max_attempts", "POST", "/v1/queues/q/tasks", `{"max_attempts":-2}`, 400, "max_attempts"},
		{"max_attempts over 2^32-1", "POST", "/v1/queues/q/tasks", `{"max_attempts":4294967296}`, 400, "max_attempts"},
		{"string replace", "POST", "/v1/queues/q/tasks", `{"id":"existing","replace":"yes"}`, 400, "replace"},
		// Ids.
		{"id with a space", "POST", "/v1/queues/q/tasks", `{"id":"a b"}`, 400, "id"},
		{"id with a slash", "POST", "/v1/queues/q/tasks", `{"id":"a/b"}`, 400, "id"},
		{"id not ASCII", "POST", "/v1/queues/q/tasks", `{"id":"caf\u00e9"}`, 400, "id"},
		{"id with a control byte", "POST", "/v1/queues/q/tasks", `{"id":"a\u0001"}`, 400, "id"},
		{"id with DEL", "POST", "/v1/queues/q/tasks", `{"id":"a\u007f"}`, 400, "id"},
		{"id of 201 bytes", "POST", "/v1/queues/q/tasks", `{"id":"` + long + `"}`, 400, "id"},
		{"number as id", "POST", "/v1/queues/q/tasks", `{"id":7}`, 400, "id"},
		// Queue names.
		{"queue with a space", "POST", "/v1/queues/a%20b/tasks", `{}`, 400, "queue"},
		{"queue not ASCII", "POST", "/v1/queues/caf%C3%A9/tasks", `{}`, 400, "queue"},
		{"queue with a colon", "POST", "/v1/queues/a:b/tasks", `{}`, 400, "queue"},
		{"queue with an escaped slash", "POST", "/v1/queues/a%2Fb/tasks", `{}`, 400, "queue"},
		{"queue of 201 bytes", "POST", "/v1/queues/" + long + "/tasks", `{}`, 400, "queue"},
		{"reserve of a bad queue", "POST", "/v1/queues/a%20b/reserve", ``, 400, "queue"},
		// Sizes.
		{"payload over max", "POST", "/v1/queues/q/tasks", `{"payload":` + bigPayload + `}`, 413, ""},
		{"payload over max, replacing", "POST", "/v1/queues/q/tasks", `{"id":"existing","replace":true,"payload":` + bigPayload + `}`, 413, ""},
		{"body over the limit", "POST", "/v1/queues/q/tasks", hugeBody, 413, ""},
		{"schedule payload over max", "PUT", "/v1/schedules/s1", `{"cron":"@hourly","queue":"q","payload":` + bigPayload + `}`, 413, ""},
		// Reserve.
		{"reserve max 0", "POST", "/v1/queues/q/reserve", `{"max":0}`, 400, "max"},
		{"reserve max 1001", "POST", "/v1/queues/q/reserve", `{"max":1001}`, 400, "max"},
		{"reserve max -1", "POST", "/v1/queues/q/reserve", `{"max":-1}`, 400, "max"},
		{"reserve wait as a number", "POST", "/v1/queues/q/reserve", `{"wait":5}`, 400, "duration"},
		{"reserve wait over 5m", "POST", "/v1/queues/q/reserve", `{"wait":"6m"}`, 400, "wait"},
		{"reserve negative wait", "POST", "/v1/queues/q/reserve", `{"wait":"-1s"}`, 400, "wait"},
		{"reserve unknown field", "POST", "/v1/queues/q/reserve", `{"max":1,"timeout":"1s"}`, 400, "timeout"},
		{"reserve malformed", "POST", "/v1/queues/q/reserve", `{"max":`, 400, ""},
		// Leases: the held task must stay reserved under its lease.
		{"ack without body", "POST", "/v1/queues/q/tasks/held/ack", ``, 400, ""},
		{"ack without lease", "POST", "/v1/queues/q/tasks/held/ack", `{}`, 400, "lease"},
		{"ack with an empty lease", "POST", "/v1/queues/q/tasks/held/ack", `{"lease":""}`, 400, "lease"},
		{"ack with a stale lease", "POST", "/v1/queues/q/tasks/held/ack", `{"lease":"stale"}`, 409, ""},
		{"ack with an unknown field", "POST", "/v1/queues/q/tasks/held/ack", `{"lease":"` + lease + `","x":1}`, 400, "x"},
		{"ack of no task", "POST", "/v1/queues/q/tasks/nope/ack", `{"lease":"` + lease + `"}`, 404, ""},
		{"ack of a task not reserved", "POST", "/v1/queues/q/tasks/existing/ack", `{"lease":"` + lease + `"}`, 409, ""},
		{"touch without lease", "POST", "/v1/queues/q/tasks/held/touch", `{}`, 400, "lease"},
		{"touch with a stale lease", "POST", "/v1/queues/q/tasks/held/touch", `{"lease":"stale"}`, 409, ""},
		{"nack without lease", "POST", "/v1/queues/q/tasks/held/nack", `{"delay":"1s"}`, 400, "lease"},
		{"nack with a number delay", "POST", "/v1/queues/q/tasks/held/nack", `{"lease":"` + lease + `","delay":5}`, 400, "duration"},
		{"nack with a stale lease", "POST", "/v1/queues/q/tasks/held/nack", `{"lease":"stale"}`, 409, ""},
		{"nack of no task", "POST", "/v1/queues/q/tasks/nope/nack", `{"lease":"x"}`, 404, ""},
		{"kick of a reserved task", "POST", "/v1/queues/q/tasks/held/kick", ``, 409, ""},
		{"kick of a delayed task", "POST", "/v1/queues/q/tasks/existing/kick", ``, 409, ""},
		{"kick with a body", "POST", "/v1/queues/q/tasks/existing/kick", `{"x":1}`, 400, ""},
		{"kick of no task", "POST", "/v1/queues/q/tasks/nope/kick", ``, 404, ""},
		{"delete of no task", "DELETE", "/v1/queues/q/tasks/nope", ``, 404, ""},
		{"get of no task", "GET", "/v1/queues/q/tasks/nope", ``, 404, ""},
		{"get in another queue", "GET", "/v1/queues/other/tasks/existing", ``, 404, ""},
		// Batches as a whole.
		{"batch malformed", "POST", "/v1/queues/q/tasks:batch", `{"tasks":[`, 400, ""},
		{"batch without body", "POST", "/v1/queues/q/tasks:batch", ``, 400, ""},
		{"batch tasks not a list", "POST", "/v1/queues/q/tasks:batch", `{"tasks":{}}`, 400, ""},
		{"batch unknown field", "POST", "/v1/queues/q/tasks:batch", `{"tasks":[],"atomic":true}`, 400, "atomic"},
		{"batch over 1000 tasks", "POST", "/v1/queues/q/tasks:batch", batchOf(1001), 400, "1000"},
		// Schedules.
		{"bad cron line", "PUT", "/v1/schedules/s2", `{"cron":"61 * * * *","queue":"q"}`, 400, ""},
		{"cron with 3 fields", "PUT", "/v1/schedules/s2", `{"cron":"* * *","queue":"q"}`, 400, ""},
		{"@every without interval", "PUT", "/v1/schedules/s2", `{"cron":"@every","queue":"q"}`, 400, ""},
		{"bad cron replacing a schedule", "PUT", "/v1/schedules/s1", `{"cron":"nonsense","queue":"q"}`, 400, ""},
		{"empty cron", "PUT", "/v1/schedules/s2", `{"cron":"","queue":"q"}`, 400, ""},
		{"bad time zone", "PUT", "/v1/schedules/s2", `{"cron":"@hourly","queue":"q","timezone":"Mars/Olympus"}`, 400, "Mars/Olympus"},
		{"schedule of a bad queue", "PUT", "/v1/schedules/s2", `{"cron":"@hourly","queue":"a b"}`, 400, "queue"},
		{"schedule without queue", "PUT", "/v1/schedules/s2", `{"cron":"@hourly"}`, 400, "queue"},
		{"schedule with a bad name", "PUT", "/v1/schedules/a%20b", `{"cron":"@hourly","queue":"q"}`, 400, "name"},
		{"schedule unknown field", "PUT", "/v1/schedules/s2", `{"cron":"@hourly","queue":"q","tz":"UTC"}`, 400, "tz"},
		{"schedule without body", "PUT", "/v1/schedules/s2", ``, 400, ""},
		{"delete of no schedule", "DELETE", "/v1/schedules/s2", ``, 404, ""},
	}
	for _, c := range cases {
		a := s.call(c.method, c.path, c.body)
		if a.status != c.status || !isAPIError(a) {
			t.Errorf("%s: %s %s: %v; want %d with {\"error\":\"hourglass: ...\"}", c.name, c.method, c.path, short(a), c.status)
			continue
		}
		if c.says != "" && !strings.Contains(strings.ToLower(string(a.body)), strings.ToLower(c.says)) {
			t.Errorf("%s: %v; want a message naming %q", c.name, short(a), c.says)
		}
	}

	after := snapshot(t, s, "existing", "held")
	if before != after {
		t.Errorf("bad requests changed the server:\nbefore %s\nafter  %s", before, after)
	}
	// The held task is still held by the lease it had.
	mustStatus(t, s.call("POST", "/v1/queues/q/tasks/held/touch", `{"lease":"`+lease+`"}`), 200)

	// The limits themselves are accepted.
	id200 := strings.Repeat("~", 100) + strings.Repeat("!", 100)
	queue200 := strings.Repeat("q", 197) + "._-"
	mustStatus(t, s.call("POST", "/v1/queues/"+queue200+"/tasks", `{"id":"`+id200+`","priority":4294967295,"max_attempts":4294967295,"delay":"87599h"}`), 201)
	exact := `"` + strings.Repeat("p", badInputMaxPayload-2) + `"`
	mustStatus(t, s.call("POST", "/v1/queues/q/tasks", `{"id":"exact","payload":`+exact+`,"priority":0}`), 201)
	if a := s.call("GET", "/v1/queues/q/tasks/exact", ""); !bytes.Contains(a.body, []byte(exact)) {
		t.Errorf("payload of exactly the limit: %v", short(a))
	}
}

// TestBadInput_NewQueue sends refused puts to queues that hold no task
// yet, and checks that they change nothing: GET /v1/queues must not list
// those queues.
func TestBadInput_NewQueue(t *testing.T) { engines(t, testBadInput_NewQueue) }

func testBadInput_NewQueue(t *testing.T) {
	t.Parallel()
	s := startServer(t, withFlags("--max-payload", fmt.Sprint(badInputMaxPayload)))
	mustStatus(t, s.call("POST", "/v1/queues/q/tasks", `{"id":"existing"}`), 201)
	before := snapshot(t, s, "existing")
	for i, c := range []struct {
		body   string
		status int
	}{
		{`{"delay":"-1s"}`, 400},
		{`{"id":"a b"}`, 400},
		{`{"delay":"100000h"}`, 400},
		{`{"ttr":"1us"}`, 400},
		{`{"payload":"` + strings.Repeat("p", 2*badInputMaxPayload) + `"}`, 413},
	} {
		mustStatus(t, s.call("POST", fmt.Sprintf("/v1/queues/fresh%d/tasks", i), c.body), c.status)
	}
	mustStatus(t, s.call("POST", "/v1/queues/fresh-batch/tasks:batch", `{"tasks":[{"delay":"-1s"},{"id":"a b"}]}`), 200)
	if after := snapshot(t, s, "existing"); after != before {
		t.Errorf("refused puts to new queues changed the server:\nbefore %s\nafter  %s", before, after)
	}
}

// TestBadInput_BatchItems checks that bad items of a batch fail alone, in
// their place, and that the good ones are put.
func TestBadInput_BatchItems(t *testing.T) { engines(t, testBadInput_BatchItems) }

func testBadInput_BatchItems(t *testing.T) {
	t.Parallel()
	s := startServer(t, withFlags("--max-payload", fmt.Sprint(badInputMaxPayload)))
	big := strings.Repeat("p", 2*badInputMaxPayload)
	a := s.call("POST", "/v1/queues/b/tasks:batch", `{"tasks":[
		{"id":"good1","payload":1},
		{"id":"bad-number","delay":5},
		{"id":"bad id"},
		{"id":"good2","delay":"1h"},
		{"id":"bad-field","nope":1},
		{"id":"bad-both","delay":"1s","at":"2030-01-02T15:04:05Z"},
		{"id":"bad-size","payload":"`+big+`"},
		{"id":"bad-prio","priority":-1},
		{"id":"good1","payload":2}
	]}`)
	if a.status != 200 {
		t.Fatalf("batch: %v", short(a))
	}
	var res struct {
		Results []struct {
			Task *struct {
				ID    string `json:"id"`
				JobID uint64 `json:"job_id"`
				State string `json:"state"`
			} `json:"task"`
			Error string `json:"error"`
		} `json:"results"`
	}
	if err := json.Unmarshal(a.body, &res); err != nil || len(res.Results) != 9 {
		t.Fatalf("batch answer: %v (%v)", short(a), err)
	}
	for i, r := range res.Results {
		good := i == 0 || i == 3 || i == 8
		switch {
		case good && (r.Task == nil || r.Error != ""):
			t.Errorf("item %d: %+v, want a task", i, r)
		case !good && (r.Task != nil || !strings.HasPrefix(r.Error, "hourglass: ")):
			t.Errorf("item %d: %+v, want an error", i, r)
		}
	}
	if r := res.Results; r[0].Task != nil && r[8].Task != nil && r[8].Task.JobID != r[0].Task.JobID {
		t.Errorf("a repeated id in one batch made two tasks: %+v, %+v", r[0].Task, r[8].Task)
	}
	if a := s.call("GET", "/v1/queues", ""); strings.TrimSpace(string(a.body)) != `{"queues":[{"name":"b","delayed":1,"ready":1,"reserved":0,"dead":0}]}` {
		t.Errorf("queues after the batch: %v", a)
	}
	if a := s.call("GET", "/v1/queues/b/tasks/good1", ""); !strings.Contains(string(a.body), `"payload":1`) {
		t.Errorf("good1: %v", a)
	}
	for _, id := range []string{"bad-number", "bad-field", "bad-both", "bad-size", "bad-prio"} {
		mustStatus(t, s.call("GET", "/v1/queues/b/tasks/"+id, ""), 404)
	}

	// A batch naming a bad queue is refused whole, as a single put is.
	a = s.call("POST", "/v1/queues/a%20b/tasks:batch", `{"tasks":[{"id":"x"}]}`)
	if a.status != 400 || !strings.Contains(string(a.body), `"error":"hourglass: `) {
		t.Errorf("batch to a bad queue: %v", a)
	}
	// An empty batch is no error.
	if a := s.call("POST", "/v1/queues/b/tasks:batch", `{"tasks":[]}`); a.status != 200 || strings.TrimSpace(string(a.body)) != `{"results":[]}` {
		t.Errorf("empty batch: %v", a)
	}
}

// snapshot returns what the bad requests must not change: the queues, the
// schedules and the tasks ids of queue q, as the server answers them.
func snapshot(t *testing.T, s *server, ids ...string) string {
	t.Helper()
	var b strings.Builder
	for _, path := range []string{"/v1/queues", "/v1/schedules"} {
		a := s.call("GET", path, "")
		mustStatus(t, a, 200)
		b.Write(a.body)
	}
	for _, id := range ids {
		a := s.call("GET", "/v1/queues/q/tasks/"+id, "")
		mustStatus(t, a, 200)
		b.Write(a.body)
	}
	return b.String()
}

// batchOf returns a batch body of n good tasks.
func batchOf(n int) string {
	var b strings.Builder
	b.WriteString(`{"tasks":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":"many-%d"}`, i)
	}
	b.WriteString(`]}`)
	return b.String()
}

// mustStatus fails the test unless a has the status.
func mustStatus(t *testing.T, a answer, status int) {
	t.Helper()
	if a.status != status {
		t.Fatalf("got %v, want status %d", short(a), status)
	}
}

// short shortens an answer for a failure message.
func short(a answer) string {
	s := a.String()
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}
