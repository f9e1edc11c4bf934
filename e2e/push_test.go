package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/api"
)

// The black-box tests of push queues (api.Push): a receiver on loopback
// that the server POSTs each ready task to, on both engines. They check
// when a task is pushed (never early, on time), what is sent (the body
// as put, the headers, a signature an independent implementation
// accepts), what each answer makes of the task (acked, retried after the
// back-off or a Retry-After, a timeout and a refused connection failed
// attempts), and the policies refused (link-local targets, outside
// --push-allow, bad fields).

// pushed is one request a receiver got.
type pushed struct {
	at     time.Time
	header http.Header
	body   []byte
}

// receiver is an HTTP endpoint on loopback that records every request
// and answers it with answer (nil: 204).
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []pushed // guarded by mu
	answer func(n int, w http.ResponseWriter, r *http.Request)
	ch     chan struct{}
}

// newReceiver starts a receiver; cleanup closes it.
func newReceiver(t *testing.T, answer func(n int, w http.ResponseWriter, r *http.Request)) *receiver {
	rc := &receiver{answer: answer, ch: make(chan struct{}, 100)}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, pushed{time.Now(), r.Header.Clone(), body})
		n := len(rc.got)
		rc.mu.Unlock()
		rc.ch <- struct{}{}
		if rc.answer != nil {
			rc.answer(n, w, r)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// wait returns the n-th request (from 1), waiting up to within for it.
func (rc *receiver) wait(t *testing.T, n int, within time.Duration) pushed {
	t.Helper()
	deadline := time.After(within)
	for {
		rc.mu.Lock()
		if len(rc.got) >= n {
			p := rc.got[n-1]
			rc.mu.Unlock()
			return p
		}
		rc.mu.Unlock()
		select {
		case <-rc.ch:
		case <-deadline:
			t.Fatalf("push %d did not come within %v", n, within)
		}
	}
}

// count returns how many requests came.
func (rc *receiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.got)
}

// setPush sets queue's policy to body (JSON) and fails t if the engine
// of t did not keep the policy's push endpoint.
func setPush(t *testing.T, s *server, queue, body string) {
	t.Helper()
	if a := s.call("PUT", "/v1/queues/"+queue+"/policy", body); a.status != 200 {
		t.Fatalf("PUT policy %s: %v", body, a)
	}
	a := s.call("GET", "/v1/queues/"+queue+"/policy", "")
	var p api.Policy
	if a.status != 200 || json.Unmarshal(a.body, &p) != nil {
		t.Fatalf("GET policy: %v", a)
	}
	if p.Push == nil {
		t.Fatalf("the %s engine did not keep the policy's push endpoint: %v", engineOf(t), a)
	}
}

// pushTaskState returns a task's state and last error ("gone" once acked:
// GET answers its finished record, or 404 past the history).
func pushTaskState(t *testing.T, s *server, queue, id string) (string, string) {
	t.Helper()
	a := s.call("GET", "/v1/queues/"+queue+"/tasks/"+id, "")
	if a.status == 404 {
		return "gone", ""
	}
	var tk api.Task
	if a.status != 200 || json.Unmarshal(a.body, &tk) != nil {
		t.Fatalf("GET task: %v", a)
	}
	if tk.State == api.StateFinished {
		return "gone", "" // its finished record, from the history
	}
	return string(tk.State), tk.LastError
}

