package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// env returns a getenv over the map m.
func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestParseServeDefaults(t *testing.T) {
	o, help, err := parseServe(nil, env(nil))
	if err != nil || help {
		t.Fatal(err, help)
	}
	if o.data != "./hourglass-data" || o.http != "127.0.0.1:7070" || o.token != "" || o.insecure ||
		o.logLevel != slog.LevelInfo || o.logFormat != "text" || o.maxPayload != 1<<20 ||
		o.maxDelay != 87600*time.Hour || o.defaultTTR != 60*time.Second || o.cache != 32<<20 {
		t.Errorf("defaults %+v", o)
	}
}

func TestParseServe(t *testing.T) {
	o, _, err := parseServe([]string{"--data", "/tmp/x", "--http", "localhost:9000", "--log-level", "debug", "--log-format", "json",
		"--max-payload", "64KiB", "--max-delay", "24h", "--default-ttr", "5s", "--cache", "256MiB"}, env(map[string]string{tokenEnv: "from-env"}))
	if err != nil {
		t.Fatal(err)
	}
	if o.data != "/tmp/x" || o.http != "localhost:9000" || o.logLevel != slog.LevelDebug || o.logFormat != "json" ||
		o.maxPayload != 64<<10 || o.cache != 256<<20 || o.maxDelay != 24*time.Hour || o.defaultTTR != 5*time.Second || o.token != "from-env" {
		t.Errorf("parsed %+v", o)
	}
	// --token wins over the environment, even empty.
	if o, _, _ := parseServe([]string{"--token", "flag"}, env(map[string]string{tokenEnv: "env"})); o.token != "flag" {
		t.Errorf("token %q, want the flag's", o.token)
	}
	if o, _, _ := parseServe([]string{"--token="}, env(map[string]string{tokenEnv: "env"})); o.token != "" {
		t.Errorf("token %q, want the flag's empty one", o.token)
	}
	if _, help, _ := parseServe([]string{"-h"}, env(nil)); !help {
		t.Error("-h is not help")
	}
}

// TestServeLoopback checks the refusal to listen beyond this machine
// without a token.
func TestServeLoopback(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  string
		ok   bool
	}{
		{[]string{"--http", "127.0.0.1:7070"}, "", true},
		{[]string{"--http", "127.0.0.2:7070"}, "", true},
		{[]string{"--http", "[::1]:7070"}, "", true},
		{[]string{"--http", "localhost:7070"}, "", true},
		{[]string{"--http", ":7070"}, "", false},
		{[]string{"--http", "0.0.0.0:7070"}, "", false},
		{[]string{"--http", "[::]:7070"}, "", false},
		{[]string{"--http", "192.0.2.1:7070"}, "", false},
		{[]string{"--http", "0.0.0.0:7070", "--token", "t"}, "", true},
		{[]string{"--http", "0.0.0.0:7070"}, "t", true},
		{[]string{"--http", "0.0.0.0:7070", "--insecure"}, "", true},
	} {
		_, _, err := parseServe(tc.args, env(map[string]string{tokenEnv: tc.env}))
		if (err == nil) != tc.ok {
			t.Errorf("%v (env token %q): %v, want ok=%v", tc.args, tc.env, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "--insecure") {
			t.Errorf("%v: %v does not say how to proceed", tc.args, err)
		}
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "1048576": 1 << 20, "1MiB": 1 << 20, "512KiB": 512 << 10, "2 MiB": 2 << 20, "1GiB": 1 << 30, "10B": 10, "1MB": 1 << 20} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MiB", "1.5MiB", "-1", "1TiB", "lots", "99999999999GiB"} {
		if _, err := parseBytes(in); err == nil {
			t.Errorf("parseBytes(%q): no error", in)
		}
	}
}

