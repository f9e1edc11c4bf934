package httpapi_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/httpapi"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// fullPolicy is a policy with every field set, and fullPolicyJSON the
// same on the wire.
var fullPolicy = task.Policy{
	Retry:       &task.Retry{Initial: time.Second, Max: time.Minute, Multiplier: 2, Jitter: 0.1},
	MaxAttempts: 5,
	TTR:         30 * time.Second,
	Rate:        &task.Rate{Limit: 10, Per: time.Second, Burst: 20},
	Concurrency: 3,
	DeadLetter:  "mail-dead",
}

const fullPolicyJSON = `{"retry":{"initial":"1s","max":"1m0s","multiplier":2,"jitter":0.1},"max_attempts":5,"ttr":"30s",` +
	`"rate":{"limit":10,"per":"1s","burst":20},"concurrency":3,"dead_letter":"mail-dead"}`

// fullEffectiveJSON is the "effective" of fullPolicy: its fields that
// have defaults.
const fullEffectiveJSON = `{"retry":{"initial":"1s","max":"1m0s","multiplier":2,"jitter":0.1},"max_attempts":5,"ttr":"30s"}`

// withEffective is policy (its JSON) as answered, with effective (the
// JSON of its fields as the server applies them) beside it.
func withEffective(policy, effective string) string {
	if policy == "{}" {
		return `{"effective":` + effective + `}`
	}
	return policy[:len(policy)-1] + `,"effective":` + effective + `}`
}

// defaultsJSON is the effective policy of a queue without one: the
// default back-off, 25 attempts and the server's ttr (1m).
const defaultsJSON = `{"retry":{"initial":"1s","max":"1h0m0s","multiplier":2,"jitter":0.1},"max_attempts":25,"ttr":"1m0s"`

// TestPolicyRoutes checks PUT, GET and DELETE of a queue's policy: the
// body reaches the service as it was sent, and the answer is the policy
// the service recorded.
func TestPolicyRoutes(t *testing.T) {
	s, f := newServer(t, httpapi.Options{})
	var got task.Policy
	f.setPolicy = func(queue string, p task.Policy) (task.Policy, error) {
		if queue != "mail" {
			t.Errorf("SetPolicy of queue %q", queue)
		}
		got = p
		return service.NormalPolicy(p), nil
	}
	w := do(s, "PUT", "/v1/queues/mail/policy", fullPolicyJSON)
	if body, want := strings.TrimSpace(w.Body.String()), withEffective(fullPolicyJSON, fullEffectiveJSON); w.Code != 200 || body != want {
		t.Errorf("PUT: %d\n got %s\nwant %s", w.Code, body, want)
	}
	// A policy read, "effective" and all, can be written back.
	w = do(s, "PUT", "/v1/queues/mail/policy", withEffective(fullPolicyJSON, fullEffectiveJSON))
	if body, want := strings.TrimSpace(w.Body.String()), withEffective(fullPolicyJSON, fullEffectiveJSON); w.Code != 200 || body != want {
		t.Errorf("PUT of a policy read: %d\n got %s\nwant %s", w.Code, body, want)
	}
	if fmt.Sprint(got.Retry, got.Rate, got.MaxAttempts, got.TTR, got.Concurrency, got.DeadLetter) !=
		fmt.Sprint(fullPolicy.Retry, fullPolicy.Rate, fullPolicy.MaxAttempts, fullPolicy.TTR, fullPolicy.Concurrency, fullPolicy.DeadLetter) {
		t.Errorf("SetPolicy got %+v, want %+v", got, fullPolicy)
	}

	// The burst the service fills in comes back; absent fields stay out.
	w = do(s, "PUT", "/v1/queues/mail/policy", `{"rate":{"limit":5,"per":"1m"}}`)
	rate := `{"rate":{"limit":5,"per":"1m0s","burst":5}}`
	if want := withEffective(rate, defaultsJSON+`}`); strings.TrimSpace(w.Body.String()) != want {
		t.Errorf("PUT rate without burst: %d %s, want %s", w.Code, w.Body.String(), want)
	}
	if w, want := do(s, "PUT", "/v1/queues/mail/policy", `{}`), withEffective(`{}`, defaultsJSON+`}`); w.Code != 200 || strings.TrimSpace(w.Body.String()) != want {
		t.Errorf("PUT {}: %d %s, want %s", w.Code, w.Body.String(), want)
	}

	f.policy = func(queue string) (task.Policy, error) { return task.Policy{}, nil }
	if w, want := do(s, "GET", "/v1/queues/mail/policy", ""), withEffective(`{}`, defaultsJSON+`}`); w.Code != 200 || strings.TrimSpace(w.Body.String()) != want {
		t.Errorf("GET without a policy: %d %s, want %s", w.Code, w.Body.String(), want)
	}
	f.policy = func(queue string) (task.Policy, error) { return fullPolicy, nil }
	if w, want := do(s, "GET", "/v1/queues/mail/policy", ""), withEffective(fullPolicyJSON, fullEffectiveJSON); w.Code != 200 || strings.TrimSpace(w.Body.String()) != want {
		t.Errorf("GET: %d %s, want %s", w.Code, w.Body.String(), want)
	}
	// Immediate retries and unlimited attempts, explicit, read as such.
	f.policy = func(queue string) (task.Policy, error) {
		return task.Policy{Retry: &task.Retry{}, MaxAttempts: task.UnlimitedAttempts}, nil
	}
	explicit := `{"retry":{"initial":"0s","max":"0s","multiplier":0,"jitter":0},"max_attempts":-1}`
	if w, want := do(s, "GET", "/v1/queues/mail/policy", ""), withEffective(explicit, explicit[:len(explicit)-1]+`,"ttr":"1m0s"}`); w.Code != 200 || strings.TrimSpace(w.Body.String()) != want {
		t.Errorf("GET of immediate retries, unlimited attempts: %d %s, want %s", w.Code, w.Body.String(), want)
	}

	var calls []string
	f.other = func(op string, args ...string) error {
		calls = append(calls, fmt.Sprint(op, args))
		return nil
	}
	f.setPolicy = nil // a DELETE is the engine's SetQueue of the zero policy
	if w := do(s, "DELETE", "/v1/queues/mail/policy", ""); w.Code != 204 || w.Body.Len() != 0 {
		t.Errorf("DELETE: %d %q", w.Code, w.Body.String())
	}
	if got := strings.Join(calls, "|"); got != "deletePolicy[mail]" {
		t.Errorf("calls %s", got)
	}
	if w := do(s, "POST", "/v1/queues/mail/policy", "{}"); w.Code != 405 || w.Header().Get("Allow") != "PUT, GET, PATCH, DELETE, HEAD" {
		t.Errorf("POST: %d, Allow %q", w.Code, w.Header().Get("Allow"))
	}
}

