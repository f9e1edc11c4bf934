package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/internal/pgtest"
)

func TestParseServePostgres(t *testing.T) {
	o, _, err := parseServe([]string{"--postgres", "postgres://u@127.0.0.1/db", "--node", "n1", "--lease", "2s"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if o.pg.url != "postgres://u@127.0.0.1/db" || o.pg.node != "n1" || o.pg.lease != 2*time.Second {
		t.Errorf("parsed %+v", o.pg)
	}
	if o, _, _ := parseServe(nil, env(nil)); o.pg.url != "" || o.pg.lease != 5*time.Second {
		t.Errorf("defaults %+v", o.pg)
	}
	if !poolSizeGiven("postgres://h/db?pool_max_conns=3") || !poolSizeGiven("host=h pool_max_conns=3") || poolSizeGiven("postgres://h/db") {
		t.Error("poolSizeGiven")
	}
}

// TestServePostgresUsageErrors: --data with --postgres, and the cluster's
// flags without it, exit 2 with the usage line.
func TestServePostgresUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--postgres", "postgres://h/db", "--data", "/tmp/x"}, "--data and --postgres"},
		{[]string{"--data", "/tmp/x", "--postgres", "postgres://h/db"}, "--data and --postgres"},
		{[]string{"--node", "n1"}, "need --postgres"},
		{[]string{"--lease", "2s"}, "need --postgres"},
		{[]string{"--postgres", "postgres://h/db", "--lease", "1ms"}, "--lease"},
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

// TestServePostgresEndToEnd runs two serve nodes in this process on one
// throwaway PostgreSQL: a task put through one is reserved and acked
// through the other; both stop as on a signal, the first releasing its
// partitions to the second.
func TestServePostgresEndToEnd(t *testing.T) {
	url := pgtest.Start(t).CreateDatabase(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	start := func(name string) (server string, stop func()) {
		o, _, err := parseServe([]string{"--http", "127.0.0.1:0", "--postgres", url, "--node", name, "--lease", "1s"}, env(nil))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		addr := make(chan string, 1)
		done := make(chan error, 1)
		go func() { done <- serve(ctx, o, log, func(a string) { addr <- a }) }()
		server = "http://" + <-addr
		waitReady(t, server)
		return server, func() {
			t.Helper()
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("serve %s: %v", name, err)
				}
			case <-time.After(stopTimeout):
				t.Fatalf("serve %s did not stop within %v", name, stopTimeout)
			}
		}
	}
	a, stopA := start("a")
	b, stopB := start("b")
	defer stopB()
	cli := func(server string, args ...string) (string, int) {
		t.Helper()
		var stdout, stderr strings.Builder
		code := run(append(args, "--server", server), &stdout, &stderr)
		return stdout.String() + stderr.String(), code
	}
	if out, code := cli(a, "put", "jobs", `{"n":1}`, "--id", "j1", "--delay", "300ms"); code != 0 || !strings.Contains(out, `"state":"delayed"`) {
		t.Fatalf("put: %d %s", code, out)
	}
	out, code := cli(b, "reserve", "jobs", "--wait", "5s")
	var task struct {
		ID, Lease string
		Due       time.Time
	}
	if err := json.Unmarshal([]byte(out), &task); code != 0 || err != nil || task.ID != "j1" || task.Lease == "" {
		t.Fatalf("reserve: %d %s (%v)", code, out, err)
	}
	if late := time.Since(task.Due); late < 0 {
		t.Errorf("delivered %v early", -late)
	}
	stopA()
	if out, code := cli(b, "ack", "jobs", "j1", task.Lease); code != 0 || out != "" {
		t.Errorf("ack: %d %s", code, out)
	}
	if out, code := cli(b, "queues"); code != 0 || !strings.Contains(out, "jobs") {
		t.Errorf("queues: %d %s", code, out)
	}
}
