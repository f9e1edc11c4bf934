package main

import (
	"strings"
	"testing"
)

// TestPolicySetMerges sets policies with the CLI against a real server:
// --set merges into the stored policy (the push endpoint, retry and
// dead-letter queue stay), null removes a field, --replace replaces the
// whole, and a merge keeps the endpoint's secret, which is never
// answered, unless it names it.
func TestPolicySetMerges(t *testing.T) {
	server := startServer(t)
	policy := func(args ...string) (int, string, string) {
		t.Helper()
		code, out, errOut := cli(append(append([]string{"policy", "hooks"}, args...), "--server", server)...)
		return code, withoutEffective(out), errOut
	}
	const full = `{"retry":{"initial":"1s","max":"1m0s","multiplier":2,"jitter":0.1},"max_attempts":3,"dead_letter":"hooks-dead","push":{"url":"http://127.0.0.1:9/hook","headers":{"X-Env":"test"}}}`
	if code, out, errOut := policy("--set", full); code != 0 || strings.TrimSpace(out) != full {
		t.Fatalf("--set on no policy: exit %d, %q %q; want %s", code, out, errOut, full)
	}
	for _, tc := range []struct{ set, want string }{
		{`{"max_attempts":5}`, strings.Replace(full, `"max_attempts":3`, `"max_attempts":5`, 1)},
		{`{"retry":{"max":"1h"},"concurrency":2}`, `{"retry":{"initial":"1s","max":"1h0m0s","multiplier":2,"jitter":0.1},"max_attempts":5,"concurrency":2,"dead_letter":"hooks-dead","push":{"url":"http://127.0.0.1:9/hook","headers":{"X-Env":"test"}}}`},
		{`{"retry":null,"push":{"headers":null}}`, `{"max_attempts":5,"concurrency":2,"dead_letter":"hooks-dead","push":{"url":"http://127.0.0.1:9/hook"}}`},
	} {
		if code, out, errOut := policy("--set", tc.set); code != 0 || strings.TrimSpace(out) != tc.want {
			t.Errorf("--set %s: exit %d, %q %q; want %s", tc.set, code, out, errOut, tc.want)
		}
		if code, out, _ := policy(); code != 0 || strings.TrimSpace(out) != tc.want {
			t.Errorf("policy after --set %s: exit %d, %q; want %s", tc.set, code, out, tc.want)
		}
	}
	if code, out, errOut := policy("--set", `{"max_attempts":7}`, "--replace"); code != 0 || strings.TrimSpace(out) != `{"max_attempts":7}` {
		t.Errorf("--replace: exit %d, %q %q", code, out, errOut)
	}

	// The secrets are never answered, and a merge that does not name
	// them keeps them.
	const signed = `{"max_attempts":7,"push":{"url":"http://127.0.0.1:9/hook","secret_set":true}}`
	if code, out, errOut := policy("--set", `{"push":{"url":"http://127.0.0.1:9/hook","secret":"whsec_YQ=="}}`); code != 0 || strings.TrimSpace(out) != signed {
		t.Fatalf("--set with a secret: exit %d, %q %q", code, out, errOut)
	}
	if code, out, errOut := policy("--set", `{"max_attempts":5}`); code != 0 || strings.TrimSpace(out) != strings.Replace(signed, "7", "5", 1) {
		t.Errorf("--set on a signed endpoint: exit %d, %q %q; want the secret kept", code, out, errOut)
	}
	if code, out, errOut := policy("--set", `{"effective":{"max_attempts":5}}`); code != 2 || out != "" || !strings.Contains(errOut, "effective is answered by the server") {
		t.Errorf("--set of an answer-only key: exit %d, %q %q; want 2 naming it", code, out, errOut)
	}
	const rotating = `{"max_attempts":5,"push":{"url":"http://127.0.0.1:9/hook","secret_set":true,"next_secret_set":true}}`
	if code, out, errOut := policy("--set", `{"push":{"next_secret":"whsec_Yw=="}}`); code != 0 || strings.TrimSpace(out) != rotating {
		t.Errorf("--set with a next secret: exit %d, %q %q; want %s", code, out, errOut, rotating)
	}
	if code, out, errOut := policy("--set", `{"push":{"timeout":"10s"}}`); code != 0 || !strings.Contains(out, `"secret_set":true,"next_secret_set":true`) {
		t.Errorf("--set of another push field: exit %d, %q %q; want both secrets kept", code, out, errOut)
	}
	if code, out, errOut := policy("--set", `{"push":{"secret":"whsec_Yw==","next_secret":null,"timeout":null}}`); code != 0 || strings.TrimSpace(out) != strings.Replace(signed, "7", "5", 1) {
		t.Errorf("--set ending the rotation: exit %d, %q %q", code, out, errOut)
	}
	if code, out, errOut := policy("--set", `{"push":{"secret":null}}`); code != 0 || strings.TrimSpace(out) != `{"max_attempts":5,"push":{"url":"http://127.0.0.1:9/hook"}}` {
		t.Errorf("--set dropping the secret: exit %d, %q %q", code, out, errOut)
	}
	// A rate's burst filled in from its limit follows a new limit; one
	// given apart from it stays.
	for _, tc := range []struct{ set, want string }{
		{`{"rate":{"limit":100,"per":"1s"}}`, `"rate":{"limit":100,"per":"1s","burst":100}`},
		{`{"rate":{"limit":200}}`, `"rate":{"limit":200,"per":"1s","burst":200}`},
		{`{"rate":{"burst":50}}`, `"rate":{"limit":200,"per":"1s","burst":50}`},
		{`{"rate":{"limit":300}}`, `"rate":{"limit":300,"per":"1s","burst":50}`},
	} {
		if code, out, errOut := policy("--set", tc.set); code != 0 || !strings.Contains(out, tc.want) {
			t.Errorf("--set %s: exit %d, %q %q; want %s", tc.set, code, out, errOut, tc.want)
		}
	}
	// A queue without a policy merges into {}.
	code, out, errOut := cli("policy", "fresh", "--set", `{"concurrency":1,"retry":null}`, "--server", server)
	out = withoutEffective(out)
	if code != 0 || strings.TrimSpace(out) != `{"concurrency":1}` {
		t.Errorf("--set on a queue without a policy: exit %d, %q %q", code, out, errOut)
	}
}

// withoutEffective cuts the answer-only "effective" object, the last
// key of a policy the CLI prints, so that a test compares what is stored.
func withoutEffective(out string) string {
	if i := strings.Index(out, `,"effective":`); i >= 0 {
		return out[:i] + "}\n"
	}
	return out
}
