package main

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParsePut(t *testing.T) {
	p, c, _, err := parsePut([]string{"--id", "a", "--key", "tenant-42", "emails", `{"to":"x"}`, "--delay", "1.5s", "--priority", "0", "--ttr", "2m", "--max-attempts", "3", "--replace", "--server", "https://h:1/p"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	r := p.req
	if p.queue != "emails" || r.ID != "a" || r.Key != "tenant-42" || string(r.Payload) != `{"to":"x"}` || r.Delay == nil || r.Delay.D() != 1500*time.Millisecond ||
		r.Priority == nil || *r.Priority != 0 || r.TTR == nil || r.TTR.D() != 2*time.Minute || r.MaxAttempts != 3 || !r.Replace || r.At != nil {
		t.Errorf("parsed %+v", p)
	}
	if c.URL() != "https://h:1/p" {
		t.Errorf("server %q", c.URL())
	}
	for arg, want := range map[string]string{
		`42`:       `42`,
		`"quoted"`: `"quoted"`,
		`[1, 2]`:   `[1, 2]`,
	} {
		p, _, _, err := parsePut([]string{"q", arg}, env(nil))
		if err != nil || string(p.req.Payload) != want {
			t.Errorf("payload %s: %s, %v; want %s", arg, p.req.Payload, err, want)
		}
	}
	// Text that is not JSON is refused, naming --raw; with --raw any
	// text is sent as a JSON string.
	for arg, want := range map[string]string{
		`hello world`: `"hello world"`,
		`{"broken":`:  `"{\"broken\":"`,
		`42`:          `"42"`,
		``:            `""`,
	} {
		if _, _, _, err := parsePut([]string{"q", arg}, env(nil)); arg != "42" && (err == nil || !strings.Contains(err.Error(), "--raw")) {
			t.Errorf("payload %s: %v; want an error naming --raw", arg, err)
		}
		p, _, _, err := parsePut([]string{"q", arg, "--raw"}, env(nil))
		if err != nil || string(p.req.Payload) != want {
			t.Errorf("payload %s --raw: %s, %v; want %s", arg, p.req.Payload, err, want)
		}
	}
	// After "--" everything is an argument, flags' look-alikes too.
	if p, _, _, err := parsePut([]string{"q", "--", "-5"}, env(nil)); err != nil || string(p.req.Payload) != "-5" {
		t.Errorf("-- -5: %s, %v", p.req.Payload, err)
	}
	old := stdin
	defer func() { stdin = old }()
	stdin = strings.NewReader("from stdin\n")
	if _, _, _, err := parsePut([]string{"q", "-"}, env(nil)); err == nil || !strings.Contains(err.Error(), "standard input is not JSON") {
		t.Errorf("- of text: %v, want an error", err)
	}
	stdin = strings.NewReader("from stdin\n")
	if p, _, _, err := parsePut([]string{"q", "-", "--raw"}, env(nil)); err != nil || string(p.req.Payload) != `"from stdin\n"` {
		t.Errorf("- --raw: %s, %v", p.req.Payload, err)
	}
	stdin = strings.NewReader(`{"k":[1]}` + "\n")
	if p, _, _, err := parsePut([]string{"q", "-"}, env(nil)); err != nil || string(p.req.Payload) != `{"k":[1]}`+"\n" {
		t.Errorf("- of JSON: %s, %v", p.req.Payload, err)
	}
	at := "2030-01-02T03:04:05.5+01:00"
	if p, _, _, err := parsePut([]string{"q", "--at", at}, env(nil)); err != nil || p.req.At == nil || !p.req.At.Equal(time.Date(2030, 1, 2, 2, 4, 5, 5e8, time.UTC)) {
		t.Errorf("--at: %v, %v", p.req.At, err)
	}
}

// TestClientUsageErrors checks that every bad invocation of a client
// subcommand exits 2 before calling anything, saying what is wrong, with
// the subcommand's usage line.
func TestClientUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args        []string
		want, usage string
	}{
		{[]string{"put"}, "missing QUEUE", putUsage},
		{[]string{"put", "q", "p", "extra"}, `"extra"`, putUsage},
		{[]string{"put", "q", "--delay", "5"}, "duration", putUsage},
		{[]string{"put", "q", "--delay", "1s", "--at", "2030-01-01T00:00:00Z"}, "not both", putUsage},
		{[]string{"put", "q", "--at", "tomorrow"}, "RFC 3339", putUsage},
		{[]string{"put", "q", "--priority", "-1"}, "4294967295", putUsage},
		{[]string{"put", "q", "--priority", "4294967296"}, "4294967295", putUsage},
		{[]string{"put", "q", "--max-attempts", "-2"}, "--max-attempts", putUsage},
		{[]string{"put", "q", "--server", "localhost:7070"}, "bad server URL", putUsage},
		{[]string{"put", "q", "--colour"}, "-colour", putUsage},
		{[]string{"reserve"}, "missing QUEUE", reserveUsage},
		{[]string{"reserve", "a", "b"}, `"b"`, reserveUsage},
		{[]string{"reserve", "q", "--max", "0"}, "--max", reserveUsage},
		{[]string{"reserve", "q", "--max", "1001"}, "--max", reserveUsage},
		{[]string{"reserve", "q", "--wait", "6m"}, "--wait", reserveUsage},
		{[]string{"reserve", "q", "--wait", "30"}, "30", reserveUsage},
		{[]string{"ack", "q", "id"}, "missing QUEUE, ID or LEASE", ackUsage},
		{[]string{"ack", "q", "id", "lease", "more"}, `"more"`, ackUsage},
		{[]string{"queues", "extra"}, `"extra"`, queuesUsage},
	} {
		var stdout, stderr strings.Builder
		if code := run(tc.args, &stdout, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2", tc.args, code)
		}
		msg := stderr.String()
		if !strings.HasPrefix(msg, "hourglass: ") || !strings.Contains(msg, tc.want) || !strings.Contains(msg, tc.usage) {
			t.Errorf("%v: stderr %q, want hourglass: ... %s ... and the usage line", tc.args, msg, tc.want)
		}
		if stdout.Len() != 0 {
			t.Errorf("%v: stdout %q", tc.args, stdout.String())
		}
	}
}