// TestPolicyRefused checks that a policy bad on the wire is refused
// before the service sees it, and that the service's refusal (a field out
// of range) answers 400 with its message naming the field.
func TestPolicyRefused(t *testing.T) {
	s, f := newServer(t, httpapi.Options{})
	for _, tc := range []struct{ body, want string }{
		{``, "empty body"},
		{`{"colour":"red"}`, `unknown field "colour"`},
		{`{"retry":{"initial":"1s","max":"1s","multiplier":1,"jitter":0,"base":2}}`, `unknown field "base"`},
		{`{"ttr":30}`, "not a number"},
		{`{"retry":{"initial":"soon"}}`, `bad duration "soon"`},
		{`{"max_attempts":"3"}`, `field "max_attempts"`},
		{`{"concurrency":1.5}`, `field "concurrency"`},
		{`{"rate":[1]}`, `field "rate"`},
		{`{"concurrency":0}`, "policy: concurrency 0: give at least 1"},
		{`{"ttr":"0s"}`, "policy: ttr 0s: give 1ms or more"},
		{`{"push":{"url":"http://127.0.0.1:1/","timeout":"0s"}}`, "policy: push.timeout 0s: give 1ms or more"},
		{`{} {}`, "trailing data"},
	} {
		w := do(s, "PUT", "/v1/queues/q/policy", tc.body)
		if msg := errorText(t, w); w.Code != 400 || !strings.Contains(msg, tc.want) {
			t.Errorf("%s: %d %s, want 400 with %q", tc.body, w.Code, msg, tc.want)
		}
	}
	if n := f.Calls(); n != 0 {
		t.Errorf("%d calls reached the service", n)
	}

	// The service's checks, as both engines make them.
	f.setPolicy = func(queue string, p task.Policy) (task.Policy, error) {
		if err := service.CheckPolicy(queue, p); err != nil {
			return task.Policy{}, err
		}
		return p, nil
	}
	for _, tc := range []struct{ body, field string }{
		{`{"retry":{"initial":"-1s","max":"1s","multiplier":2,"jitter":0}}`, "retry.initial"},
		{`{"retry":{"initial":"0s","max":"1s","multiplier":2,"jitter":0}}`, "retry.max"},
		{`{"retry":{"initial":"2s","max":"1s","multiplier":2,"jitter":0}}`, "retry.max"},
		{`{"retry":{"initial":"1s","max":"1s","multiplier":0.5,"jitter":0}}`, "retry.multiplier"},
		{`{"retry":{"initial":"1s","max":"1s","multiplier":2,"jitter":1.5}}`, "retry.jitter"},
		{`{"max_attempts":-2}`, "max_attempts"},
		{`{"ttr":"-1s"}`, "ttr"},
		{`{"rate":{"limit":0,"per":"1s"}}`, "rate.limit"},
		{`{"rate":{"limit":1,"per":"0s"}}`, "rate.per"},
		{`{"rate":{"limit":1,"per":"1s","burst":-1}}`, "rate.burst"},
		{`{"concurrency":-2}`, "concurrency"},
		{`{"concurrency":1000001}`, "concurrency"},
		{`{"dead_letter":"q"}`, "dead_letter"},
		{`{"dead_letter":"a b"}`, "dead_letter"},
	} {
		w := do(s, "PUT", "/v1/queues/q/policy", tc.body)
		if msg := errorText(t, w); w.Code != 400 || !strings.Contains(msg, "policy: "+tc.field+" ") && !strings.Contains(msg, "policy: "+tc.field+":") {
			t.Errorf("%s: %d %s, want 400 naming %s", tc.body, w.Code, msg, tc.field)
		}
	}
}

