package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestPolicySetMerges sets policies with the CLI against a real server:
// --set merges into the stored policy (the push endpoint, retry and
// dead-letter queue stay), null removes a field, --replace replaces the
// whole, and a merge that would lose the endpoint's secret is refused,
// leaving the policy as it was.
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

	// The secret is never answered: a merge must give it again or drop it.
	const signed = `{"max_attempts":7,"push":{"url":"http://127.0.0.1:9/hook","secret_set":true}}`
	if code, out, errOut := policy("--set", `{"push":{"url":"http://127.0.0.1:9/hook","secret":"whsec_YQ=="}}`); code != 0 || strings.TrimSpace(out) != signed {
		t.Fatalf("--set with a secret: exit %d, %q %q", code, out, errOut)
	}
	code, out, errOut := policy("--set", `{"max_attempts":5}`)
	if code != 1 || out != "" || !strings.HasPrefix(errOut, "hourglass: policy: the queue's push endpoint has a secret") || !strings.Contains(errOut, "--replace") {
		t.Errorf("--set on a signed endpoint: exit %d, %q %q; want 1 and the hint", code, out, errOut)
	}
	if code, out, _ := policy(); code != 0 || strings.TrimSpace(out) != signed {
		t.Errorf("policy after the refused merge: %q, want it unchanged: %s", out, signed)
	}
	if code, out, errOut := policy("--set", `{"max_attempts":5,"push":{"secret":"whsec_Yg=="}}`); code != 0 || strings.TrimSpace(out) != strings.Replace(signed, "7", "5", 1) {
		t.Errorf("--set giving the secret again: exit %d, %q %q", code, out, errOut)
	}
	// A next secret is never answered either.
	const rotating = `{"max_attempts":5,"push":{"url":"http://127.0.0.1:9/hook","secret_set":true,"next_secret_set":true}}`
	if code, out, errOut := policy("--set", `{"push":{"secret":"whsec_Yg==","next_secret":"whsec_Yw=="}}`); code != 0 || strings.TrimSpace(out) != rotating {
		t.Errorf("--set with a next secret: exit %d, %q %q; want %s", code, out, errOut, rotating)
	}
	if code, _, errOut := policy("--set", `{"push":{"secret":"whsec_Yg=="}}`); code != 1 || !strings.Contains(errOut, "push.next_secret") {
		t.Errorf("--set keeping a next secret unnamed: exit %d, %q; want 1 naming push.next_secret", code, errOut)
	}
	if code, out, errOut := policy("--set", `{"push":{"secret":"whsec_Yw==","next_secret":null}}`); code != 0 || strings.TrimSpace(out) != strings.Replace(signed, "7", "5", 1) {
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
	code, out, errOut = cli("policy", "fresh", "--set", `{"concurrency":1,"retry":null}`, "--server", server)
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

// TestMergePatch checks mergePatch against the examples of RFC 7396,
// appendix A.
func TestMergePatch(t *testing.T) {
	for _, tc := range []struct{ target, patch, want string }{
		{`{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`},
		{`{"a":"b"}`, `{"a":null}`, `{}`},
		{`{"a":"b","b":"c"}`, `{"a":null}`, `{"b":"c"}`},
		{`{"a":["b"]}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"c"}`, `{"a":["b"]}`, `{"a":["b"]}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`},
		{`{"a":[{"b":"c"}]}`, `{"a":[1]}`, `{"a":[1]}`},
		{`["a","b"]`, `["c","d"]`, `["c","d"]`},
		{`{"a":"b"}`, `["c"]`, `["c"]`},
		{`{"a":"foo"}`, `null`, `null`},
		{`{"a":"foo"}`, `"bar"`, `"bar"`},
		{`{"e":null}`, `{"a":1}`, `{"a":1,"e":null}`},
		{`[1,2]`, `{"a":"b","c":null}`, `{"a":"b"}`},
		{`{}`, `{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{}}}`},
		// Numbers are written back as given.
		{`{"n":12345678901234567890}`, `{"m":0.1}`, `{"m":0.1,"n":12345678901234567890}`},
	} {
		var target, patch any
		if err := decodeNumbers([]byte(tc.target), &target); err != nil {
			t.Fatal(err)
		}
		if err := decodeNumbers([]byte(tc.patch), &patch); err != nil {
			t.Fatal(err)
		}
		got, err := json.Marshal(mergePatch(target, patch))
		if err != nil || string(got) != tc.want {
			t.Errorf("merge %s into %s: %s, %v; want %s", tc.patch, tc.target, got, err, tc.want)
		}
	}
}

// TestStoredPart checks that the answer-only keys of a policy's GET
// answer are left out of what a merge starts from: "effective" at the
// top and "secret_set" and "next_secret_set" in "push", whatever they
// hold.
func TestStoredPart(t *testing.T) {
	for _, tc := range []struct {
		answer, want string
		secrets      string
	}{
		{`{}`, `{}`, ""},
		{`{"max_attempts":3,"effective":{"max_attempts":3,"ttr":"1m0s","retry":{"initial":"0s"}}}`, `{"max_attempts":3}`, ""},
		{`{"push":{"url":"http://h/","secret_set":true},"effective":null}`, `{"push":{"url":"http://h/"}}`, "secret"},
		{`{"push":{"url":"http://h/","secret_set":true,"next_secret_set":true}}`, `{"push":{"url":"http://h/"}}`, "secret next_secret"},
		{`{"push":{"url":"http://h/","secret_set":false},"dead_letter":"d"}`, `{"dead_letter":"d","push":{"url":"http://h/"}}`, ""},
	} {
		var m map[string]any
		if err := decodeNumbers([]byte(tc.answer), &m); err != nil {
			t.Fatal(err)
		}
		secrets := strings.Join(storedPart(m), " ")
		if got, _ := json.Marshal(m); string(got) != tc.want || secrets != tc.secrets {
			t.Errorf("storedPart(%s) = %s, %q; want %s, %q", tc.answer, got, secrets, tc.want, tc.secrets)
		}
	}
}
