package e2e_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/client"
)

// The black-box tests of queue policies (retry back-off, put defaults,
// dead-letter queues), a lease running out as a failed attempt, release
// and bury, and pauses: over package client and raw HTTP, on both
// engines. Rate and concurrency over several nodes are the cluster
// package's tests; here one node of each engine, and the beanstalkd
// protocol obeying a policy set over HTTP.

// clockSlack returns how far from the client's clock a time the server
// of t's engine reports (a due time, a lease's or a pause's end) may be.
// The embedded engine computes them from the machine's clock: 1 ms. A
// cluster node computes them from its estimate of the database's clock,
// taken from one round trip each lease round (cluster/clock.go), which is
// off by up to half that trip either way: 60 ms was seen on two loaded
// cores, so 250 ms. Checks of when a task is handed out allow no slack: a
// reserve is judged by the database's clock, which is the machine's.
func clockSlack(t *testing.T) time.Duration {
	if engineOf(t) == clusterEngine {
		return 250 * time.Millisecond
	}
	return time.Millisecond
}

// TestPolicy_Routes sets, reads and deletes policies, checks that a put
// takes a policy's defaults, that every bad policy is refused with 400
// naming the field and changes nothing, and that a policy survives
// SIGKILL.
func TestPolicy_Routes(t *testing.T) { engines(t, testPolicyRoutes) }

