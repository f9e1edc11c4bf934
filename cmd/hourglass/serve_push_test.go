package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/internal/logbuf"
)

// TestParseServe_PushAllow reads --push-allow, repeated or with commas,
// into the pusher's targets, and refuses a bad entry naming it.
func TestParseServe_PushAllow(t *testing.T) {
	o, _, err := parseServe(nil, env(nil))
	if err != nil || o.push.targets != nil {
		t.Fatalf("default: %+v, %v; want no list", o.push, err)
	}
	if err := o.push.targets.Check("http://169.254.169.254/"); err == nil {
		t.Error("default: a link-local target allowed")
	}
	if err := o.push.targets.Check("http://10.0.0.1/"); err != nil {
		t.Errorf("default: %v", err)
	}
	o, _, err = parseServe([]string{"--push-allow", "10.0.0.0/8, app.internal", "--push-allow", "127.0.0.1"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	for url, ok := range map[string]bool{
		"http://10.1.2.3/": true, "https://app.internal/x": true, "http://127.0.0.1:8080/": true,
		"http://127.0.0.2/": false, "http://192.168.0.1/": false, "http://169.254.169.254/": false,
	} {
		if err := o.push.targets.Check(url); (err == nil) != ok {
			t.Errorf("--push-allow 10.0.0.0/8,app.internal,127.0.0.1: Check(%s) = %v, want ok %v", url, err, ok)
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "127.1", "http://app.internal"} {
		if _, _, err := parseServe([]string{"--push-allow", bad}, env(nil)); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("--push-allow %s: %v, want an error naming it", bad, err)
		}
	}
}

// TestServe_PushTargets runs serve in this process with the rule of a
// server beyond loopback (o.loopback false, as parseServe sets it for
// 0.0.0.0; the test listens on loopback only) and of one on loopback:
// beyond, a push URL is 400 until --push-allow names its host; on
// either, the server's own address is 400; start-up logs the rule.
func TestServe_PushTargets(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		loopback bool
		rule     string
		urls     map[string]string // URL (SELF: the server's address) -> "" for 200, else a word of the 400
	}{
		{"beyond loopback", nil, false, "rule=\"none: this server listens beyond loopback", map[string]string{
			"http://127.0.0.1:1/hook":   "set --push-allow",
			"http://example.com/hook":   "set --push-allow",
			"http://SELF/v1/queues/own": "own address",
		}},
		{"beyond loopback with --push-allow", []string{"--push-allow", "127.0.0.1,app.internal"}, false, "only the hosts --push-allow names: app.internal, 127.0.0.1", map[string]string{
			"http://127.0.0.1:1/hook":    "",
			"https://app.internal/hook":  "",
			"http://127.0.0.2:1/hook":    "--push-allow",
			"http://169.254.169.254/":    "metadata",
			"http://SELF/v1/queues/own/": "", // named: 127.0.0.1
		}},
		{"on loopback", nil, true, "any host but the cloud metadata endpoints", map[string]string{
			"http://127.0.0.1:1/hook":    "",
			"http://example.com/hook":    "",
			"http://SELF/v1/queues/own/": "own address",
			"http://[fd00:ec2::254]/":    "metadata",
			"http://metadata.goog/":      "metadata",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, _, err := parseServe(append([]string{"--http", "127.0.0.1:0", "--data", filepath.Join(t.TempDir(), "data")}, tc.args...), env(nil))
			if err != nil {
				t.Fatal(err)
			}
			o.loopback = tc.loopback
			var logs logbuf.Buffer
			ctx, cancel := context.WithCancel(context.Background())
			addr := make(chan string, 1)
			done := make(chan error, 1)
			go func() {
				done <- serve(ctx, o, slog.New(slog.NewTextHandler(&logs, nil)), func(a string) { addr <- a })
			}()
			self := <-addr
			defer func() {
				cancel()
				select {
				case <-done:
				case <-time.After(stopTimeout):
					t.Error("serve did not stop")
				}
			}()
			server := "http://" + self
			waitReady(t, server)
			if n := strings.Count(logs.String(), "msg=\"push targets\""); n != 1 || !strings.Contains(logs.String(), tc.rule) {
				t.Errorf("start-up logged the push rule %d times, want once with %q:\n%s", n, tc.rule, logs.String())
			}
			for url, want := range tc.urls {
				url = strings.Replace(url, "SELF", self, 1)
				req, _ := http.NewRequest("PUT", server+"/v1/queues/q/policy", strings.NewReader(`{"push":{"url":"`+url+`"}}`))
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				switch {
				case want == "" && resp.StatusCode != 200:
					t.Errorf("PUT push %s: %d %s, want 200", url, resp.StatusCode, body)
				case want != "" && (resp.StatusCode != 400 || !strings.Contains(string(body), want) || !strings.HasPrefix(string(body), `{"error":"hourglass: `)):
					t.Errorf("PUT push %s: %d %s, want 400 naming %q", url, resp.StatusCode, body, want)
				}
			}
		})
	}
}
