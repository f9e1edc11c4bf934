package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/internal/pgtest"
)

func TestParseServePostgres(t *testing.T) {
	o, _, err := parseServe([]string{"--postgres", "postgres://u@127.0.0.1/db", "--node", "n1", "--lease", "2s", "--db-timeout", "1500ms"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if o.pg.url != "postgres://u@127.0.0.1/db" || o.pg.node != "n1" || o.pg.lease != 2*time.Second || o.pg.dbTimeout != 1500*time.Millisecond {
		t.Errorf("parsed %+v", o.pg)
	}
	if o, _, _ := parseServe(nil, env(nil)); o.pg.url != "" || o.pg.lease != 5*time.Second || o.pg.dbTimeout != 5*time.Second {
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
		{[]string{"--cache", "64MiB", "--postgres", "postgres://h/db"}, "--cache"},
		{[]string{"--node", "n1"}, "need --postgres"},
		{[]string{"--lease", "2s"}, "need --postgres"},
		{[]string{"--postgres", "postgres://h/db", "--lease", "1ms"}, "--lease"},
		{[]string{"--db-timeout", "2s"}, "need --postgres"},
		{[]string{"--postgres", "postgres://h/db", "--db-timeout", "1ms"}, "--db-timeout"},
		{[]string{"--postgres", "postgres://h/db", "--db-timeout", "1h"}, "--db-timeout"},
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
// partitions to the second. Each node's /metrics counts what it served
// under the broker's names, and the partitions it holds.
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
	// Either node lists the queue, with its reserved task.
	if out, code := cli(a, "queues"); code != 0 || !strings.Contains(out, "jobs") {
		t.Errorf("queues: %d %s", code, out)
	}
	ma, mb := scrape(t, a), scrape(t, b)
	for _, c := range []struct {
		m    map[string]float64
		name string
		want float64
	}{
		{ma, "hourglass_tasks_put_total", 1}, {mb, "hourglass_tasks_put_total", 0},
		{ma, "hourglass_tasks_delivered_total", 0}, {mb, "hourglass_tasks_delivered_total", 1},
		{mb, "hourglass_delivery_lateness_seconds_count", 1},
		{nil, "hourglass_cluster_partitions_owned", 64},
		{nil, "hourglass_cluster_takeovers_total", 0},
	} {
		got := c.m[c.name]
		if c.m == nil {
			got = ma[c.name] + mb[c.name]
		}
		if got != c.want {
			t.Errorf("%s = %v, want %v", c.name, got, c.want)
		}
	}
	// The timer of j1 was flushed by the owner of its partition (twice if
	// it fired before the database's clock said it was due). The flush
	// wakes the reserver from inside its transaction and is timed once it
	// returns, so its count may lag the delivery a little.
	flushes := func() float64 {
		return ma["hourglass_cluster_flush_seconds_count"] + mb["hourglass_cluster_flush_seconds_count"]
	}
	for end := time.Now().Add(5 * time.Second); flushes() < 1 && time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		ma, mb = scrape(t, a), scrape(t, b)
	}
	if k := flushes(); k < 1 {
		t.Errorf("%v flushes, want at least 1", k)
	}
	stopA()
	if out, code := cli(b, "ack", "jobs", "j1", task.Lease); code != 0 || out != "" {
		t.Errorf("ack: %d %s", code, out)
	}
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if mb = scrape(t, b); mb["hourglass_cluster_partitions_owned"] == 64 {
			break
		}
	}
	if mb["hourglass_tasks_acked_total"] != 1 || mb["hourglass_cluster_partitions_owned"] != 64 ||
		mb["hourglass_cluster_partitions_acquired_total"] < 64 || mb["hourglass_cluster_lease_tick_failures_total"] != 0 {
		t.Errorf("b after a left and the ack: acked %v, owned %v, acquired %v, failed ticks %v; want 1, 64, ≥ 64, 0",
			mb["hourglass_tasks_acked_total"], mb["hourglass_cluster_partitions_owned"],
			mb["hourglass_cluster_partitions_acquired_total"], mb["hourglass_cluster_lease_tick_failures_total"])
	}
	// An empty queue is not listed, as on the embedded engine.
	if out, code := cli(b, "queues"); code != 0 || strings.Contains(out, "jobs") {
		t.Errorf("queues after the ack: %d %s", code, out)
	}
}

// scrape reads the unlabelled samples of server's /metrics.
func scrape(t *testing.T, server string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(server + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	out := map[string]float64{}
	for line := range strings.SplitSeq(string(body), "\n") {
		name, v, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") || strings.Contains(name, "{") {
			continue
		}
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			out[name] = f
		}
	}
	return out
}
