package main

import (
	"strings"
	"testing"
	"time"
)

func TestParsePut(t *testing.T) {
	p, c, _, err := parsePut([]string{"--id", "a", "emails", `{"to":"x"}`, "--delay", "1.5s", "--priority", "0", "--ttr", "2m", "--max-attempts", "3", "--replace", "--server", "https://h:1/p"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	r := p.req
	if p.queue != "emails" || r.ID != "a" || string(r.Payload) != `{"to":"x"}` || r.Delay == nil || r.Delay.D() != 1500*time.Millisecond ||
		r.Priority == nil || *r.Priority != 0 || r.TTR == nil || r.TTR.D() != 2*time.Minute || r.MaxAttempts != 3 || !r.Replace || r.At != nil {
		t.Errorf("parsed %+v", p)
	}
	if c.URL() != "https://h:1/p" {
		t.Errorf("server %q", c.URL())
	}
	for arg, want := range map[string]string{
		`42`:          `42`,
		`"quoted"`:    `"quoted"`,
		`hello world`: `"hello world"`,
		`{"broken":`:  `"{\"broken\":"`,
		`[1, 2]`:      `[1, 2]`,
	} {
		p, _, _, err := parsePut([]string{"q", arg}, env(nil))
		if err != nil || string(p.req.Payload) != want {
			t.Errorf("payload %s: %s, %v; want %s", arg, p.req.Payload, err, want)
		}
	}
	// After "--" everything is an argument, flags' look-alikes too.
	if p, _, _, err := parsePut([]string{"q", "--", "-5"}, env(nil)); err != nil || string(p.req.Payload) != "-5" {
		t.Errorf("-- -5: %s, %v", p.req.Payload, err)
	}
	old := stdin
	defer func() { stdin = old }()
	stdin = strings.NewReader("from stdin\n")
	if p, _, _, err := parsePut([]string{"q", "-"}, env(nil)); err != nil || string(p.req.Payload) != `"from stdin\n"` {
		t.Errorf("- : %s, %v", p.req.Payload, err)
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