// TestPauseResume checks the pause and resume routes: a pause without a
// length lasts until resumed, one of 0s or less is refused, and resume is
// a pause of 0.
func TestPauseResume(t *testing.T) {
	s, f := newServer(t, httpapi.Options{})
	var calls []string
	f.other = func(op string, args ...string) error {
		calls = append(calls, fmt.Sprint(op, args))
		if args[1] == (time.Hour * 24 * 365 * 20).String() {
			return fmt.Errorf("%w: pause must be 0 to 87600h0m0s", task.ErrInvalid)
		}
		return nil
	}
	for _, tc := range []struct {
		path, body string
		status     int
	}{
		{"pause", ``, 204},
		{"pause", `{}`, 204},
		{"pause", `{"for":"10m"}`, 204},
		{"pause", `{"for":"175200h"}`, 400}, // over the service's max delay
		{"pause", `{"for":"0s"}`, 400},
		{"pause", `{"for":"-1s"}`, 400},
		{"pause", `{"for":600}`, 400},
		{"pause", `{"until":"10m"}`, 400},
		{"resume", ``, 204},
		{"resume", `{}`, 204},
		{"resume", `{"for":"1s"}`, 400},
	} {
		w := do(s, "POST", "/v1/queues/q/"+tc.path, tc.body)
		if w.Code != tc.status {
			t.Errorf("%s %s: %d %s, want %d", tc.path, tc.body, w.Code, w.Body.String(), tc.status)
		}
		if w.Code == 204 && w.Body.Len() != 0 {
			t.Errorf("%s %s: 204 with a body %q", tc.path, tc.body, w.Body.String())
		}
		if w.Code == 400 {
			errorText(t, w)
		}
	}
	forever := task.PauseIndefinitely.String()
	want := "pause[q " + forever + "]|pause[q " + forever + "]|pause[q 10m0s]|pause[q 0s]|pause[q 0s]"
	if got := strings.Join(calls, "|"); got != want {
		t.Errorf("calls\n got %s\nwant %s", got, want)
	}
}

