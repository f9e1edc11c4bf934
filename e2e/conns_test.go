package e2e_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestMetricsWithoutToken checks --metrics-without-token: /metrics
// answers without the token (for a scraper that cannot send one), while
// /v1 still needs it. TestAuth checks that /metrics needs the token by
// default.
func TestMetricsWithoutToken(t *testing.T) { engines(t, testMetricsWithoutToken) }

func testMetricsWithoutToken(t *testing.T) {
	t.Parallel()
	s := startServer(t, withToken("s3cret"), withFlags("--metrics-without-token"))
	if a := s.callAuth("GET", "/metrics", "", ""); a.status != 200 || !strings.Contains(string(a.body), "hourglass_") {
		t.Errorf("GET /metrics without the token: %v, want 200", short(a))
	}
	if a := s.callAuth("GET", "/v1/queues", "", ""); a.status != 401 {
		t.Errorf("GET /v1/queues without the token: %v, want 401", short(a))
	}
}

// TestDataInUse checks that a second server on a data directory in use
// exits at once with status 1, naming the directory and the process that
// holds it, without ever listening, and leaves the first one serving.
// Only the embedded store has a data directory.
func TestDataInUse(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	_, stderr, code := runBounded(t, 30*time.Second, nil, "serve", "--data", s.data, "--http", "127.0.0.1:0")
	want := fmt.Sprintf("hourglass: data directory %s is in use by another hourglass (pid %d)", s.data, s.proc.cmd.Process.Pid)
	if code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("second serve on %s: exit %d, stderr:\n%s\nwant exit 1 and %q", s.data, code, stderr, want)
	}
	if strings.Contains(stderr, "listening") {
		t.Errorf("second serve listened before failing:\n%s", stderr)
	}
	if a := s.call("GET", "/readyz", ""); a.status != 200 {
		t.Errorf("first server after the second failed: /readyz %v", short(a))
	}
}
