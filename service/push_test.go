package service_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// TestCheckPush refuses every bad field of a push endpoint, through
// CheckPolicy, with an error wrapping task.ErrInvalid that names it, and
// passes good ones, boundaries included.
func TestCheckPush(t *testing.T) {
	push := func(f func(p *task.Push)) task.Policy {
		p := &task.Push{URL: "https://app.internal/hooks/email"}
		f(p)
		return task.Policy{Push: p}
	}
	headers := func(n int) map[string]string {
		h := make(map[string]string, n)
		for i := range n {
			h[fmt.Sprintf("X-H%d", i)] = "v"
		}
		return h
	}
	for _, tc := range []struct {
		name  string
		p     task.Policy
		field string // "" for a valid policy
	}{
		{"none", task.Policy{}, ""},
		{"minimal", push(func(*task.Push) {}), ""},
		{"http with port, path and query", push(func(p *task.Push) { p.URL = "http://127.0.0.1:8080/a/b?c=d" }), ""},
		{"IPv6 literal", push(func(p *task.Push) { p.URL = "http://[::1]:8080/" }), ""},
		{"scheme in capitals", push(func(p *task.Push) { p.URL = "HTTPS://app.internal/" }), ""},
		{"everything", push(func(p *task.Push) {
			p.Timeout = task.MaxPushTimeout
			p.Headers = headers(task.MaxPushHeaders)
			p.Headers["Authorization"] = "Bearer x\tand a tab"
			delete(p.Headers, "X-H0")
			p.Secret = strings.Repeat("s", task.MaxPushSecret)
		}), ""},
		{"URL at its bound", push(func(p *task.Push) {
			p.URL = "https://a/" + strings.Repeat("x", task.MaxPushURL-len("https://a/"))
		}), ""},
		{"shortest timeout", push(func(p *task.Push) { p.Timeout = time.Millisecond }), ""},
		{"header at its bound", push(func(p *task.Push) {
			p.Headers = map[string]string{"X-A": strings.Repeat("v", task.MaxPushHeaderLen-3)}
		}), ""},
		{"token characters", push(func(p *task.Push) { p.Headers = map[string]string{"!#$%&'*+-.^_`|~09az": "v"} }), ""},

		{"no URL", push(func(p *task.Push) { p.URL = "" }), "push.url"},
		{"relative URL", push(func(p *task.Push) { p.URL = "/hooks" }), "push.url"},
		{"no host", push(func(p *task.Push) { p.URL = "http:///hooks" }), "push.url"},
		{"opaque", push(func(p *task.Push) { p.URL = "http:app.internal" }), "push.url"},
		{"ftp", push(func(p *task.Push) { p.URL = "ftp://app.internal/" }), "push.url"},
		{"file", push(func(p *task.Push) { p.URL = "file:///etc/passwd" }), "push.url"},
		{"unparsable", push(func(p *task.Push) { p.URL = "http://a b/" }), "push.url"},
		{"control character", push(func(p *task.Push) { p.URL = "http://a/\n" }), "push.url"},
		{"URL too long", push(func(p *task.Push) {
			p.URL = "https://a/" + strings.Repeat("x", task.MaxPushURL-len("https://a/")+1)
		}), "push.url"},
		{"negative timeout", push(func(p *task.Push) { p.Timeout = -time.Second }), "push.timeout"},
		{"timeout under 1ms", push(func(p *task.Push) { p.Timeout = time.Microsecond }), "push.timeout"},
		{"timeout too long", push(func(p *task.Push) { p.Timeout = task.MaxPushTimeout + 1 }), "push.timeout"},
		{"too many headers", push(func(p *task.Push) { p.Headers = headers(task.MaxPushHeaders + 1) }), "push.headers"},
		{"empty name", push(func(p *task.Push) { p.Headers = map[string]string{"": "v"} }), "push.headers"},
		{"space in name", push(func(p *task.Push) { p.Headers = map[string]string{"X A": "v"} }), "push.headers"},
		{"colon in name", push(func(p *task.Push) { p.Headers = map[string]string{"X:A": "v"} }), "push.headers"},
		{"non-ASCII name", push(func(p *task.Push) { p.Headers = map[string]string{"X-É": "v"} }), "push.headers"},
		{"newline in value", push(func(p *task.Push) { p.Headers = map[string]string{"X-A": "v\r\nX-B: w"} }), "push.headers"},
		{"NUL in value", push(func(p *task.Push) { p.Headers = map[string]string{"X-A": "v\x00"} }), "push.headers"},
		{"DEL in value", push(func(p *task.Push) { p.Headers = map[string]string{"X-A": "v\x7f"} }), "push.headers"},
		{"Hourglass header", push(func(p *task.Push) { p.Headers = map[string]string{"hourglass-signature": "t=1,v1=00"} }), "push.headers"},
		{"Hourglass prefix", push(func(p *task.Push) { p.Headers = map[string]string{"HOURGLASS-X": "v"} }), "push.headers"},
		{"Host", push(func(p *task.Push) { p.Headers = map[string]string{"Host": "evil"} }), "push.headers"},
		{"Content-Length", push(func(p *task.Push) { p.Headers = map[string]string{"content-length": "1"} }), "push.headers"},
		{"Connection", push(func(p *task.Push) { p.Headers = map[string]string{"Connection": "close"} }), "push.headers"},
		{"Transfer-Encoding", push(func(p *task.Push) { p.Headers = map[string]string{"Transfer-Encoding": "chunked"} }), "push.headers"},
		{"Upgrade", push(func(p *task.Push) { p.Headers = map[string]string{"Upgrade": "h2c"} }), "push.headers"},
		{"header too long", push(func(p *task.Push) {
			p.Headers = map[string]string{"X-A": strings.Repeat("v", task.MaxPushHeaderLen-2)}
		}), "push.headers"},
		{"secret too long", push(func(p *task.Push) { p.Secret = strings.Repeat("s", task.MaxPushSecret+1) }), "push.secret"},
		{"whsec_ secret", push(func(p *task.Push) { p.Secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" }), ""},
		{"rotation", push(func(p *task.Push) { p.Secret, p.NextSecret = "whsec_YQ==", strings.Repeat("n", task.MaxPushSecret) }), ""},
		{"whsec_ not base64", push(func(p *task.Push) { p.Secret = "whsec_e2e" }), "push.secret"},
		{"whsec_ unpadded", push(func(p *task.Push) { p.Secret = "whsec_YQ" }), "push.secret"},
		{"whsec_ empty key", push(func(p *task.Push) { p.Secret = "whsec_" }), "push.secret"},
		{"next secret not base64", push(func(p *task.Push) { p.Secret, p.NextSecret = "a", "whsec_?" }), "push.next_secret"},
		{"next secret too long", push(func(p *task.Push) { p.Secret, p.NextSecret = "a", strings.Repeat("n", task.MaxPushSecret+1) }), "push.next_secret"},
		{"next secret alone", push(func(p *task.Push) { p.NextSecret = "whsec_YQ==" }), "push.next_secret"},
		{"webhook-id header", push(func(p *task.Push) { p.Headers = map[string]string{"Webhook-Id": "msg_1"} }), "push.headers"},
		{"webhook-timestamp header", push(func(p *task.Push) { p.Headers = map[string]string{"webhook-timestamp": "1"} }), "push.headers"},
		{"webhook-signature header", push(func(p *task.Push) { p.Headers = map[string]string{"WEBHOOK-SIGNATURE": "v1,x"} }), "push.headers"},
	} {
		err := service.CheckPolicy("mail", tc.p)
		if tc.field == "" {
			if err != nil {
				t.Errorf("%s: %v, want valid", tc.name, err)
			}
			if err := service.CheckPush(tc.p.Push); err != nil {
				t.Errorf("%s: CheckPush: %v, want valid", tc.name, err)
			}
			continue
		}
		if err == nil || !errors.Is(err, task.ErrInvalid) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: %v, want task.ErrInvalid naming %s", tc.name, err, tc.field)
		}
		if strings.Count(err.Error(), "hourglass: ") > 1 {
			t.Errorf("%s: %q has the prefix twice", tc.name, err)
		}
	}
}

// TestAttemptOutcome: an ack or a nack made under WithPush ends a push's
// attempt, pushed or push-failed, with its status (0 for a push without
// an answer); made under any other context, it keeps its outcome and has
// no status.
func TestAttemptOutcome(t *testing.T) {
	bg := context.Background()
	for _, tc := range []struct {
		ctx     context.Context
		outcome string
		want    string
		status  int
	}{
		{bg, task.AttemptAcked, task.AttemptAcked, 0},
		{bg, task.AttemptNacked, task.AttemptNacked, 0},
		{service.WithPush(bg, 200), task.AttemptAcked, task.AttemptPushed, 200},
		{service.WithPush(bg, 204), task.AttemptAcked, task.AttemptPushed, 204},
		{service.WithPush(bg, 500), task.AttemptNacked, task.AttemptPushFailed, 500},
		{service.WithPush(bg, 503), task.AttemptNacked, task.AttemptPushFailed, 503},
		{service.WithPush(bg, 0), task.AttemptNacked, task.AttemptPushFailed, 0},
		{context.WithValue(service.WithPush(bg, 429), otherKey{}, 1), task.AttemptNacked, task.AttemptPushFailed, 429},
	} {
		got, status := service.AttemptOutcome(tc.ctx, tc.outcome)
		if got != tc.want || status != tc.status {
			t.Errorf("AttemptOutcome(%v, %s) = %s, %d; want %s, %d", tc.ctx, tc.outcome, got, status, tc.want, tc.status)
		}
	}
}

// otherKey is a context key of no package, beside the push status.
type otherKey struct{}