// TestReleaseBury checks the release and bury routes and the error text
// of a nack: what reaches the service, the answer (the task, without its
// lease), and what is refused on the wire.
func TestReleaseBury(t *testing.T) {
	s, f := newServer(t, httpapi.Options{})
	var calls []string
	f.lease = func(op, queue, id, lease string, delay time.Duration) (task.Task, error) {
		calls = append(calls, fmt.Sprint(op, " ", queue, " ", id, " ", lease, " ", delay))
		tk := sample()
		tk.State, tk.LastError = task.Dead, f.Reason()
		return tk, nil
	}
	for _, tc := range []struct {
		path, body string
		status     int
		reason     string
	}{
		{"release", `{"lease":"L1"}`, 200, ""},
		{"release", `{"lease":"L1","delay":"5s"}`, 200, ""},
		{"bury", `{"lease":"L1"}`, 200, ""},
		{"bury", `{"lease":"L1","error":"smtp: 550 no such user"}`, 200, "smtp: 550 no such user"},
		{"nack", `{"lease":"L1","error":"timeout","delay":"0s"}`, 200, "timeout"},
		{"release", `{}`, 400, ""},
		{"bury", `{"error":"x"}`, 400, ""},
		{"release", `{"lease":"L1","delay":"-1s"}`, 400, ""},
		{"nack", `{"lease":"L1","delay":"-1ns"}`, 400, ""},
		{"release", `{"lease":"L1","error":"x"}`, 400, ""},
		{"bury", `{"lease":"L1","delay":"1s"}`, 400, ""},
		{"bury", ``, 400, ""},
	} {
		w := do(s, "POST", "/v1/queues/q/tasks/a/"+tc.path, tc.body)
		if w.Code != tc.status {
			t.Errorf("%s %s: %d %s, want %d", tc.path, tc.body, w.Code, w.Body.String(), tc.status)
			continue
		}
		if w.Code != 200 {
			errorText(t, w)
			continue
		}
		body := w.Body.String()
		if strings.Contains(body, `"lease":`) {
			t.Errorf("%s answers the lease: %s", tc.path, body)
		}
		if want := `"last_error":"` + tc.reason + `"`; tc.reason != "" && !strings.Contains(body, want) {
			t.Errorf("%s %s: %s, want %s", tc.path, tc.body, body, want)
		}
	}
	want := "release q a L1 0s|release q a L1 5s|bury q a L1 0s|bury q a L1 0s|nack q a L1 0s"
	if got := strings.Join(calls, "|"); got != want {
		t.Errorf("calls\n got %s\nwant %s", got, want)
	}

	// An error text over api.MaxError bytes is kept cut, at a UTF-8
	// boundary.
	long := strings.Repeat("é", api.MaxError) // 2 bytes each
	for _, path := range []string{"nack", "bury"} {
		if w := do(s, "POST", "/v1/queues/q/tasks/a/"+path, `{"lease":"L1","error":"`+long+`"}`); w.Code != 200 {
			t.Errorf("%s with a long error: %d %s", path, w.Code, w.Body.String())
		}
		if got := f.Reason(); len(got) != api.MaxError || got != long[:api.MaxError] {
			t.Errorf("%s: the service got %d bytes, want the first %d", path, len(got), api.MaxError)
		}
	}
}

// TestTaskLeaseAndError checks lease_expires (while reserved, in UTC) and
// last_error in a task's JSON.
func TestTaskLeaseAndError(t *testing.T) {
	s, f := newServer(t, httpapi.Options{})
	until := time.Date(2030, 1, 2, 4, 5, 0, 500, time.FixedZone("X", 3600))
	state := task.Reserved
	f.get = func(queue, id string) (task.Task, error) {
		tk := sample()
		tk.State, tk.LeaseUntil, tk.LastError = state, until, `refused: "quota"`
		return tk, nil
	}
	w := do(s, "GET", "/v1/queues/q/tasks/a", "")
	want := strings.TrimSuffix(sampleJSON, "}") + `,"lease_expires":"2030-01-02T03:05:00.0000005Z","last_error":"refused: \"quota\""}`
	if got := strings.TrimSpace(w.Body.String()); w.Code != 200 || got != want {
		t.Errorf("reserved task:\n got %s\nwant %s", got, want)
	}
	state = task.Ready
	w = do(s, "GET", "/v1/queues/q/tasks/a", "")
	if got := w.Body.String(); strings.Contains(got, "lease_expires") || !strings.Contains(got, `"last_error"`) {
		t.Errorf("ready task: %s, want last_error and no lease_expires", got)
	}
}

// TestQueuesPauseAndPolicy checks what GET /v1/queues shows of each
// queue's pause and policy.
func TestQueuesPauseAndPolicy(t *testing.T) {
	s, f := newServer(t, httpapi.Options{})
	until := time.Now().Add(time.Hour).Round(time.Millisecond)
	f.queues = func() []task.QueueStats {
		return []task.QueueStats{
			{Name: "a", PausedUntil: task.PausedForever},
			{Name: "b", PausedUntil: until.In(time.FixedZone("X", 7200))},
			{Name: "c", PausedUntil: time.Now().Add(-time.Second), Policy: task.Policy{Concurrency: 1}},
			{Name: "d"},
		}
	}
	w := do(s, "GET", "/v1/queues", "")
	untilJSON := until.UTC().Format(time.RFC3339Nano)
	want := `{"queues":[{"name":"a","delayed":0,"ready":0,"reserved":0,"dead":0,"paused":true},` +
		`{"name":"b","delayed":0,"ready":0,"reserved":0,"dead":0,"paused":true,"paused_until":"` + untilJSON + `"},` +
		`{"name":"c","delayed":0,"ready":0,"reserved":0,"dead":0,"policy":{"concurrency":1}},` +
		`{"name":"d","delayed":0,"ready":0,"reserved":0,"dead":0}]}`
	if got := strings.TrimSpace(w.Body.String()); w.Code != 200 || got != want {
		t.Errorf("queues: %d\n got %s\nwant %s", w.Code, got, want)
	}
}

