package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/client"
)

// TestAuth checks --token: every /v1 route answers 401 (with a JSON error
// and WWW-Authenticate) without the token or with a wrong one, and does
// nothing; with it, the call is served. /metrics, which names every
// queue, needs it too; the probes do not (TestMetricsWithoutToken:
// --metrics-without-token opens /metrics).
func TestAuth(t *testing.T) { engines(t, testAuth) }

func testAuth(t *testing.T) {
	t.Parallel()
	const token = "s3cret-t0ken"
	s := startServer(t, withToken(token))

	routes := []struct{ method, path, body string }{
		{"POST", "/v1/queues/q/tasks", `{"id":"x"}`},
		{"POST", "/v1/queues/q/tasks:batch", `{"tasks":[{"id":"y"}]}`},
		{"GET", "/v1/queues/q/tasks/x", ""},
		{"DELETE", "/v1/queues/q/tasks/x", ""},
		{"POST", "/v1/queues/q/reserve", `{}`},
		{"POST", "/v1/queues/q/tasks/x/ack", `{"lease":"l"}`},
		{"POST", "/v1/queues/q/tasks/x/touch", `{"lease":"l"}`},
		{"POST", "/v1/queues/q/tasks/x/nack", `{"lease":"l"}`},
		{"POST", "/v1/queues/q/tasks/x/kick", ""},
		{"GET", "/v1/queues", ""},
		{"PUT", "/v1/schedules/s", `{"cron":"@hourly","queue":"q"}`},
		{"GET", "/v1/schedules", ""},
		{"DELETE", "/v1/schedules/s", ""},
		{"GET", "/v1/no-such-route", ""},
	}
	for _, auth := range []string{"", "Bearer wrong", "Bearer " + token + "x", "Basic " + token, "Bearer", "Bearer  ", token} {
		for _, r := range routes {
			a := s.callAuth(r.method, r.path, r.body, auth)
			if a.status != 401 || !isAPIError(a) || !strings.HasPrefix(a.header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s %s with Authorization %q: %v, WWW-Authenticate %q; want 401", r.method, r.path, auth, short(a), a.header.Get("WWW-Authenticate"))
			}
		}
	}
	// Nothing was put, nothing scheduled.
	for _, auth := range []string{"Bearer " + token, "bearer " + token} {
		if a := s.callAuth("GET", "/v1/queues", "", auth); a.status != 200 || strings.TrimSpace(string(a.body)) != `{"queues":[]}` {
			t.Errorf("GET /v1/queues with Authorization %q: %v", auth, short(a))
		}
	}
	if a := s.call("GET", "/v1/schedules", ""); a.status != 200 || strings.TrimSpace(string(a.body)) != `{"schedules":[]}` {
		t.Errorf("GET /v1/schedules with the token: %v", short(a))
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if a := s.callAuth("GET", path, "", ""); a.status != 200 {
			t.Errorf("GET %s without token: %v", path, short(a))
		}
	}
	for _, auth := range []string{"", "Bearer wrong"} {
		if a := s.callAuth("GET", "/metrics", "", auth); a.status != 401 || !isAPIError(a) {
			t.Errorf("GET /metrics with Authorization %q: %v, want 401", auth, short(a))
		}
	}
	if a := s.call("GET", "/metrics", ""); a.status != 200 || !strings.Contains(string(a.body), "hourglass_") {
		t.Errorf("GET /metrics with the token: %v", short(a))
	}

	ctx := context.Background()
	if _, _, err := s.client().Put(ctx, "q", api.PutRequest{ID: "ok"}); err != nil {
		t.Errorf("Put with the token: %v", err)
	}
	bad, _ := client.New(s.url(), client.Options{Token: "wrong", HTTPClient: s.hc})
	if _, err := bad.Queues(ctx); !errors.Is(err, client.ErrUnauthorized) {
		t.Errorf("client with a wrong token: %v, want ErrUnauthorized", err)
	}
}

// TestAuth_Env checks that the server takes its token from
// HOURGLASS_TOKEN when --token is not given.
func TestAuth_Env(t *testing.T) { engines(t, testAuth_Env) }

func testAuth_Env(t *testing.T) {
	t.Parallel()
	s := startServer(t, withEnv("HOURGLASS_TOKEN=from-env"), withClientToken("from-env"))
	if a := s.callAuth("GET", "/v1/queues", "", ""); a.status != 401 {
		t.Errorf("without token: %v, want 401", short(a))
	}
	if a := s.call("GET", "/v1/queues", ""); a.status != 200 {
		t.Errorf("with the token from the environment: %v", short(a))
	}
}