// waitPushed waits up to within for a task to be in state, and returns
// its last error.
func waitPushed(t *testing.T, s *server, queue, id, state string, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		st, last := pushTaskState(t, s, queue, id)
		if st == state {
			return last
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s/%s is %s (last error %q), not %s, after %v", queue, id, st, last, state, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPush_Delivery pushes delayed tasks no earlier than their due time
// and soon after it, with their payloads as put, the headers of api.Push
// and a signature that Python's hmac accepts, and acks them on a 2xx.
func TestPush_Delivery(t *testing.T) { engines(t, testPushDelivery) }

func testPushDelivery(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	rc := newReceiver(t, nil)
	const secret = "whsec_ZTJlIHNlY3JldA=="
	setPush(t, s, "hooks", fmt.Sprintf(`{"push":{"url":%q,"timeout":"5s","headers":{"X-Env":"prod"},"secret":%q}}`, rc.srv.URL+"/email", secret))

	const payload = `{"to": "a@b.c",  "n":[1, 2.50]}`
	type put struct {
		id  string
		due time.Time
	}
	var puts []put
	for i, delay := range []time.Duration{300 * time.Millisecond, 600 * time.Millisecond, 0} {
		id := fmt.Sprintf("t%d", i)
		a := s.call("POST", "/v1/queues/hooks/tasks", fmt.Sprintf(`{"id":%q,"payload":%s,"delay":%q}`, id, payload, delay.String()))
		var tk api.Task
		if a.status != 201 || json.Unmarshal(a.body, &tk) != nil {
			t.Fatalf("put: %v", a)
		}
		puts = append(puts, put{id, tk.Due})
	}
	byID := map[string]pushed{}
	for n := 1; n <= len(puts); n++ {
		p := rc.wait(t, n, 10*time.Second)
		byID[p.header.Get("Hourglass-Task-Id")] = p
	}
	for _, pt := range puts {
		p, ok := byID[pt.id]
		if !ok {
			t.Fatalf("task %s not pushed: %v", pt.id, byID)
		}
		if p.at.Before(pt.due.Add(-clockSlack(t))) {
			t.Errorf("task %s pushed %v before its due time", pt.id, pt.due.Sub(p.at))
		}
		if late := p.at.Sub(pt.due); late > lateAllowed(t, 2*time.Second, pt.due, p.at) {
			t.Errorf("task %s pushed %v late", pt.id, late)
		}
		if string(p.body) != payload {
			t.Errorf("task %s body %q, want %q", pt.id, p.body, payload)
		}
		for k, v := range map[string]string{
			"Content-Type": "application/json", "Hourglass-Queue": "hooks", "Hourglass-Attempt": "1", "X-Env": "prod",
		} {
			if got := p.header.Get(k); got != v {
				t.Errorf("task %s: %s %q, want %q", pt.id, k, got, v)
			}
		}
		if p.header.Get("Hourglass-Job-Id") == "" {
			t.Errorf("task %s: no Hourglass-Job-Id", pt.id)
		}
		if due, err := time.Parse(time.RFC3339Nano, p.header.Get("Hourglass-Due")); err != nil || !due.Equal(pt.due) {
			t.Errorf("task %s: Hourglass-Due %q, want %s", pt.id, p.header.Get("Hourglass-Due"), pt.due.Format(time.RFC3339Nano))
		}
	}
	var all []pushed
	for _, p := range byID {
		all = append(all, p)
	}
	checkSignaturesPython(t, secret, all)
	for _, pt := range puts {
		waitPushed(t, s, "hooks", pt.id, "gone", 5*time.Second)
	}
	time.Sleep(300 * time.Millisecond)
	if n := rc.count(); n != len(puts) {
		t.Errorf("%d pushes of %d tasks acked", n, len(puts))
	}
}

// checkSignaturesPython checks the signatures of each push under secret
// with Python's standard library (checkWebhooksPython), an
// implementation independent of the server's.
func checkSignaturesPython(t *testing.T, secret string, ps []pushed) {
	t.Helper()
	f := webhookFile{Secrets: []string{secret}}
	for i, p := range ps {
		f.Messages = append(f.Messages, webhookMessageOf(fmt.Sprintf("push %d", i), p, true))
	}
	path := filepath.Join(t.TempDir(), "webhooks.json")
	b, _ := json.Marshal(f)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Run("python", func(t *testing.T) { checkWebhooksPython(t, path) })
}

// TestPush_Retries: a 500 is a failed attempt, retried after the
// queue's back-off, with the body's start as last error; a 503 with
// Retry-After comes back after that delay; a push not answered within
// its timeout, and one whose connection is refused, are failed attempts
// too, dead once the attempts are used up.
func TestPush_Retries(t *testing.T) { engines(t, testPushRetries) }

func testPushRetries(t *testing.T) {
	t.Parallel()
	s := startServer(t)

	// 500 then 200, under a back-off of 400 ms.
	const backoff = 400 * time.Millisecond
	fail := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			w.WriteHeader(500)
			io.WriteString(w, "boom: "+strings.Repeat("x", 300))
			return
		}
		w.WriteHeader(200)
	})
	setPush(t, s, "p500", fmt.Sprintf(`{"retry":{"initial":%q,"max":%q,"multiplier":1,"jitter":0},"push":{"url":%q}}`,
		backoff.String(), backoff.String(), fail.srv.URL))
	s.call("POST", "/v1/queues/p500/tasks", `{"id":"a","payload":{}}`)
	first := fail.wait(t, 1, 10*time.Second)
	second := fail.wait(t, 2, 10*time.Second)
	if gap := second.at.Sub(first.at); gap < backoff-clockSlack(t) {
		t.Errorf("retry after a 500 came %v after the first push, before the back-off of %v", gap, backoff)
	}
	if second.header.Get("Hourglass-Attempt") != "2" {
		t.Errorf("second push's attempt %q, want 2", second.header.Get("Hourglass-Attempt"))
	}
	waitPushed(t, s, "p500", "a", "gone", 5*time.Second)
	pushAttempts(t, s, "p500", "a",
		"1 push-failed 500 push: HTTP 500: boom: "+strings.Repeat("x", 200-len("boom: ")), "2 pushed 200 ")

	// 503 with Retry-After: 3, then 200; a 500's last error while
	// waiting. The Retry-After wins over the default back-off (1s).
	later := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(503)
			io.WriteString(w, "busy")
			return
		}
		w.WriteHeader(204)
	})
	setPush(t, s, "p503", fmt.Sprintf(`{"push":{"url":%q}}`, later.srv.URL))
	s.call("POST", "/v1/queues/p503/tasks", `{"id":"a","payload":1}`)
	first = later.wait(t, 1, 10*time.Second)
	if last := waitPushed(t, s, "p503", "a", "delayed", 2*time.Second); last != "push: HTTP 503: busy" {
		t.Errorf("after a 503: last error %q", last)
	}
	second = later.wait(t, 2, 10*time.Second)
	if gap := second.at.Sub(first.at); gap < 3*time.Second-clockSlack(t) {
		t.Errorf("retry after Retry-After: 3 came %v after the first push", gap)
	}
	waitPushed(t, s, "p503", "a", "gone", 5*time.Second)
	pushAttempts(t, s, "p503", "a", "1 push-failed 503 push: HTTP 503: busy", "2 pushed 204 ")

	// A timeout, then an answer.
	slow := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
			return
		}
		w.WriteHeader(200)
	})
	setPush(t, s, "pslow", fmt.Sprintf(`{"push":{"url":%q,"timeout":"300ms"}}`, slow.srv.URL))
	s.call("POST", "/v1/queues/pslow/tasks", `{"id":"a","payload":1,"max_attempts":3}`)
	slow.wait(t, 2, 10*time.Second)
	waitPushed(t, s, "pslow", "a", "gone", 5*time.Second)
	pushAttempts(t, s, "pslow", "a", "1 push-failed 0 push: timeout after 300ms", "2 pushed 200 ")

	// A timeout with no attempt left: dead, saying why.
	hang := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	setPush(t, s, "pslow2", fmt.Sprintf(`{"push":{"url":%q,"timeout":"300ms"}}`, hang.srv.URL))
	s.call("POST", "/v1/queues/pslow2/tasks", `{"id":"a","payload":1,"max_attempts":1}`)
	if last := waitPushed(t, s, "pslow2", "a", "dead", 10*time.Second); last != "push: timeout after 300ms" {
		t.Errorf("after a timeout: last error %q", last)
	}

	// A refused connection: a port nothing listens on.
	closed := freeAddr(t)
	setPush(t, s, "prefused", fmt.Sprintf(`{"push":{"url":"http://%s/x"}}`, closed))
	s.call("POST", "/v1/queues/prefused/tasks", `{"id":"a","payload":1,"max_attempts":2}`)
	if last := waitPushed(t, s, "prefused", "a", "dead", 10*time.Second); !strings.HasPrefix(last, "push: dial tcp") || !strings.Contains(last, "refused") {
		t.Errorf("after refused connections: last error %q", last)
	}
	as, err := s.client().Attempts(context.Background(), "prefused", "a")
	if err != nil || len(as) != 2 {
		t.Fatalf("attempts after refused connections: %+v, %v; want 2", as, err)
	}
	for _, a := range as {
		if a.Outcome != api.AttemptPushFailed || a.Status != 0 || !strings.Contains(a.Error, "refused") {
			t.Errorf("attempt %d after a refused connection: %s, status %d, error %q; want push-failed, no status, refused", a.Attempt, a.Outcome, a.Status, a.Error)
		}
	}
}