// TestSubcommandHelp checks -h of every subcommand and the list of them.
func TestSubcommandHelp(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		usage string
	}{
		{[]string{"serve", "-h"}, serveUsage},
		{[]string{"put", "-h"}, putUsage},
		{[]string{"reserve", "--help"}, reserveUsage},
		{[]string{"ack", "-h"}, ackUsage},
		{[]string{"queues", "-h"}, queuesUsage},
		{[]string{"help"}, commandsUsage},
	} {
		var stdout, stderr strings.Builder
		if code := run(tc.args, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), tc.usage) {
			t.Errorf("%v: exit %d, stdout %q", tc.args, code, stdout.String())
		}
	}
	var stdout, stderr strings.Builder
	if code := run([]string{"frobnicate"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), commandsUsage) {
		t.Errorf("unknown subcommand: %d %q", code, stderr.String())
	}
}

// TestClientCallError checks that a call that cannot reach the server
// exits 1 with an error.
func TestClientCallError(t *testing.T) {
	var stdout, stderr strings.Builder
	if code := run([]string{"queues", "--server", "http://127.0.0.1:1"}, &stdout, &stderr); code != 1 || !strings.HasPrefix(stderr.String(), "hourglass: ") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
}

// startServer runs `hourglass serve` in this process on a free loopback
// port and a temporary directory, until the test ends, and returns its
// URL.
func startServer(t *testing.T) string {
	t.Helper()
	return startServerArgs(t, []string{"--http", "127.0.0.1:0", "--data", filepath.Join(t.TempDir(), "data")},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// startServerArgs runs serve with the command-line args, logging to log,
// until the test ends (t.Cleanup stops it), and returns its URL once it
// says it is ready.
func startServerArgs(t *testing.T, args []string, log *slog.Logger) string {
	t.Helper()
	o, _, err := parseServe(args, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- serve(ctx, o, log, func(a string) { addr <- a }) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(stopTimeout):
			t.Error("serve did not stop")
		}
	})
	var server string
	select {
	case a := <-addr:
		server = "http://" + a
	case err := <-done:
		t.Fatalf("serve: %v", err)
	}
	waitReady(t, server)
	return server
}