// TestRefuseNonLoopback checks that serve refuses an address that is not
// loopback without a token: it exits with status 2 and says why, without
// ever listening. (These addresses are used only to see the refusal; no
// test serves on them.)
func TestRefuseNonLoopback(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	for _, addr := range []string{"0.0.0.0:" + port, "[::]:" + port, ":" + port} {
		_, stderr, code := runBounded(t, 10*time.Second, nil, "serve", "--data", t.TempDir(), "--http", addr)
		if code != 2 || !strings.Contains(stderr, "refusing") || !strings.Contains(stderr, "--insecure") || !strings.Contains(stderr, "usage: hourglass serve") {
			t.Errorf("serve --http %s without token: exit %d, stderr:\n%s", addr, code, stderr)
		}
		if strings.Contains(stderr, `"listening"`) || strings.Contains(stderr, "msg=listening") {
			t.Errorf("serve --http %s listened before refusing:\n%s", addr, stderr)
		}
	}
	// Loopback names and addresses are served without a token (see the
	// other tests); a bad address is a usage error.
	if _, stderr, code := runBounded(t, 10*time.Second, nil, "serve", "--data", t.TempDir(), "--http", "no-port"); code != 2 {
		t.Errorf("serve --http no-port: exit %d, stderr:\n%s", code, stderr)
	}
}

// TestProbesAndMetrics checks /healthz, /readyz and /metrics: Prometheus
// text with the counters, the per-queue gauges and the histograms the
// issue names, counting what was done.
func TestProbesAndMetrics(t *testing.T) { engines(t, testProbesAndMetrics) }

func testProbesAndMetrics(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	for _, path := range []string{"/healthz", "/readyz"} {
		if a := s.call("GET", path, ""); a.status != 200 || a.header.Get("Content-Type") != "application/json" {
			t.Errorf("GET %s: %v", path, short(a))
		}
	}
	c := s.client()
	ctx := context.Background()
	for _, id := range []string{"a", "b", "c"} {
		if _, _, err := c.Put(ctx, "m", api.PutRequest{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := c.Put(ctx, "m", api.PutRequest{ID: "later", Delay: new(api.Duration(time.Hour))}); err != nil {
		t.Fatal(err)
	}
	tasks, err := c.Reserve(ctx, "m", 2, 0)
	if err != nil || len(tasks) != 2 {
		t.Fatalf("Reserve: %+v, %v", tasks, err)
	}
	if err := c.Ack(ctx, "m", tasks[0].ID, tasks[0].Lease); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Nack(ctx, "m", tasks[1].ID, tasks[1].Lease, 0, ""); err != nil {
		t.Fatal(err)
	}

	a := s.call("GET", "/metrics", "")
	if a.status != 200 || !strings.HasPrefix(a.header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /metrics: %v, Content-Type %q", short(a), a.header.Get("Content-Type"))
	}
	text := string(a.body)
	m := parseMetrics(text)
	for name, want := range map[string]float64{
		"hourglass_tasks_put_total":                             4,
		"hourglass_tasks_delivered_total":                       2,
		"hourglass_tasks_acked_total":                           1,
		"hourglass_tasks_nacked_total":                          1,
		"hourglass_lease_expiries_total":                        0,
		"hourglass_tasks_dead_total":                            0,
		"hourglass_delivery_lateness_seconds_count":             2,
		`hourglass_delivery_lateness_seconds_bucket{le="+Inf"}`: 2,
		`hourglass_queue_tasks{queue="m",state="ready"}`:        2,
		`hourglass_queue_tasks{queue="m",state="delayed"}`:      1,
		`hourglass_queue_tasks{queue="m",state="reserved"}`:     0,
		`hourglass_queue_tasks{queue="m",state="dead"}`:         0,
	} {
		if got, ok := m[name]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", name, got, ok, want)
		}
	}
	types := []string{
		"hourglass_tasks_put_total counter",
		"hourglass_delivery_lateness_seconds histogram",
		"hourglass_queue_tasks gauge",
		"go_goroutines gauge",
		"process_resident_memory_bytes gauge",
	}
	if engineOf(t) == clusterEngine {
		types = append(types, "hourglass_cluster_flush_seconds histogram", "hourglass_cluster_partitions_owned gauge")
	} else {
		types = append(types, "hourglass_store_commit_seconds histogram", "hourglass_store_tasks_per_commit histogram",
			"hourglass_reserve_records_kept_total counter", "hourglass_reserve_records_read_total counter")
	}
	for _, typ := range types {
		if !strings.Contains(text, "\n# TYPE "+typ+"\n") {
			t.Errorf("no \"# TYPE %s\"", typ)
		}
	}
	// On the embedded engine every put, ack and nack was a task write of
	// some group commit (a cluster node commits each on its own).
	commits, writes := m["hourglass_store_commit_seconds_count"], m["hourglass_store_tasks_per_commit_sum"]
	if engineOf(t) == embeddedEngine && (commits == 0 || m["hourglass_store_commit_seconds_sum"] <= 0 || writes < 4+1+1 || m[`hourglass_store_tasks_per_commit_bucket{le="+Inf"}`] != m["hourglass_store_tasks_per_commit_count"]) {
		t.Errorf("commit metrics: %v commits, %v task writes", commits, writes)
	}
	// The tasks reserved were in memory or read from the store.
	if engineOf(t) == embeddedEngine && m["hourglass_reserve_records_kept_total"]+m["hourglass_reserve_records_read_total"] < 1 {
		t.Errorf("records kept and read for reserves: %v and %v; want the reserves counted",
			m["hourglass_reserve_records_kept_total"], m["hourglass_reserve_records_read_total"])
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", text)
	}
}

// parseMetrics reads the samples of Prometheus text into a map from
// "name{labels}" to the value.
func parseMetrics(text string) map[string]float64 {
	m := map[string]float64{}
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			m[line[:i]] = v
		}
	}
	return m
}

