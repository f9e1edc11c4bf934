package e2e_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/push"
)

// The black-box tests of push signatures (api.Push, "The signature"):
// the pushes a server makes are checked with implementations of Standard
// Webhooks that nobody here wrote, the reference library of Node
// (e2e/node, the standardwebhooks package) and Python's standard hmac,
// as well as with package push; their webhook-id is the same for every
// attempt of a task, a restart between them included, and another for a
// task put again under the same id; a push replayed under another
// webhook-id is refused by all three.

// webhookMessage is a push as the external checks read it.
type webhookMessage struct {
	Name    string            `json:"name"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
	Valid   bool              `json:"valid"`
}

// webhookFile is what the external checks read: every message checked
// under each secret alone.
type webhookFile struct {
	Secrets  []string         `json:"secrets"`
	Messages []webhookMessage `json:"messages"`
}

// newWebhookSecret returns a secret in Standard Webhooks' form: "whsec_"
// and the base64 of 24 random bytes.
func newWebhookSecret(t *testing.T) string {
	b := make([]byte, 24)
	rand.Read(b)
	return push.SecretPrefix + base64.StdEncoding.EncodeToString(b)
}

// TestWebhooks_Signatures pushes tasks under a policy rotating its key
// (a secret and a next secret), each failing its first attempt, one of
// them across a restart of the server, and checks every push's
// signatures with package push, Node's standardwebhooks and Python's
// hmac, and its webhook-id.
func TestWebhooks_Signatures(t *testing.T) { engines(t, testWebhooksSignatures) }

func testWebhooksSignatures(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Hourglass-Attempt") == "1" {
			w.WriteHeader(500)
			return
		}
		w.WriteHeader(204)
	})
	secret, next := newWebhookSecret(t), newWebhookSecret(t)
	setPush(t, s, "signed", fmt.Sprintf(`{"retry":{"initial":"1s","max":"1s","multiplier":1,"jitter":0},"push":{"url":%q,"timeout":"5s","secret":%q,"next_secret":%q}}`,
		rc.srv.URL, secret, next))
	if a := s.call("GET", "/v1/queues/signed/policy", ""); a.status != 200 || strings.Contains(string(a.body), "whsec_") ||
		!strings.Contains(string(a.body), `"secret_set":true`) || !strings.Contains(string(a.body), `"next_secret_set":true`) {
		t.Errorf("GET policy answers %v: want secret_set and next_secret_set, never a secret", a)
	}

	// put puts a task under id and returns the two pushes of it: the
	// first answered 500, the second 204.
	put := func(id, payload string, between func()) []pushed {
		t.Helper()
		from := rc.count()
		if a := s.call("POST", "/v1/queues/signed/tasks", fmt.Sprintf(`{"id":%q,"payload":%s,"ttr":"2s"}`, id, payload)); a.status != 201 {
			t.Fatalf("put %s: %v", id, a)
		}
		first := rc.wait(t, from+1, 10*time.Second)
		if between != nil {
			between()
		}
		second := rc.wait(t, from+2, 20*time.Second)
		waitPushed(t, s, "signed", id, "gone", 10*time.Second)
		return []pushed{first, second}
	}
	a := put("a", `{"n":1}`, nil)
	again := put("a", `{"n":2}`, nil) // the same task id, put anew
	restarted := put("b", `{"n":3}`, func() { s.stop(); s.start() })

	ids := func(ps []pushed) (string, string) {
		return ps[0].header.Get("webhook-id"), ps[1].header.Get("webhook-id")
	}
	for name, ps := range map[string][]pushed{"a": a, "a put again": again, "b across a restart": restarted} {
		first, second := ids(ps)
		if !strings.HasPrefix(first, "msg_") || first != second {
			t.Errorf("%s: webhook-id %q then %q, want the same msg_ id for both attempts", name, first, second)
		}
		if ps[0].header.Get("Hourglass-Attempt") != "1" || ps[1].header.Get("Hourglass-Attempt") != "2" {
			t.Errorf("%s: attempts %q, %q; want 1, 2", name, ps[0].header.Get("Hourglass-Attempt"), ps[1].header.Get("Hourglass-Attempt"))
		}
	}
	idA, _ := ids(a)
	idAgain, _ := ids(again)
	idB, _ := ids(restarted)
	if idA == idAgain || idA == idB || idAgain == idB {
		t.Errorf("webhook-ids %q, %q, %q: want a new one for each task put", idA, idAgain, idB)
	}

	var f webhookFile
	f.Secrets = []string{secret, next}
	all := append(append(append([]pushed{}, a...), again...), restarted...)
	for i, p := range all {
		if sigs := strings.Fields(p.header.Get("webhook-signature")); len(sigs) != 2 {
			t.Errorf("push %d: webhook-signature %q, want two v1 signatures (a secret and a next one)", i, p.header.Get("webhook-signature"))
		}
		f.Messages = append(f.Messages, webhookMessageOf(fmt.Sprintf("push %d (%s)", i, p.header.Get("Hourglass-Task-Id")), p, true))
	}
	// The first push of a, replayed under the id of a's second put: its
	// body and time are the same, but the id is signed.
	replay := a[0]
	replay.header = replay.header.Clone()
	replay.header.Set("webhook-id", idAgain)
	f.Messages = append(f.Messages, webhookMessageOf("a replayed under another webhook-id", replay, false))

	for _, m := range f.Messages {
		r, _ := http.NewRequest("POST", "/", nil)
		for k, v := range m.Headers {
			r.Header.Set(k, v)
		}
		for _, sec := range f.Secrets {
			err := push.Verify(r, []byte(m.Body), time.Now(), sec)
			if m.Valid && err != nil || !m.Valid && !errors.Is(err, push.ErrBadSignature) {
				t.Errorf("push.Verify(%s) = %v, valid %v", m.Name, err, m.Valid)
			}
		}
	}
	path := filepath.Join(t.TempDir(), "webhooks.json")
	b, _ := json.Marshal(f)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Run("node", func(t *testing.T) { checkWebhooksNode(t, path) })
	t.Run("python", func(t *testing.T) { checkWebhooksPython(t, path) })
}

// webhookMessageOf returns p as the external checks read it.
func webhookMessageOf(name string, p pushed, valid bool) webhookMessage {
	return webhookMessage{
		Name: name,
		Headers: map[string]string{
			"webhook-id":        p.header.Get("webhook-id"),
			"webhook-timestamp": p.header.Get("webhook-timestamp"),
			"webhook-signature": p.header.Get("webhook-signature"),
		},
		Body:  string(p.body),
		Valid: valid,
	}
}

// missingChecker ends t where an external checker is not installed: it
// fails under CI (which installs them: .ci/run), and skips elsewhere,
// saying how to install it.
func missingChecker(t *testing.T, what, install string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is missing, and CI must run this check: %s", what, install)
	}
	t.Skipf("%s is missing (CI fails here): %s", what, install)
}

// checkWebhooksNode runs e2e/node's test (node --test) on the pushes in
// path: Standard Webhooks' reference library, standardwebhooks, verifies
// them.
func checkWebhooksNode(t *testing.T, path string) {
	node, err := exec.LookPath("node")
	if err != nil {
		missingChecker(t, "node", "apt-get install nodejs npm")
	}
	if _, err := os.Stat(filepath.Join("node", "node_modules", "standardwebhooks")); err != nil {
		missingChecker(t, "the standardwebhooks package", "npm ci --prefix e2e/node")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "webhooks.test.mjs")
	cmd.Dir = "node"
	cmd.Env = append(os.Environ(), "HOURGLASS_WEBHOOKS="+path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "# pass 2") {
		t.Errorf("node --test did not pass both its tests:\n%s", out)
	}
}

// checkWebhooksPython checks the pushes in path with Python's standard
// library, in a few lines as a receiver would.
func checkWebhooksPython(t *testing.T, path string) {
	py, err := exec.LookPath("python3")
	if err != nil {
		missingChecker(t, "python3", "apt-get install python3")
	}
	const script = `
import base64, hashlib, hmac, json, sys, time
f = json.load(open(sys.argv[1]))
for m in f["messages"]:
    h, body = m["headers"], m["body"].encode()
    msg = h["webhook-id"].encode() + b"." + h["webhook-timestamp"].encode() + b"." + body
    for secret in f["secrets"]:
        key = base64.b64decode(secret.removeprefix("whsec_"))
        sig = "v1," + base64.b64encode(hmac.new(key, msg, hashlib.sha256).digest()).decode()
        ok = any(hmac.compare_digest(sig, s) for s in h["webhook-signature"].split())
        if ok != m["valid"] or abs(time.time() - int(h["webhook-timestamp"])) > 300:
            sys.exit("%s: signature ok %s, want %s" % (m["name"], ok, m["valid"]))
`
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, py, "-c", script, path).CombinedOutput()
	if err != nil {
		t.Errorf("python3 refuses a signature: %v\n%s", err, out)
	}
}

// TestWebhooks_Policy: a policy's secrets are refused unless in
// Standard Webhooks' form or raw ("whsec_" must be followed by padded
// base64), a next secret only beside a secret, the headers the
// signature uses cannot be configured, and a policy read back with
// "next_secret_set" cannot be written back without the next secret; all
// 400 naming the field, the policy left as it was.
func TestWebhooks_Policy(t *testing.T) { engines(t, testWebhooksPolicy) }

func testWebhooksPolicy(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	const before = `{"push":{"url":"http://127.0.0.1:9/hook","secret_set":true,"next_secret_set":true}}`
	setPush(t, s, "q", `{"push":{"url":"http://127.0.0.1:9/hook","secret":"raw secret","next_secret":"whsec_bmV4dA=="}}`)
	for _, tc := range []struct{ push, want string }{
		{`{"url":"http://127.0.0.1:9/hook","secret":"whsec_e2e"}`, "push.secret"},
		{`{"url":"http://127.0.0.1:9/hook","secret":"whsec_"}`, "push.secret"},
		{`{"url":"http://127.0.0.1:9/hook","secret":"a","next_secret":"whsec_bmV4dA"}`, "push.next_secret"},
		{`{"url":"http://127.0.0.1:9/hook","secret":"a","next_secret":"` + strings.Repeat("n", 257) + `"}`, "push.next_secret"},
		{`{"url":"http://127.0.0.1:9/hook","next_secret":"whsec_bmV4dA=="}`, "push.next_secret"},
		{`{"url":"http://127.0.0.1:9/hook","secret":"a","next_secret_set":true}`, "next_secret"},
		{`{"url":"http://127.0.0.1:9/hook","headers":{"Webhook-Id":"msg_1"}}`, "push.headers"},
		{`{"url":"http://127.0.0.1:9/hook","headers":{"webhook-signature":"v1,x"}}`, "push.headers"},
	} {
		a := s.call("PUT", "/v1/queues/q/policy", `{"push":`+tc.push+`}`)
		var e struct{ Error string }
		if a.status != 400 || json.Unmarshal(a.body, &e) != nil || !strings.HasPrefix(e.Error, "hourglass: ") || strings.Count(e.Error, "hourglass: ") != 1 || !strings.Contains(e.Error, tc.want) {
			t.Errorf("PUT push %s: %v; want 400 naming %s", tc.push, a, tc.want)
		}
		if a := s.call("GET", "/v1/queues/q/policy", ""); !strings.HasPrefix(strings.TrimSpace(string(a.body)), strings.TrimSuffix(before, "}")+`,"effective":`) {
			t.Fatalf("policy after a refused PUT: %v, want %s", a, before)
		}
	}
}