func testPolicyRoutes(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.client()
	ctx := context.Background()

	// Without a policy: the defaults, as if the policy were a back-off of
	// 1s doubling to 1h (±10%) and 25 attempts, the server's ttr.
	const defaults = `{"effective":{"retry":{"initial":"1s","max":"1h0m0s","multiplier":2,"jitter":0.1},"max_attempts":25,"ttr":"1m0s"}}`
	if a := s.call("GET", "/v1/queues/mail/policy", ""); a.status != 200 || strings.TrimSpace(string(a.body)) != defaults {
		t.Fatalf("GET policy of a queue without one: %v, want 200 %s", a, defaults)
	}
	if p, err := c.Policy(ctx, "mail"); err != nil || p.Retry != nil || p.Effective == nil || p.Effective.Retry == nil ||
		*p.Effective.Retry != api.DefaultRetry || p.Effective.MaxAttempts != api.DefaultMaxAttempts {
		t.Fatalf("client's Policy of a queue without one: %+v, %v; want the defaults as effective", p, err)
	}
	const full = `{"retry":{"initial":"1s","max":"1m0s","multiplier":2,"jitter":0.1},"max_attempts":5,"ttr":"30s",` +
		`"rate":{"limit":100,"per":"1s"},"concurrency":10,"dead_letter":"mail-dead"}`
	const policy = `{"retry":{"initial":"1s","max":"1m0s","multiplier":2,"jitter":0.1},"max_attempts":5,"ttr":"30s",` +
		`"rate":{"limit":100,"per":"1s","burst":100},"concurrency":10,"dead_letter":"mail-dead"`
	const recorded = policy + `,"effective":{"retry":{"initial":"1s","max":"1m0s","multiplier":2,"jitter":0.1},"max_attempts":5,"ttr":"30s"}}`
	if a := s.call("PUT", "/v1/queues/mail/policy", full); a.status != 200 || strings.TrimSpace(string(a.body)) != recorded {
		t.Fatalf("PUT policy: %v\nwant 200 %s", a, recorded)
	}
	if a := s.call("GET", "/v1/queues/mail/policy", ""); a.status != 200 || strings.TrimSpace(string(a.body)) != recorded {
		t.Fatalf("GET policy: %v\nwant 200 %s", a, recorded)
	}

	// A put that gives no ttr or max_attempts takes the policy's; one
	// that gives them keeps its own.
	tk, _, err := c.Put(ctx, "mail", api.PutRequest{ID: "defaults"})
	if err != nil || tk.TTR.D() != 30*time.Second || tk.MaxAttempts != 5 {
		t.Errorf("put without ttr and max_attempts: %+v, %v; want the policy's 30s and 5", tk, err)
	}
	tk, _, err = c.Put(ctx, "mail", api.PutRequest{ID: "own", TTR: new(api.Duration(time.Minute)), MaxAttempts: 2})
	if err != nil || tk.TTR.D() != time.Minute || tk.MaxAttempts != 2 {
		t.Errorf("put with its own ttr and max_attempts: %+v, %v", tk, err)
	}
	qs, err := c.Queues(ctx)
	if q := findQueue(qs, "mail"); err != nil || q == nil || q.Policy == nil || q.Policy.Concurrency != 10 || q.Policy.DeadLetter != "mail-dead" || q.Paused {
		t.Errorf("GET /v1/queues: %+v, %v; want mail with its policy, not paused", q, err)
	}

	// Every bad policy is refused, naming the field, and changes nothing.
	for _, tc := range []struct{ body, field string }{
		{`{"retry":{"initial":"0s","max":"1s","multiplier":2,"jitter":0}}`, "retry.max"},
		{`{"retry":{"initial":"0s","multiplier":0.5}}`, "retry.multiplier"},
		{`{"retry":{"initial":"-1s","max":"1s","multiplier":2,"jitter":0}}`, "retry.initial"},
		{`{"retry":{"initial":"9000h","max":"9000h","multiplier":2,"jitter":0}}`, "retry.initial"},
		{`{"retry":{"initial":"2s","max":"1s","multiplier":2,"jitter":0}}`, "retry.max"},
		{`{"retry":{"initial":"1s","max":"1s","multiplier":0.5,"jitter":0}}`, "retry.multiplier"},
		{`{"retry":{"initial":"1s","max":"1s","multiplier":1001,"jitter":0}}`, "retry.multiplier"},
		{`{"retry":{"initial":"1s","max":"1s","multiplier":2,"jitter":-0.1}}`, "retry.jitter"},
		{`{"retry":{"initial":"1s","max":"1s","multiplier":2,"jitter":1.5}}`, "retry.jitter"},
		{`{"max_attempts":-2}`, "max_attempts"},
		{`{"max_attempts":4294967296}`, "max_attempts"},
		{`{"ttr":"-1s"}`, "ttr"},
		{`{"ttr":"0s"}`, "ttr"},
		{`{"ttr":"1us"}`, "ttr"},
		{`{"ttr":"25h"}`, "ttr"},
		{`{"rate":{"limit":0,"per":"1s"}}`, "rate.limit"},
		{`{"rate":{"limit":1,"per":"0s"}}`, "rate.per"},
		{`{"rate":{"limit":1,"per":"25h"}}`, "rate.per"},
		{`{"rate":{"limit":1,"per":"1s","burst":-1}}`, "rate.burst"},
		{`{"concurrency":-1}`, "concurrency"},
		{`{"concurrency":0}`, "concurrency"},
		{`{"concurrency":1000001}`, "concurrency"},
		{`{"dead_letter":"mail"}`, "dead_letter"},
		{`{"dead_letter":"a b"}`, "dead_letter"},
		{`{"retry":{"initial":"1s","max":"1s","multiplier":2,"jitter":0,"base":3}}`, `"base"`},
		{`{"concurrency":1,"colour":"red"}`, `"colour"`},
		{`{"ttr":30}`, "duration"},
		{`{"max_attempts":"5"}`, "max_attempts"},
	} {
		a := s.call("PUT", "/v1/queues/mail/policy", tc.body)
		var e api.Error
		if a.status != 400 || json.Unmarshal(a.body, &e) != nil || !strings.HasPrefix(e.Error, "hourglass: ") || !strings.Contains(e.Error, tc.field) {
			t.Errorf("PUT %s: %v; want 400 naming %s", tc.body, a, tc.field)
		}
	}
	if a := s.call("GET", "/v1/queues/mail/policy", ""); strings.TrimSpace(string(a.body)) != recorded {
		t.Errorf("policy after the refused ones: %v\nwant %s", a, recorded)
	}

	// Immediate retries and unlimited attempts, asked for explicitly,
	// are recorded as such, not read back as the defaults.
	const explicit = `{"retry":{"initial":"0s","max":"0s","multiplier":0,"jitter":0},"max_attempts":-1`
	const explicitRecorded = explicit + `,"effective":` + explicit + `,"ttr":"1m0s"}}`
	if a := s.call("PUT", "/v1/queues/now/policy", `{"retry":{"initial":"0s"},"max_attempts":-1}`); a.status != 200 || strings.TrimSpace(string(a.body)) != explicitRecorded {
		t.Fatalf("PUT immediate retries, unlimited attempts: %v\nwant 200 %s", a, explicitRecorded)
	}
	if tk, _, err := c.Put(ctx, "now", api.PutRequest{ID: "u"}); err != nil || tk.MaxAttempts != 0 {
		t.Errorf("put into a queue of unlimited attempts: %+v, %v; want max_attempts 0 (no limit)", tk, err)
	}
	if tk, _, err := c.Put(ctx, "no-policy", api.PutRequest{ID: "d"}); err != nil || tk.MaxAttempts != api.DefaultMaxAttempts {
		t.Errorf("put into a queue without a policy: %+v, %v; want max_attempts %d", tk, err, api.DefaultMaxAttempts)
	}
	if tk, _, err := c.Put(ctx, "no-policy", api.PutRequest{ID: "u", MaxAttempts: api.UnlimitedAttempts}); err != nil || tk.MaxAttempts != 0 {
		t.Errorf("put of unlimited attempts: %+v, %v; want max_attempts 0 (no limit)", tk, err)
	}

	// A policy survives SIGKILL; so does its deletion.
	if _, err := c.SetPolicy(ctx, "gone", api.Policy{MaxAttempts: 3}); err != nil {
		t.Fatal(err)
	}
	if err := c.DeletePolicy(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if a := s.call("DELETE", "/v1/queues/never/policy", ""); a.status != 204 {
		t.Errorf("DELETE of a policy never set: %v, want 204", a)
	}
	s.kill()
	s.start()
	if a := s.call("GET", "/v1/queues/mail/policy", ""); a.status != 200 || strings.TrimSpace(string(a.body)) != recorded {
		t.Errorf("policy after SIGKILL: %v\nwant 200 %s", a, recorded)
	}
	if p, err := c.Policy(ctx, "gone"); err != nil || p.MaxAttempts != 0 || p.Retry != nil {
		t.Errorf("deleted policy after SIGKILL: %+v, %v; want none", p, err)
	}
	if a := s.call("GET", "/v1/queues/now/policy", ""); a.status != 200 || strings.TrimSpace(string(a.body)) != explicitRecorded {
		t.Errorf("immediate retries, unlimited attempts after SIGKILL: %v\nwant 200 %s", a, explicitRecorded)
	}
	if tk, _, err := c.Put(ctx, "mail", api.PutRequest{ID: "after"}); err != nil || tk.MaxAttempts != 5 {
		t.Errorf("put after SIGKILL: %+v, %v; want the policy's max_attempts 5", tk, err)
	}
}

// TestPolicy_Backoff nacks a task without a delay under a retry policy:
// each attempt comes back after the back-off of its number, within the
// jitter and never early, each nack answers the task with its error, and
// the last attempt's nack moves it to the dead-letter queue.
func TestPolicy_Backoff(t *testing.T) { engines(t, testPolicyBackoff) }

func testPolicyBackoff(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.client()
	ctx := context.Background()
	const (
		initial = 300 * time.Millisecond
		jitter  = 0.2
	)
	if _, err := c.SetPolicy(ctx, "bo", api.Policy{
		Retry:       &api.Retry{Initial: api.Duration(initial), Max: api.Duration(2 * initial), Multiplier: 3, Jitter: jitter},
		MaxAttempts: 3,
		DeadLetter:  "bo-dead",
	}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Put(ctx, "bo", api.PutRequest{ID: "x", Payload: json.RawMessage(`{"n":1}`)}); err != nil {
		t.Fatal(err)
	}
	// Attempt 1 fails: back after initial; attempt 2: after
	// min(max, 3 × initial) = max.
	var due time.Time
	for n, backoff := range []time.Duration{initial, 2 * initial} {
		tk := reserveOne(t, c, "bo", 5*time.Second)
		if at := time.Now(); at.Before(due) {
			t.Errorf("attempt %d handed out %v before its due time", n+1, due.Sub(at))
		}
		if tk.Attempts != n+1 || tk.LeaseExpires == nil {
			t.Fatalf("attempt %d: %+v", n+1, tk)
		}
		sent := time.Now()
		got, err := c.Nack(ctx, "bo", "x", tk.Lease, client.RetryDelay, "smtp: 451 try later")
		answered := time.Now()
		if err != nil || got.State != api.StateDelayed || got.LastError != "smtp: 451 try later" || got.Attempts != n+1 || got.Lease != "" || got.LeaseExpires != nil {
			t.Fatalf("nack of attempt %d: %+v, %v; want delayed with its last error", n+1, got, err)
		}
		lo := sent.Add(time.Duration(float64(backoff)*(1-jitter)) - clockSlack(t))
		hi := answered.Add(time.Duration(float64(backoff)*(1+jitter)) + clockSlack(t))
		if got.Due.Before(lo) || got.Due.After(hi) {
			t.Errorf("attempt %d's retry due %v after the nack, want %v ± %g", n+1, got.Due.Sub(sent), backoff, jitter)
		}
		if g, err := c.Get(ctx, "bo", "x"); err != nil || g.LastError != "smtp: 451 try later" || !g.Due.Equal(got.Due) {
			t.Errorf("get after nack %d: %+v, %v", n+1, g, err)
		}
		due = got.Due
	}
	// The third attempt fails: used up, it moves to bo-dead, ready, with
	// its id, payload and last error, and no attempts.
	tk := reserveOne(t, c, "bo", 5*time.Second)
	if at := time.Now(); at.Before(due) || tk.Attempts != 3 {
		t.Fatalf("third attempt %v before its due time: %+v", due.Sub(at), tk)
	}
	got, err := c.Nack(ctx, "bo", "x", tk.Lease, client.RetryDelay, "smtp: 550 no such user")
	if err != nil || got.Queue != "bo-dead" || got.State != api.StateReady || got.ID != "x" || got.Attempts != 0 || got.LastError != "smtp: 550 no such user" {
		t.Fatalf("nack of the last attempt: %+v, %v; want ready in bo-dead with the error", got, err)
	}
	if tk, err := c.Get(ctx, "bo", "x"); err == nil && tk.State != api.StateFinished {
		t.Errorf("the moved task is still in its queue: %+v", tk)
	}
	dead, err := c.Get(ctx, "bo-dead", "x")
	if err != nil || string(dead.Payload) != `{"n":1}` || dead.LastError != "smtp: 550 no such user" || dead.State != api.StateReady {
		t.Errorf("in the dead-letter queue: %+v, %v", dead, err)
	}
}

// TestPolicy_LeaseExpiry lets leases run out: the task shows when its
// lease expires while reserved, a lease that runs out counts as a failed
// attempt with last_error "lease expired", comes back after the retry
// policy's delay and not before, and is dead after its last attempt.
func TestPolicy_LeaseExpiry(t *testing.T) { engines(t, testPolicyLeaseExpiry) }

func testPolicyLeaseExpiry(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.client()
	ctx := context.Background()
	const (
		ttr     = 400 * time.Millisecond
		backoff = 600 * time.Millisecond
	)
	if _, err := c.SetPolicy(ctx, "le", api.Policy{
		Retry:       &api.Retry{Initial: api.Duration(backoff), Max: api.Duration(backoff), Multiplier: 1},
		MaxAttempts: 2,
		TTR:         new(api.Duration(ttr)),
	}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Put(ctx, "le", api.PutRequest{ID: "x"}); err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	tk := reserveOne(t, c, "le", time.Second)
	got := time.Now()
	if tk.LeaseExpires == nil || tk.LeaseExpires.Before(sent.Add(ttr-clockSlack(t))) || tk.LeaseExpires.After(got.Add(ttr+clockSlack(t))) || tk.LeaseExpires.Location() != time.UTC {
		t.Fatalf("reserved: %+v; want lease_expires the policy's ttr %v after the reserve, in UTC", tk, ttr)
	}
	if g, err := c.Get(ctx, "le", "x"); err != nil || g.State != api.StateReserved || g.LeaseExpires == nil || !g.LeaseExpires.Equal(*tk.LeaseExpires) || g.Lease != "" {
		t.Errorf("get while reserved: %+v, %v; want its lease_expires, not its lease", g, err)
	}
	expired := *tk.LeaseExpires

	// The lease runs out: a failed attempt, back after the back-off.
	g := waitState(t, c, "le", "x", api.StateDelayed, 5*time.Second)
	if g.LastError != "lease expired" || g.Attempts != 1 || g.LeaseExpires != nil || g.Due.Before(expired.Add(backoff-clockSlack(t))) {
		t.Errorf("after the lease ran out: %+v; want delayed %v after %v with last_error \"lease expired\"", g, backoff, expired)
	}
	tk = reserveOne(t, c, "le", 5*time.Second)
	if at := time.Now(); at.Before(g.Due) || tk.Attempts != 2 {
		t.Errorf("attempt 2 at %v after the lease ran out, its due time %v after: %+v; want not before", at.Sub(expired), g.Due.Sub(expired), tk)
	}
	// The last attempt's lease runs out: dead.
	g = waitState(t, c, "le", "x", api.StateDead, 5*time.Second)
	if g.LastError != "lease expired" || g.Attempts != 2 {
		t.Errorf("after the last lease ran out: %+v; want dead with last_error \"lease expired\"", g)
	}
	if err := c.Ack(ctx, "le", "x", tk.Lease); err == nil {
		t.Errorf("ack with the expired lease succeeded")
	}
}

// TestPolicy_ReleaseBury checks that a release gives a task back without
// spending an attempt, after its delay, and that a bury makes it dead at
// once with its error, or moves it to the dead-letter queue; and their
// refusals.
func TestPolicy_ReleaseBury(t *testing.T) { engines(t, testPolicyReleaseBury) }

func testPolicyReleaseBury(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.client()
	ctx := context.Background()
	if _, _, err := c.Put(ctx, "rb", api.PutRequest{ID: "r", MaxAttempts: 2}); err != nil {
		t.Fatal(err)
	}
	// Released twice, then nacked once: one attempt spent of two.
	for i := range 2 {
		tk := reserveOne(t, c, "rb", 3*time.Second)
		if tk.Attempts != 1 {
			t.Fatalf("reserve %d after releases: attempts %d, want 1", i+1, tk.Attempts)
		}
		var delay time.Duration
		if i == 1 {
			delay = 300 * time.Millisecond
		}
		sent := time.Now()
		got, err := c.Release(ctx, "rb", "r", tk.Lease, delay)
		if err != nil || got.Attempts != 0 || got.Lease != "" {
			t.Fatalf("release %d: %+v, %v; want the attempt given back", i+1, got, err)
		}
		if want := map[bool]string{false: api.StateReady, true: api.StateDelayed}[delay > 0]; got.State != want || got.Due.Before(sent.Add(delay-clockSlack(t))) {
			t.Fatalf("release %d with delay %v: %+v; want %s, due after the delay", i+1, delay, got, want)
		}
		if _, err := c.Release(ctx, "rb", "r", tk.Lease, 0); err == nil {
			t.Errorf("second release with the same lease succeeded")
		}
	}
	tk := reserveOne(t, c, "rb", 3*time.Second)
	got, err := c.Nack(ctx, "rb", "r", tk.Lease, 0, "first failure")
	if err != nil || got.State != api.StateReady || got.Attempts != 1 || got.LastError != "first failure" {
		t.Fatalf("nack after two releases: %+v, %v; want ready, one attempt spent", got, err)
	}

	// Bury: dead at once whatever attempts are left, with its error; kick
	// brings it back.
	tk = reserveOne(t, c, "rb", 3*time.Second)
	long := strings.Repeat("x", api.MaxError+100)
	got, err = c.Bury(ctx, "rb", "r", tk.Lease, long)
	if err != nil || got.State != api.StateDead || got.LastError != long[:api.MaxError] {
		t.Fatalf("bury: state %s, last_error of %d bytes, %v; want dead, the error cut to %d bytes", got.State, len(got.LastError), err, api.MaxError)
	}
	if err := c.Kick(ctx, "rb", "r"); err != nil {
		t.Errorf("kick of the buried task: %v", err)
	}
	// With a dead-letter queue, a bury moves the task there.
	if _, err := c.SetPolicy(ctx, "rb", api.Policy{DeadLetter: "rb-dead"}); err != nil {
		t.Fatal(err)
	}
	tk = reserveOne(t, c, "rb", 3*time.Second)
	got, err = c.Bury(ctx, "rb", "r", tk.Lease, "poison")
	if err != nil || got.Queue != "rb-dead" || got.State != api.StateReady || got.LastError != "poison" {
		t.Errorf("bury with a dead-letter queue: %+v, %v; want ready in rb-dead", got, err)
	}

	// Refusals: no lease 400, a stale one 409, an unknown task 404.
	if _, _, err := c.Put(ctx, "rb", api.PutRequest{ID: "s"}); err != nil {
		t.Fatal(err)
	}
	tk = reserveOne(t, c, "rb", 3*time.Second)
	for _, tc := range []struct {
		path, body string
		status     int
	}{
		{"/v1/queues/rb/tasks/s/release", `{}`, 400},
		{"/v1/queues/rb/tasks/s/bury", `{"error":"x"}`, 400},
		{"/v1/queues/rb/tasks/s/release", `{"lease":"` + tk.Lease + `","delay":"-1s"}`, 400},
		{"/v1/queues/rb/tasks/s/release", `{"lease":"` + tk.Lease + `","delay":"100000h"}`, 400},
		{"/v1/queues/rb/tasks/s/release", `{"lease":"stale"}`, 409},
		{"/v1/queues/rb/tasks/s/bury", `{"lease":"stale"}`, 409},
		{"/v1/queues/rb/tasks/none/bury", `{"lease":"stale"}`, 404},
	} {
		if a := s.call("POST", tc.path, tc.body); a.status != tc.status || !isAPIError(a) {
			t.Errorf("POST %s %s: %v, want %d", tc.path, tc.body, a, tc.status)
		}
	}
	if g, err := c.Get(ctx, "rb", "s"); err != nil || g.State != api.StateReserved || g.Attempts != 1 {
		t.Errorf("after the refused calls: %+v, %v; want still reserved", g, err)
	}
}

// TestPolicy_Pause pauses queues until resumed and for a while: a paused
// queue hands out nothing while puts go on, GET /v1/queues shows the
// pause, a waiting reserver gets its task once the pause ends, a pause
// survives SIGKILL, and bad pauses are refused.
func TestPolicy_Pause(t *testing.T) { engines(t, testPolicyPause) }

func testPolicyPause(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.client()
	ctx := context.Background()
	for _, q := range []string{"pz", "pt"} {
		if _, _, err := c.Put(ctx, q, api.PutRequest{ID: "a"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, body := range []string{`{"for":"0s"}`, `{"for":"-1s"}`, `{"for":"100000h"}`, `{"for":60}`, `{"until":"1m"}`} {
		if a := s.call("POST", "/v1/queues/pz/pause", body); a.status != 400 || !isAPIError(a) {
			t.Errorf("pause %s: %v, want 400", body, a)
		}
	}
	if q := queueOf(t, c, "pz"); q.Paused {
		t.Errorf("paused after the refused pauses: %+v", q)
	}

	// Until resumed.
	if a := s.call("POST", "/v1/queues/pz/pause", ""); a.status != 204 {
		t.Fatalf("pause: %v", a)
	}
	if q := queueOf(t, c, "pz"); !q.Paused || q.PausedUntil != nil {
		t.Errorf("queues after pause: %+v; want paused, no paused_until", q)
	}
	if tasks, err := c.Reserve(ctx, "pz", 1, 300*time.Millisecond); err != nil || len(tasks) != 0 {
		t.Errorf("reserve of a paused queue: %+v, %v; want nothing", tasks, err)
	}
	if _, created, err := c.Put(ctx, "pz", api.PutRequest{ID: "b"}); err != nil || !created {
		t.Errorf("put into a paused queue: %v", err)
	}

	// A pause survives SIGKILL.
	s.kill()
	s.start()
	if q := queueOf(t, c, "pz"); !q.Paused || q.PausedUntil != nil {
		t.Errorf("queues after SIGKILL: %+v; want paused", q)
	}
	if tasks, err := c.Reserve(ctx, "pz", 1, 0); err != nil || len(tasks) != 0 {
		t.Errorf("reserve of a paused queue after SIGKILL: %+v, %v; want nothing", tasks, err)
	}
	if tasks, err := c.Reserve(ctx, "pt", 1, 0); err != nil || len(tasks) != 1 {
		t.Errorf("reserve of another queue: %+v, %v; want its task", tasks, err)
	}

	// A waiting reserver gets its task once the queue is resumed.
	done := make(chan []api.Task, 1)
	go func() {
		tasks, _ := c.Reserve(ctx, "pz", 2, 10*time.Second)
		done <- tasks
	}()
	time.Sleep(300 * time.Millisecond)
	if a := s.call("POST", "/v1/queues/pz/resume", ""); a.status != 204 {
		t.Fatalf("resume: %v", a)
	}
	resumed := time.Now()
	select {
	case tasks := <-done:
		if len(tasks) == 0 {
			t.Errorf("waiting reserve got nothing after resume")
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("waiting reserve not answered 5 s after resume")
	}
	if d := time.Since(resumed); d > 2*time.Second {
		t.Errorf("waiting reserve answered %v after resume", d)
	}
	if q := queueOf(t, c, "pz"); q.Paused {
		t.Errorf("queues after resume: %+v", q)
	}

	// For a while: paused_until, and nothing handed out before it.
	if _, _, err := c.Put(ctx, "pt", api.PutRequest{ID: "b"}); err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	if err := c.Pause(ctx, "pt", 700*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	answered := time.Now()
	q := queueOf(t, c, "pt")
	if !q.Paused || q.PausedUntil == nil || q.PausedUntil.Before(sent.Add(700*time.Millisecond-clockSlack(t))) || q.PausedUntil.After(answered.Add(700*time.Millisecond+clockSlack(t))) {
		t.Fatalf("queues after a pause of 700ms sent at %v, answered at %v: %+v", sent, answered, q)
	}
	tk := reserveOne(t, c, "pt", 5*time.Second)
	if at := time.Now(); at.Before(*q.PausedUntil) || tk.ID != "b" {
		t.Errorf("task handed out %v before the pause's end", q.PausedUntil.Sub(at))
	}
}

// TestPolicy_Beanstalk checks that the beanstalkd protocol and the HTTP
// API share queues' pauses and policies: a pause-tube shows in GET
// /v1/queues, and a queue's concurrency limit set over HTTP holds for
// beanstalkd reserves.
func TestPolicy_Beanstalk(t *testing.T) { engines(t, testPolicyBeanstalk) }

func testPolicyBeanstalk(t *testing.T) {
	t.Parallel()
	baddr := freeAddr(t)
	s := startServer(t, withFlags("--beanstalk", baddr))
	c := s.client()
	ctx := context.Background()

	b := dialBeanstalk(t, baddr)
	b.cmd("use bq", nil)
	if r, _ := b.cmd("put 0 0 60 1", []byte("x")); !strings.HasPrefix(r, "INSERTED ") {
		t.Fatalf("put: %q", r)
	}
	sent := time.Now()
	if r, _ := b.cmd("pause-tube bq 60", nil); r != "PAUSED" {
		t.Fatalf("pause-tube: %q", r)
	}
	q := queueOf(t, c, "bq")
	if !q.Paused || q.PausedUntil == nil || q.PausedUntil.Before(sent.Add(59*time.Second)) || q.PausedUntil.After(time.Now().Add(61*time.Second)) {
		t.Errorf("GET /v1/queues after pause-tube bq 60: %+v; want paused for 60 s", q)
	}
	if err := c.Resume(ctx, "bq"); err != nil {
		t.Fatal(err)
	}
	if q := queueOf(t, c, "bq"); q.Paused {
		t.Errorf("after resume over HTTP: %+v", q)
	}

	// Concurrency 1: a second beanstalkd reserver waits until the first
	// task leaves.
	if _, err := c.SetPolicy(ctx, "bc", api.Policy{Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	b.cmd("use bc", nil)
	for range 2 {
		r, _ := b.cmd("put 0 0 60 1", []byte("y"))
		_, ok := strings.CutPrefix(r, "INSERTED ")
		if !ok {
			t.Fatalf("put: %q", r)
		}
	}
	w1, w2 := dialBeanstalk(t, baddr), dialBeanstalk(t, baddr)
	for _, w := range []*bsConn{w1, w2} {
		w.cmd("watch bc", nil)
		w.cmd("ignore default", nil)
	}
	r1, _ := w1.cmd("reserve-with-timeout 0", nil)
	if !strings.HasPrefix(r1, "RESERVED ") {
		t.Fatalf("first reserve: %q", r1)
	}
	if r, _ := w2.cmd("reserve-with-timeout 1", nil); r != "TIMED_OUT" {
		t.Errorf("second reserve with one task reserved under concurrency 1: %q, want TIMED_OUT", r)
	}
	if tasks, err := c.Reserve(ctx, "bc", 1, 0); err != nil || len(tasks) != 0 {
		t.Errorf("HTTP reserve under concurrency 1: %+v, %v; want nothing", tasks, err)
	}
	first := strings.Fields(r1)[1]
	if r, _ := w1.cmd("delete "+first, nil); r != "DELETED" {
		t.Fatalf("delete: %q", r)
	}
	if r, _ := w2.cmd("reserve-with-timeout 5", nil); !strings.HasPrefix(r, "RESERVED ") {
		t.Errorf("second reserve after the first task left: %q", r)
	}
}

// reserveOne reserves one task of queue, waiting up to wait, failing the
// test if none comes.
func reserveOne(t *testing.T, c *client.Client, queue string, wait time.Duration) api.Task {
	t.Helper()
	tasks, err := c.Reserve(context.Background(), queue, 1, wait)
	if err != nil || len(tasks) != 1 {
		t.Fatalf("reserve %s within %v: %+v, %v", queue, wait, tasks, err)
	}
	return tasks[0]
}

// findQueue returns the queue name of qs, or nil.
func findQueue(qs []api.Queue, name string) *api.Queue {
	for i := range qs {
		if qs[i].Name == name {
			return &qs[i]
		}
	}
	return nil
}

// queueOf returns what GET /v1/queues shows of queue, failing the test if
// it shows none.
func queueOf(t *testing.T, c *client.Client, queue string) api.Queue {
	t.Helper()
	qs, err := c.Queues(context.Background())
	q := findQueue(qs, queue)
	if err != nil || q == nil {
		t.Fatalf("GET /v1/queues: no %s in %+v, %v", queue, qs, err)
	}
	return *q
}

// TestPolicy_RateRestart: a queue's rate-limit budget survives a restart
// of the server: with 1 task an hour, the task reserved before the
// restart leaves none after it; a different rate starts with a full
// bucket.
func TestPolicy_RateRestart(t *testing.T) { engines(t, testPolicyRateRestart) }

func testPolicyRateRestart(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.client()
	ctx := context.Background()
	if a := s.call("PUT", "/v1/queues/hourly/policy", `{"rate":{"limit":1,"per":"1h"}}`); a.status != 200 {
		t.Fatalf("PUT policy: %v", a)
	}
	for _, id := range []string{"a", "b"} {
		if _, _, err := c.Put(ctx, "hourly", api.PutRequest{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := c.Reserve(ctx, "hourly", 1, 0); err != nil || len(got) != 1 || got[0].ID != "a" {
		t.Fatalf("the hour's task: %+v, %v; want a", got, err)
	}
	if got, err := c.Reserve(ctx, "hourly", 1, 0); err != nil || len(got) != 0 {
		t.Fatalf("a second task within the hour: %+v, %v", got, err)
	}

	s.stop()
	s.start()
	if got, err := c.Reserve(ctx, "hourly", 1, 0); err != nil || len(got) != 0 {
		t.Fatalf("after a restart, a second task within the hour: %+v, %v", got, err)
	}
	if a := s.call("PUT", "/v1/queues/hourly/policy", `{"rate":{"limit":2,"per":"1h"}}`); a.status != 200 {
		t.Fatalf("PUT policy: %v", a)
	}
	if got, err := c.Reserve(ctx, "hourly", 1, 0); err != nil || len(got) != 1 || got[0].ID != "b" {
		t.Fatalf("under a new rate: %+v, %v; want b", got, err)
	}
}