// TestStop_LongPoll checks SIGTERM with a long poll in flight: the poll is
// answered at once (an empty list), the process exits with status 0 well
// within the 15 s, and what was put is there after a restart.
// SIGINT stops the server the same way.
func TestStop_LongPoll(t *testing.T) { engines(t, testStop_LongPoll) }

func testStop_LongPoll(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.client()
	ctx := context.Background()
	if _, _, err := c.Put(ctx, "other", api.PutRequest{ID: "kept", Delay: new(api.Duration(time.Hour))}); err != nil {
		t.Fatal(err)
	}
	polled := make(chan answer, 1)
	pollErr := make(chan error, 1)
	go func() {
		a, err := s.try("POST", "/v1/queues/poll/reserve", `{"wait":"4m"}`, "")
		polled <- a
		pollErr <- err
	}()
	time.Sleep(300 * time.Millisecond) // the poll is in flight
	start := time.Now()
	took := s.stop()
	a, err := <-polled, <-pollErr
	answered := time.Since(start)
	if err != nil || a.status != 200 || strings.TrimSpace(string(a.body)) != `{"tasks":[]}` {
		t.Errorf("long poll at SIGTERM: %v, %v; want 200 with no task", short(a), err)
	}
	if took > 5*time.Second || answered > 5*time.Second {
		t.Errorf("SIGTERM with a long poll in flight: exit after %v, poll answered after %v", took, answered)
	}
	if log := s.logText(); !strings.Contains(log, `"msg":"stopped"`) {
		t.Errorf("no \"stopped\" in the log:\n%s", log)
	}
	t.Logf("exit %v after SIGTERM with a long poll in flight", took)

	s.start()
	if task, err := c.Get(ctx, "other", "kept"); err != nil || task.State != api.StateDelayed {
		t.Errorf("after the restart: %+v, %v", task, err)
	}
	s.signal(syscall.SIGINT)
	if !s.wait(stopTimeout) {
		t.Fatalf("no exit within %v of SIGINT", stopTimeout)
	}
	if code := s.runs[len(s.runs)-1].cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit status %d after SIGINT, want 0", code)
	}
}

// TestCLI runs the client subcommands against a server: put, reserve, ack
// and queues, with the token from --token and from HOURGLASS_TOKEN; usage
// errors exit with status 2 and the usage line, failed calls with 1.
func TestCLI(t *testing.T) { engines(t, testCLI) }