// TestServeUsageErrors checks that bad serve flags exit 2 with serve's
// usage line, before anything is opened.
func TestServeUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-payload", "0"}, "--max-payload"},
		{[]string{"--max-payload", "65MiB"}, "64MiB"},
		{[]string{"--max-payload", "big"}, "big"},
		{[]string{"--cache", "512KiB"}, "1MiB"},
		{[]string{"--cache", "2048GiB"}, "1024GiB"},
		{[]string{"--cache", "lots"}, "lots"},
		{[]string{"--max-delay", "0s"}, "--max-delay"},
		{[]string{"--max-delay", "5"}, "5"},
		{[]string{"--default-ttr", "1us"}, "--default-ttr"},
		{[]string{"--log-level", "loud"}, "loud"},
		{[]string{"--log-format", "xml"}, "xml"},
		{[]string{"--http", "nowhere"}, "nowhere"},
		{[]string{"--http", "127.0.0.1:http-alt-nope"}, "--http"},
		{[]string{"--data", ""}, "--data"},
		{[]string{"extra"}, `"extra"`},
		{[]string{"--port", "1"}, "-port"},
	} {
		var stdout, stderr strings.Builder
		if code := run(append([]string{"serve"}, tc.args...), &stdout, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2", tc.args, code)
		}
		msg := stderr.String()
		if !strings.HasPrefix(msg, "hourglass: ") || !strings.Contains(msg, tc.want) || !strings.Contains(msg, serveUsage) {
			t.Errorf("%v: stderr %q, want hourglass: ... %s ... and the usage line", tc.args, msg, tc.want)
		}
	}
}

// TestServeEndToEnd runs serve in this process on a free port and a
// temporary directory, drives it with the client subcommands, and stops
// it as a signal would.
func TestServeEndToEnd(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	o, _, err := parseServe([]string{"--http", "127.0.0.1:0", "--data", dir, "--token", "tok"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr := make(chan string, 1)
	done := make(chan error, 1)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	go func() { done <- serve(ctx, o, log, func(a string) { addr <- a }) }()
	server := "http://" + <-addr
	waitReady(t, server)

	cli := func(args ...string) (string, int) {
		t.Helper()
		var stdout, stderr strings.Builder
		code := run(append(args, "--server", server, "--token", "tok"), &stdout, &stderr)
		return stdout.String() + stderr.String(), code
	}
	if out, code := cli("put", "jobs", `{"n":1}`, "--id", "j1", "--priority", "1"); code != 0 || !strings.Contains(out, `"payload":{"n":1}`) {
		t.Fatalf("put: %d %s", code, out)
	}
	if out, code := cli("put", "jobs", "plain words", "--raw", "--delay", "1h"); code != 0 || !strings.Contains(out, `"payload":"plain words"`) || !strings.Contains(out, `"state":"delayed"`) {
		t.Fatalf("put text: %d %s", code, out)
	}
	out, code := cli("reserve", "jobs", "--max", "5", "--wait", "1s")
	if code != 0 || strings.Count(out, "\n") != 1 {
		t.Fatalf("reserve: %d %s", code, out)
	}
	var task struct{ ID, Lease string }
	if err := json.Unmarshal([]byte(out), &task); err != nil || task.ID != "j1" || task.Lease == "" {
		t.Fatalf("reserve printed %s (%v)", out, err)
	}
	if out, code := cli("ack", "jobs", "j1", "wrong-lease"); code != 1 || !strings.HasPrefix(out, "hourglass: ") {
		t.Errorf("ack with a wrong lease: %d %s", code, out)
	}
	if out, code := cli("ack", "jobs", "j1", task.Lease); code != 0 || out != "" {
		t.Errorf("ack: %d %s", code, out)
	}
	if out, code := cli("queues"); code != 0 || !strings.Contains(out, "QUEUE") || !strings.Contains(out, "jobs") {
		t.Errorf("queues: %d %s", code, out)
	}
	var stdout, stderr strings.Builder
	if code := run([]string{"queues", "--server", server, "--token", "bad"}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "token") {
		t.Errorf("queues with a wrong token: %d %s", code, stderr.String())
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve: %v", err)
		}
	case <-time.After(stopTimeout):
		t.Fatal("serve did not stop")
	}
}

// waitReady polls /readyz until it answers 200.
func waitReady(t *testing.T, server string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(server + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("server not ready")
}