// cli runs the command args and returns its exit status, stdout and
// stderr.
func cli(args ...string) (code int, stdout, stderr string) {
	var out, errOut strings.Builder
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestServerEnv checks that the client subcommands call the server
// $HOURGLASS_SERVER names when --server is not given, and --server's when
// both are.
func TestServerEnv(t *testing.T) {
	server := startServer(t)
	dead := "http://127.0.0.1:1" // nothing listens on port 1
	t.Setenv(serverEnv, server)
	if code, out, errOut := cli("put", "env", `{"n":1}`, "--id", "e1"); code != 0 || !strings.Contains(out, `"id":"e1"`) {
		t.Fatalf("put with $%s: exit %d, %q %q", serverEnv, code, out, errOut)
	}
	if code, out, errOut := cli("get", "env", "e1"); code != 0 || !strings.Contains(out, `"payload":{"n":1}`) {
		t.Errorf("get with $%s: exit %d, %q %q", serverEnv, code, out, errOut)
	}
	if code, _, errOut := cli("queues", "--server", dead); code != 1 || !strings.HasPrefix(errOut, "hourglass: ") {
		t.Errorf("queues --server %s with $%s set to a live server: exit %d, %q; want the flag's dead server (1)", dead, serverEnv, code, errOut)
	}
	t.Setenv(serverEnv, dead)
	if code, out, errOut := cli("queues", "--server", server); code != 0 || !strings.Contains(out, "env") {
		t.Errorf("queues --server with $%s dead: exit %d, %q %q; want the flag's server", serverEnv, code, out, errOut)
	}
	if code, _, errOut := cli("reserve", "env"); code != 1 {
		t.Errorf("reserve with $%s dead: exit %d, %q; want 1", serverEnv, code, errOut)
	}
	// parsed: the environment's URL, the flag's over it, the default without either.
	for _, tc := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"q"}, "https://h:1/p", "https://h:1/p"},
		{[]string{"q", "--server", "http://flag:2"}, "https://h:1/p", "http://flag:2"},
		{[]string{"q"}, "", defaultServer},
	} {
		_, c, _, err := parsePut(tc.args, env(map[string]string{serverEnv: tc.env}))
		if err != nil || c.URL() != tc.want {
			t.Errorf("put %v with $%s=%q: %v, %v; want %s", tc.args, serverEnv, tc.env, c, err, tc.want)
		}
	}
}

// TestPutPayload puts payloads against a real server: text that is not
// JSON is refused with exit 2 and a hint naming --raw, before any call;
// --raw sends it as a JSON string; JSON goes as it is.
func TestPutPayload(t *testing.T) {
	server := startServer(t)
	for _, arg := range []string{"hello world", `{"to":"ada"`, "{to: ada}"} {
		code, out, errOut := cli("put", "p", arg, "--server", server)
		if code != 2 || out != "" || !strings.HasPrefix(errOut, "hourglass: PAYLOAD is not JSON") ||
			!strings.Contains(errOut, "give --raw to send it as a JSON string") || !strings.Contains(errOut, putUsage) {
			t.Errorf("put %q: exit %d, stdout %q, stderr %q; want 2 and the hint", arg, code, out, errOut)
		}
	}
	if code, out, errOut := cli("queues", "--server", server); code != 0 || strings.Contains(out, "p ") {
		t.Errorf("queues after the refused puts: exit %d, %q %q; want no queue p", code, out, errOut)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"hello world", "--raw"}, `"payload":"hello world"`},
		{[]string{"--raw", `{"to":"ada"}`}, `"payload":"{\"to\":\"ada\"}"`},
		{[]string{`{"to":"ada"}`}, `"payload":{"to":"ada"}`},
	} {
		code, out, errOut := cli(append([]string{"put", "p"}, append(tc.args, "--server", server)...)...)
		if code != 0 || !strings.Contains(out, tc.want) {
			t.Errorf("put %q: exit %d, stdout %q, stderr %q; want %s", tc.args, code, out, errOut, tc.want)
		}
	}
}

// TestReserveEmpty reserves against a real server: an empty queue exits
// 2, printing nothing on stdout and why on stderr; a queue with a task
// exits 0 and prints it.
func TestReserveEmpty(t *testing.T) {
	server := startServer(t)
	for _, args := range [][]string{{"reserve", "empty"}, {"reserve", "empty", "--wait", "10ms", "--max", "5"}} {
		code, out, errOut := cli(append(args, "--server", server)...)
		if code != 2 || out != "" || !strings.HasPrefix(errOut, "hourglass: no task of empty was ready") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2, nothing, and why", args, code, out, errOut)
		}
	}
	if code, _, errOut := cli("put", "full", `{"n":1}`, "--server", server); code != 0 {
		t.Fatalf("put: exit %d, %q", code, errOut)
	}
	if code, out, errOut := cli("reserve", "full", "--server", server); code != 0 || !strings.Contains(out, `"lease":`) || errOut != "" {
		t.Errorf("reserve of a ready task: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