// TestPolicyDefaultsAgree: the defaults package api states for clients
// are the ones the service applies.
func TestPolicyDefaultsAgree(t *testing.T) {
	r := service.DefaultRetry
	if got := (api.Retry{Initial: api.Duration(r.Initial), Max: api.Duration(r.Max), Multiplier: r.Multiplier, Jitter: r.Jitter}); got != api.DefaultRetry {
		t.Errorf("api.DefaultRetry %+v; the service's %+v", api.DefaultRetry, got)
	}
	if api.DefaultMaxAttempts != service.DefaultMaxAttempts || api.UnlimitedAttempts != task.UnlimitedAttempts ||
		api.AttemptsKeptFirst != task.AttemptsKeptFirst || api.AttemptsKeptLast != task.AttemptsKeptLast {
		t.Errorf("api's max_attempts %d, unlimited %d, kept %d+%d; the service's %d, %d, %d+%d",
			api.DefaultMaxAttempts, api.UnlimitedAttempts, api.AttemptsKeptFirst, api.AttemptsKeptLast,
			service.DefaultMaxAttempts, task.UnlimitedAttempts, task.AttemptsKeptFirst, task.AttemptsKeptLast)
	}
}

// TestPolicyPerKey checks per_key on the wire: PUT sends it to the
// service and answers it, GET shows it, PATCH merges into it (and null
// drops it), and a per_key.concurrency of 0, a per_key with no limit and
// one out of range are refused with 400 naming the field.
func TestPolicyPerKey(t *testing.T) {
	s, f := newServer(t, httpapi.Options{})
	stored := task.Policy{}
	f.setPolicy = func(queue string, p task.Policy) (task.Policy, error) {
		if err := service.CheckPolicy(queue, p); err != nil {
			return task.Policy{}, err
		}
		stored = service.NormalPolicy(p)
		return stored, nil
	}
	f.policy = func(queue string) (task.Policy, error) { return stored, nil }
	const pk = `{"concurrency":3,"per_key":{"concurrency":2}}`
	if w, want := do(s, "PUT", "/v1/queues/q/policy", pk), withEffective(pk, defaultsJSON+`}`); w.Code != 200 || strings.TrimSpace(w.Body.String()) != want {
		t.Errorf("PUT: %d %s, want %s", w.Code, w.Body.String(), want)
	}
	if stored.PerKey == nil || stored.PerKey.Concurrency != 2 || stored.Concurrency != 3 {
		t.Fatalf("the service got %+v", stored)
	}
	if w, want := do(s, "GET", "/v1/queues/q/policy", ""), withEffective(pk, defaultsJSON+`}`); w.Code != 200 || strings.TrimSpace(w.Body.String()) != want {
		t.Errorf("GET: %d %s, want %s", w.Code, w.Body.String(), want)
	}
	w := do(s, "PATCH", "/v1/queues/q/policy", `{"per_key":{"concurrency":5}}`)
	if w.Code != 200 || stored.PerKey == nil || stored.PerKey.Concurrency != 5 || stored.Concurrency != 3 {
		t.Errorf("PATCH per_key.concurrency 5: %d %s; stored %+v", w.Code, w.Body.String(), stored)
	}
	w = do(s, "PATCH", "/v1/queues/q/policy", `{"per_key":null}`)
	if w.Code != 200 || stored.PerKey != nil || stored.Concurrency != 3 {
		t.Errorf("PATCH per_key null: %d %s; stored %+v", w.Code, w.Body.String(), stored)
	}
	for _, tc := range []struct{ body, want string }{
		{`{"per_key":{"concurrency":0}}`, "policy: per_key.concurrency 0: give at least 1"},
		{`{"per_key":{}}`, "policy: per_key without a limit"},
		{`{"per_key":{"concurrency":1000001}}`, "policy: per_key.concurrency 1000001 out of range"},
		{`{"per_key":{"concurrency":1,"rate":{"limit":0,"per":"1s"}}}`, "policy: per_key.rate.limit 0 out of range"},
		{`{"per_key":{"rate":{"limit":1,"per":"0s"}}}`, "policy: per_key.rate.per 0s out of range"},
		{`{"per_key":{"colour":1}}`, `unknown field "colour"`},
	} {
		w := do(s, "PUT", "/v1/queues/q/policy", tc.body)
		if msg := errorText(t, w); w.Code != 400 || !strings.Contains(msg, tc.want) {
			t.Errorf("%s: %d %s, want 400 with %q", tc.body, w.Code, msg, tc.want)
		}
	}
}