func testCLI(t *testing.T) {
	t.Parallel()
	const token = "cli-token"
	s := startServer(t, withToken(token))
	url := s.url()
	env := []string{"HOURGLASS_TOKEN=" + token}

	out, stderr, code := runCLI(t, nil, "put", "jobs", `{"a":1}`, "--id", "j1", "--delay", "3s", "--priority", "3", "--server", url, "--token", token)
	var j1 api.Task
	if code != 0 || json.Unmarshal([]byte(out), &j1) != nil || j1.ID != "j1" || j1.State != api.StateDelayed || string(j1.Payload) != `{"a":1}` || j1.Priority != 3 {
		t.Fatalf("put: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	out, stderr, code = runCLI(t, env, "put", "--server", url, "jobs", "plain text", "--raw")
	var plain api.Task
	if code != 0 || json.Unmarshal([]byte(out), &plain) != nil || string(plain.Payload) != `"plain text"` || plain.State != api.StateReady {
		t.Fatalf("put with text and the token from the environment: exit %d, stdout %q, stderr %q", code, out, stderr)
	}

	// j1 is delayed, or ready if the commands took over 3 s (a loaded
	// machine, -race).
	out, stderr, code = runCLI(t, env, "queues", "--server", url)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if row := strings.Join(strings.Fields(lines[len(lines)-1]), " "); code != 0 || len(lines) != 2 ||
		strings.Join(strings.Fields(lines[0]), " ") != "QUEUE DELAYED READY RESERVED DEAD PAUSED" || row != "jobs 1 1 0 0 -" && row != "jobs 0 2 0 0 -" {
		t.Errorf("queues: exit %d, stdout %q, stderr %q", code, out, stderr)
	}

	// Reserve until j1 (due after 3 s) comes, then ack it.
	leases := map[string]string{}
	for range 10 {
		out, stderr, code = runCLI(t, env, "reserve", "jobs", "--max", "10", "--wait", "2s", "--server", url)
		if code != 0 && (code != 2 || out != "") { // 2: none came
			t.Fatalf("reserve: exit %d, stderr %q", code, stderr)
		}
		for line := range strings.Lines(out) {
			var task api.Task
			if err := json.Unmarshal([]byte(line), &task); err != nil || task.Lease == "" {
				t.Fatalf("reserve printed %q, want a task with its lease per line", line)
			}
			leases[task.ID] = task.Lease
		}
		if leases["j1"] != "" {
			break
		}
	}
	if leases["j1"] == "" || leases[plain.ID] == "" {
		t.Fatalf("reserved %v, want j1 and %s", leases, plain.ID)
	}
	if out, stderr, code := runCLI(t, env, "ack", "jobs", "j1", leases["j1"], "--server", url); code != 0 || out != "" {
		t.Errorf("ack: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	if f, err := s.client().Get(context.Background(), "jobs", "j1"); err != nil || f.State != api.StateFinished || f.Outcome != api.FinishedAcked {
		t.Errorf("j1 after the CLI's ack: %+v, %v, want its finished record, acked", f, err)
	}

	// Failed calls: exit 1 with the server's message.
	for _, c := range []struct {
		env  []string
		args []string
		says string
	}{
		{env, []string{"ack", "jobs", "j1", leases["j1"], "--server", url}, "hourglass: "},
		{env, []string{"ack", "jobs", plain.ID, "wrong-lease", "--server", url}, "hourglass: "},
		{nil, []string{"queues", "--server", url}, "token"},
		{nil, []string{"queues", "--server", url, "--token", "wrong"}, "token"},
		{env, []string{"put", "bad queue", "--server", url}, "queue"},
		{env, []string{"queues", "--server", "http://127.0.0.1:" + freePort(t)}, "hourglass: "},
	} {
		out, stderr, code := runCLI(t, c.env, c.args...)
		if code != 1 || !strings.HasPrefix(stderr, "hourglass: ") || !strings.Contains(stderr, c.says) || out != "" {
			t.Errorf("hourglass %s: exit %d, stdout %q, stderr %q; want 1 and a message naming %q", strings.Join(c.args, " "), code, out, stderr, c.says)
		}
	}

	// Usage errors: exit 2 with the usage line, before any call.
	for _, c := range []struct {
		args  []string
		usage string
	}{
		{[]string{"put"}, "usage: hourglass put"},
		{[]string{"put", "q", "--delay", "1s", "--at", "2030-01-02T15:04:05Z", "--server", url}, "usage: hourglass put"},
		{[]string{"put", "q", "--delay", "5", "--server", url}, "usage: hourglass put"},
		{[]string{"put", "q", "--at", "tomorrow", "--server", url}, "usage: hourglass put"},
		{[]string{"put", "q", "p", "extra", "--server", url}, "usage: hourglass put"},
		{[]string{"put", "q", "--priority", "-1", "--server", url}, "usage: hourglass put"},
		{[]string{"reserve"}, "usage: hourglass reserve"},
		{[]string{"reserve", "q", "--max", "0", "--server", url}, "usage: hourglass reserve"},
		{[]string{"reserve", "q", "--wait", "6m", "--server", url}, "usage: hourglass reserve"},
		{[]string{"ack", "q", "id", "--server", url}, "usage: hourglass ack"},
		{[]string{"queues", "extra", "--server", url}, "usage: hourglass queues"},
		{[]string{"queues", "--nope"}, "usage: hourglass queues"},
		{[]string{"queues", "--server", "127.0.0.1:7070"}, "usage: hourglass queues"},
		{[]string{"no-such-command"}, "usage: hourglass"},
		{nil, "usage: hourglass"},
	} {
		out, stderr, code := runCLI(t, env, c.args...)
		if code != 2 || !strings.HasPrefix(stderr, "hourglass: ") || !strings.Contains(stderr, c.usage) || out != "" {
			t.Errorf("hourglass %s: exit %d, stdout %q, stderr %q; want 2 with %q", strings.Join(c.args, " "), code, out, stderr, c.usage)
		}
	}
	// Nothing the failed commands sent was put.
	if qs, err := s.client().Queues(context.Background()); err != nil || len(qs) != 1 || qs[0] != (api.Queue{Name: "jobs", Reserved: 1}) {
		t.Errorf("queues after the failed commands: %+v, %v", qs, err)
	}
}
