package e2e_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/api"
)

// TestLateness_Split checks that delivery lateness is told apart in its
// two parts (issue 44), in GET /v1/stats/lateness and in /metrics: a
// task that fell due while the server was down (killed for 3 s) was late
// by the server's fault, and its lateness is the server's (ready), not a
// wait for a worker; a task ready while no worker asked (2 s) waited,
// and its lateness is waiting, not the server's. For a window of one
// delivery the two parts add up to its lateness exactly.
func TestLateness_Split(t *testing.T) { engines(t, testLateness_Split) }

func testLateness_Split(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.client()
	ctx := context.Background()

	if _, _, err := c.Put(ctx, "down", api.PutRequest{ID: "d", Delay: new(api.Duration(time.Second))}); err != nil {
		t.Fatal(err)
	}
	s.kill()
	time.Sleep(3 * time.Second)
	s.start()
	if r := reserveOnce(c, "down", 10*time.Second); r.err != nil || len(r.tasks) != 1 {
		t.Fatalf("reserve after the restart: %+v, %v", r.tasks, r.err)
	}
	ws := lateness(t, s)
	if len(ws) != 1 || ws[0].Deliveries != 1 {
		t.Fatalf("lateness after one delivery: %+v", ws)
	}
	w := ws[0]
	if w.Ready.Max.D() < 1500*time.Millisecond {
		t.Errorf("a task due while the server was down for 3 s: server lateness (ready) %v, want 1.5 s or more; window %+v", w.Ready.Max.D(), w)
	}
	if w.Ready.Max.D()+w.Wait.Max.D() != w.Max.D() {
		t.Errorf("one delivery: ready %v + wait %v, want its lateness %v", w.Ready.Max.D(), w.Wait.Max.D(), w.Max.D())
	}

	if _, _, err := c.Put(ctx, "idle", api.PutRequest{ID: "w", Delay: new(api.Duration(100 * time.Millisecond))}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2100 * time.Millisecond)
	if r := reserveOnce(c, "idle", 10*time.Second); r.err != nil || len(r.tasks) != 1 {
		t.Fatalf("reserve of the waiting task: %+v, %v", r.tasks, r.err)
	}
	var waited time.Duration
	total := 0
	for _, w := range lateness(t, s) {
		total += w.Deliveries
		waited = max(waited, w.Wait.Max.D())
		for _, q := range []api.LatenessQuantiles{w.Ready, w.Wait} {
			if q.P50 > q.P99 || q.P99 > q.Max || q.Max > w.Max {
				t.Errorf("lateness window %+v", w)
			}
		}
	}
	if total != 2 || waited < 1500*time.Millisecond {
		t.Errorf("after a task ready for 2 s without a worker: %d deliveries, longest wait %v; want 2 and 1.5 s or more", total, waited)
	}

	m := string(s.call("GET", "/metrics", "").body)
	for _, name := range []string{"hourglass_delivery_lateness_seconds_count 2", "hourglass_ready_lateness_seconds_count 2", "hourglass_ready_wait_seconds_count 2"} {
		if !strings.Contains(m, name) {
			t.Errorf("/metrics has no %q", name)
		}
	}
}

// lateness answers GET /v1/stats/lateness's windows.
func lateness(t *testing.T, s *server) []api.LatenessWindow {
	t.Helper()
	a := s.call("GET", "/v1/stats/lateness", "")
	var out api.LatenessResponse
	if a.status != 200 || json.Unmarshal(a.body, &out) != nil {
		t.Fatalf("GET /v1/stats/lateness: %v", a)
	}
	return out.Windows
}
