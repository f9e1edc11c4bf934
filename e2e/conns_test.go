package e2e_test

import (
	"strings"
	"testing"
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
