package e2e_test

import (
	"strings"
	"testing"
)

// TestPolicy_Patch changes one field of a push queue's policy with
// PATCH (a JSON merge patch): the endpoint, its secret, the retry and
// the dead-letter queue stay (a PUT of {"max_attempts":5} once dropped
// them all, and the queue stopped pushing); null removes a field; a
// patch that is not an object, writes an answer-only key or merges into
// a bad policy is 400 and changes nothing; on both engines.
func TestPolicy_Patch(t *testing.T) { engines(t, testPolicyPatch) }

func testPolicyPatch(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	const full = `{"retry":{"initial":"10s","max":"10m0s","multiplier":2,"jitter":0},"max_attempts":3,"dead_letter":"hooks-dead",` +
		`"push":{"url":"http://127.0.0.1:9/run","secret":"whsec_c2VjcmV0"}}`
	if a := s.call("PUT", "/v1/queues/hooks/policy", full); a.status != 200 {
		t.Fatalf("PUT policy: %v", a)
	}
	stored := func() string {
		t.Helper()
		a := s.call("GET", "/v1/queues/hooks/policy", "")
		if a.status != 200 {
			t.Fatalf("GET policy: %v", a)
		}
		body := strings.TrimSpace(string(a.body))
		if i := strings.Index(body, `,"effective":`); i >= 0 {
			body = body[:i] + "}"
		}
		return body
	}
	const kept = `"dead_letter":"hooks-dead","push":{"url":"http://127.0.0.1:9/run","secret_set":true}}`
	want := `{"retry":{"initial":"10s","max":"10m0s","multiplier":2,"jitter":0},"max_attempts":5,` + kept
	if a := s.call("PATCH", "/v1/queues/hooks/policy", `{"max_attempts":5}`); a.status != 200 || !strings.HasPrefix(strings.TrimSpace(string(a.body)), strings.TrimSuffix(want, "}")) {
		t.Errorf("PATCH max_attempts: %v\nwant %s", a, want)
	}
	if got := stored(); got != want {
		t.Errorf("after PATCH: %s\nwant %s", got, want)
	}
	want = `{"retry":{"initial":"10s","max":"1h0m0s","multiplier":2,"jitter":0},"max_attempts":5,` + kept
	if a := s.call("PATCH", "/v1/queues/hooks/policy", `{"retry":{"max":"1h"}}`); a.status != 200 || stored() != want {
		t.Errorf("PATCH retry.max: %v; stored %s\nwant %s", a, stored(), want)
	}
	want = `{"max_attempts":5,` + kept
	if a := s.call("PATCH", "/v1/queues/hooks/policy", `{"retry":null}`); a.status != 200 || stored() != want {
		t.Errorf("PATCH retry null: %v; stored %s\nwant %s", a, stored(), want)
	}
	for _, tc := range []struct{ patch, why string }{
		{`null`, "a merge patch is a JSON object"},
		{`[1]`, "a merge patch is a JSON object"},
		{`{"effective":{"max_attempts":1}}`, "effective is answered by the server"},
		{`{"push":{"secret_set":false}}`, "push.secret_set is answered by the server"},
		{`{"max_attempts":-2}`, "max_attempts"},
		{`{"retry":{"initial":"-1s"}}`, "retry.initial"},
		{`{"dead_letter":"hooks"}`, "dead_letter"},
		{`{"nonsense":1}`, "nonsense"},
		{`{"push":{"url":"http://169.254.169.254/"}}`, "push.url"},
	} {
		a := s.call("PATCH", "/v1/queues/hooks/policy", tc.patch)
		if a.status != 400 || !strings.Contains(string(a.body), tc.why) || strings.Count(string(a.body), "hourglass: ") != 1 {
			t.Errorf("PATCH %s: %v; want 400 naming %s", tc.patch, a, tc.why)
		}
		if got := stored(); got != want {
			t.Fatalf("after the refused PATCH %s: %s\nwant it unchanged: %s", tc.patch, got, want)
		}
	}
	// A queue without a policy is patched from none.
	if a := s.call("PATCH", "/v1/queues/fresh/policy", `{"concurrency":2}`); a.status != 200 || !strings.HasPrefix(string(a.body), `{"concurrency":2,"effective":`) {
		t.Errorf("PATCH of a queue without a policy: %v", a)
	}
}