// TestPush_DefaultBackoff: a push queue without a retry policy backs off
// from an endpoint that answers 500 (1s, 2s, 4s … the default), so it
// gets a handful of pushes in 4 s, not thousands; with immediate retries
// asked for explicitly ("initial": "0s") it gets them at once, dies at
// its max_attempts, and its attempt records keep the first 5 and the last
// 100, saying how many were dropped.
func TestPush_DefaultBackoff(t *testing.T) { engines(t, testPushDefaultBackoff) }

func testPushDefaultBackoff(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	var mu sync.Mutex
	got := map[string][]time.Time{} // guarded by mu: push times by queue
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got[r.URL.Path] = append(got[r.URL.Path], time.Now())
		mu.Unlock()
		w.WriteHeader(500)
	}))
	t.Cleanup(rc.Close)
	pushes := func(queue string) []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got["/"+queue])
	}

	setPush(t, s, "fail", fmt.Sprintf(`{"push":{"url":%q}}`, rc.URL+"/fail"))
	s.call("POST", "/v1/queues/fail/tasks", `{"id":"a","payload":1}`)
	const watch = 4 * time.Second
	deadline := time.Now().Add(10 * time.Second)
	for len(pushes("fail")) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(watch)
	ts := pushes("fail")
	// At 0, 1s and 3s (± 10%), and at most one more on a loaded machine.
	if len(ts) < 2 || len(ts) > 4 {
		t.Fatalf("an endpoint answering 500 got %d pushes in %v after the first; want 2 to 4 under the default back-off", len(ts), watch)
	}
	if gap := ts[1].Sub(ts[0]); gap < 900*time.Millisecond-clockSlack(t) {
		t.Errorf("second push %v after the first; want the default back-off's 1s ± 10%%", gap)
	}

	// Immediate retries, explicitly: 150 pushes at once, then dead.
	const n = 150
	setPush(t, s, "now", fmt.Sprintf(`{"retry":{"initial":"0s"},"max_attempts":%d,"push":{"url":%q}}`, n, rc.URL+"/now"))
	s.call("POST", "/v1/queues/now/tasks", `{"id":"a","payload":1}`)
	waitPushed(t, s, "now", "a", "dead", 60*time.Second)
	if k := len(pushes("now")); k != n {
		t.Errorf("immediate retries: %d pushes, want %d", k, n)
	}
	a := s.call("GET", "/v1/queues/now/tasks/a/attempts", "")
	var as api.AttemptsResponse
	if a.status != 200 || json.Unmarshal(a.body, &as) != nil {
		t.Fatalf("GET attempts: %v", a)
	}
	const kept = api.AttemptsKeptFirst + api.AttemptsKeptLast
	if len(as.Attempts) != kept || as.Dropped != n-kept || as.Attempts[api.AttemptsKeptFirst-1].Attempt != api.AttemptsKeptFirst ||
		as.Attempts[api.AttemptsKeptFirst].Attempt != n-api.AttemptsKeptLast+1 || as.Attempts[kept-1].Attempt != n {
		t.Errorf("attempts of a task pushed %d times: %d listed, dropped %d; want %d, dropped %d", n, len(as.Attempts), as.Dropped, kept, n-kept)
	}
}

// pushAttempts checks the attempts of a pushed task, each given as
// "N OUTCOME STATUS ERROR" (the history as the API answers it), and that
// each ended after it began.
func pushAttempts(t *testing.T, s *server, queue, id string, want ...string) {
	t.Helper()
	as, err := s.client().Attempts(context.Background(), queue, id)
	if err != nil {
		t.Fatalf("attempts of %s/%s: %v", queue, id, err)
	}
	got := make([]string, len(as))
	for i, a := range as {
		got[i] = fmt.Sprintf("%d %s %d %s", a.Attempt, a.Outcome, a.Status, a.Error)
		if a.Ended == nil || a.Ended.Before(a.Started) {
			t.Errorf("attempt %d of %s/%s: started %v, ended %v", a.Attempt, queue, id, a.Started, a.Ended)
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("attempts of %s/%s:\n%s\nwant:\n%s", queue, id, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestPush_Refused: a policy whose target the server may not reach
// (link-local, outside --push-allow) or with a bad field is 400 and
// changes nothing; GET shows "secret_set", never the secret; a name that
// resolves outside --push-allow is refused at the dial.
func TestPush_Refused(t *testing.T) { engines(t, testPushRefused) }

func testPushRefused(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, nil)
	_, port, _ := net.SplitHostPort(rc.srv.Listener.Addr().String())
	s := startServer(t, withFlags("--push-allow", "10.0.0.0/8,app.internal"))

	const before = `{"max_attempts":3}`
	if a := s.call("PUT", "/v1/queues/q/policy", before); a.status != 200 {
		t.Fatalf("PUT policy: %v", a)
	}
	for _, tc := range []struct{ push, want string }{
		{`{"url":"http://169.254.169.254/latest/meta-data/"}`, "link-local"},
		{`{"url":"http://[fe80::1]:80/"}`, "link-local"},
		{`{"url":"http://127.0.0.1:` + port + `/"}`, "--push-allow"},
		{`{"url":"http://example.com/"}`, ""}, // a name is checked at the dial: allowed here
		{`{"url":"ftp://10.0.0.1/"}`, "push.url"},
		{`{"url":"/relative"}`, "push.url"},
		{`{"url":""}`, "push.url"},
		{`{"url":"http://10.0.0.1/","timeout":"16m"}`, "push.timeout"},
		{`{"url":"http://10.0.0.1/","timeout":"0s"}`, "push.timeout"},
		{`{"url":"http://10.0.0.1/","headers":{"Hourglass-Queue":"x"}}`, "push.headers"},
		{`{"url":"http://10.0.0.1/","headers":{"Bad Name":"x"}}`, "push.headers"},
		{`{"url":"http://10.0.0.1/","headers":{"Host":"x"}}`, "push.headers"},
		{`{"url":"http://10.0.0.1/","secret":"` + strings.Repeat("s", 257) + `"}`, "push.secret"},
		{`{"url":"http://10.0.0.1/","secret_set":true}`, "secret"},
		{`{"url":"http://10.0.0.1/","colour":"red"}`, `"colour"`},
	} {
		a := s.call("PUT", "/v1/queues/q/policy", `{"max_attempts":5,"push":`+tc.push+`}`)
		if tc.want == "" {
			if a.status != 200 {
				t.Errorf("PUT push %s: %v, want 200", tc.push, a)
			}
			s.call("PUT", "/v1/queues/q/policy", before)
			continue
		}
		var e api.Error
		if a.status != 400 || json.Unmarshal(a.body, &e) != nil || !strings.HasPrefix(e.Error, "hourglass: ") || !strings.Contains(e.Error, tc.want) {
			t.Errorf("PUT push %s: %v; want 400 naming %s", tc.push, a, tc.want)
		}
		const recorded = `{"max_attempts":3,"effective":{"retry":{"initial":"1s","max":"1h0m0s","multiplier":2,"jitter":0.1},"max_attempts":3,"ttr":"1m0s"}}`
		if a := s.call("GET", "/v1/queues/q/policy", ""); strings.TrimSpace(string(a.body)) != recorded {
			t.Fatalf("policy after a refused PUT: %v, want %s", a, recorded)
		}
	}

	// Link-local is refused on a server without --push-allow too.
	open := startServer(t)
	if a := open.call("PUT", "/v1/queues/q/policy", `{"push":{"url":"http://169.254.169.254/"}}`); a.status != 400 {
		t.Errorf("link-local target without --push-allow: %v, want 400", a)
	}

	// The secret is never answered.
	setPush(t, s, "signed", `{"push":{"url":"http://10.0.0.1/hook","timeout":"30s","headers":{"X-Env":"prod"},"secret":"whsec_aGlkZGVu"}}`)
	const shown = `{"push":{"url":"http://10.0.0.1/hook","timeout":"30s","headers":{"X-Env":"prod"},"secret_set":true},` +
		`"effective":{"retry":{"initial":"1s","max":"1h0m0s","multiplier":2,"jitter":0.1},"max_attempts":25,"ttr":"1m0s"}}`
	if a := s.call("GET", "/v1/queues/signed/policy", ""); strings.TrimSpace(string(a.body)) != shown {
		t.Errorf("GET policy: %v\nwant %s", a, shown)
	}
	if a := s.call("GET", "/v1/queues", ""); strings.Contains(string(a.body), "whsec_aGlkZGVu") || !strings.Contains(string(a.body), `"secret_set":true`) {
		t.Errorf("GET /v1/queues shows the secret, or not secret_set: %v", a)
	}

	// A name allowed by none of the list's entries but resolved into it
	// would be pushed to; localhost resolves to loopback, outside
	// 10.0.0.0/8: refused at the dial, the receiver never called.
	setPush(t, s, "dial", fmt.Sprintf(`{"push":{"url":"http://localhost:%s/"}}`, port))
	s.call("POST", "/v1/queues/dial/tasks", `{"id":"a","payload":1,"max_attempts":1}`)
	if last := waitPushed(t, s, "dial", "a", "dead", 10*time.Second); !strings.Contains(last, "--push-allow") {
		t.Errorf("push to a name resolving outside --push-allow: last error %q", last)
	}
	if n := rc.count(); n != 0 {
		t.Errorf("the receiver outside --push-allow got %d pushes", n)
	}
}

// TestPush_Limits: pushes keep the queue's concurrency limit (never two
// at once with a limit of 1) and stop while it is paused.
func TestPush_Limits(t *testing.T) { engines(t, testPushLimits) }

func testPushLimits(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	var mu sync.Mutex
	running, most := 0, 0
	rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		running++
		most = max(most, running)
		mu.Unlock()
		time.Sleep(100 * time.Millisecond)
		mu.Lock()
		running--
		mu.Unlock()
		w.WriteHeader(200)
	})
	setPush(t, s, "one", fmt.Sprintf(`{"concurrency":1,"push":{"url":%q}}`, rc.srv.URL))
	for i := range 5 {
		s.call("POST", "/v1/queues/one/tasks", fmt.Sprintf(`{"id":"t%d","payload":1}`, i))
	}
	rc.wait(t, 5, 15*time.Second)
	mu.Lock()
	if most != 1 {
		t.Errorf("%d pushes at once under a concurrency limit of 1", most)
	}
	mu.Unlock()

	// Paused: nothing pushed; resumed: pushed.
	if a := s.call("POST", "/v1/queues/one/pause", ""); a.status != 204 {
		t.Fatalf("pause: %v", a)
	}
	s.call("POST", "/v1/queues/one/tasks", `{"id":"paused","payload":1}`)
	time.Sleep(1500 * time.Millisecond)
	if n := rc.count(); n != 5 {
		t.Errorf("%d pushes while paused", n-5)
	}
	if a := s.call("POST", "/v1/queues/one/resume", ""); a.status != 204 {
		t.Fatalf("resume: %v", a)
	}
	rc.wait(t, 6, 10*time.Second)
}

// TestPush_Crash: a server killed mid-push pushes the task again once
// its lease runs out (at least once); one stopped by SIGTERM mid-push
// gives the task back without spending its attempt, and pushes it again
// once restarted.
func TestPush_Crash(t *testing.T) { engines(t, testPushCrash) }

func testPushCrash(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			<-r.Context().Done() // the first push hangs until its server goes
			return
		}
		w.WriteHeader(200)
	})
	setPush(t, s, "crash", fmt.Sprintf(`{"push":{"url":%q,"timeout":"1s"}}`, rc.srv.URL))
	s.call("POST", "/v1/queues/crash/tasks", `{"id":"a","payload":1,"ttr":"4s"}`)
	rc.wait(t, 1, 10*time.Second)
	// A reservation is committed but not waited for (at least once: a
	// crash before it is durable makes the task ready, its attempt not
	// counted); a put answered after it is durable makes it durable too.
	if a := s.call("POST", "/v1/queues/barrier/tasks", `{"payload":1}`); a.status != 201 {
		t.Fatalf("put: %v", a)
	}
	s.kill()
	s.start()
	second := rc.wait(t, 2, 20*time.Second)
	if second.header.Get("Hourglass-Attempt") != "2" {
		t.Errorf("push after a crash: attempt %q, want 2 (the lease that ran out counted)", second.header.Get("Hourglass-Attempt"))
	}
	waitPushed(t, s, "crash", "a", "gone", 5*time.Second)

	// SIGTERM mid-push: released, its attempt not spent.
	hang := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			<-r.Context().Done()
			return
		}
		w.WriteHeader(200)
	})
	setPush(t, s, "term", fmt.Sprintf(`{"push":{"url":%q,"timeout":"60s"}}`, hang.srv.URL))
	s.call("POST", "/v1/queues/term/tasks", `{"id":"a","payload":1,"ttr":"2m"}`)
	hang.wait(t, 1, 10*time.Second)
	s.stop()
	s.start()
	again := hang.wait(t, 2, 20*time.Second)
	if again.header.Get("Hourglass-Attempt") != "1" {
		t.Errorf("push after SIGTERM: attempt %q, want 1 (the release spent none)", again.header.Get("Hourglass-Attempt"))
	}
	waitPushed(t, s, "term", "a", "gone", 5*time.Second)
}
