package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/internal/tcpproxy"
)

// A cluster node cut off from its database (issue 39): node n1 reaches
// PostgreSQL through a proxy (internal/tcpproxy), n2 directly. With n1's
// link blackholed (packets dropped, nothing reset) or cut (reset), n1
// answers puts 503 within --db-timeout, and a reserve within its wait
// and --db-timeout; its /readyz turns 503 within two leases while its
// /healthz stays 200; its log says a lasting failure about once a second,
// not at every try; and n2 takes its partitions over, so that the tasks
// due meanwhile are delivered, none lost. Once the link is back, n1 is
// ready again within about a second, and serves.

// The timings of the nodes under test.
const (
	cutLease     = time.Second
	cutDBTimeout = time.Second
	// cutHold is how long the link stays down.
	cutHold = 8 * time.Second
	// cutTasks are put through n1 before the cut, due during it.
	cutTasks = 40
	cutDue   = 2 * time.Second
)

func TestDBCut(t *testing.T) {
	for _, c := range []struct {
		name string
		mode tcpproxy.Mode
	}{{"blackhole", tcpproxy.Blackhole}, {"cut", tcpproxy.Cut}} {
		t.Run(c.name, func(t *testing.T) { testDBCut(t, c.mode) })
	}
}

func testDBCut(t *testing.T, mode tcpproxy.Mode) {
	url, proxied, proxy := proxiedDatabase(t)
	flags := withFlags("--lease", cutLease.String(), "--db-timeout", cutDBTimeout.String())
	n1 := startServer(t, withPostgres(proxied, "n1"), flags)
	n2 := startServer(t, withPostgres(url, "n2"), flags)

	var batch []string
	for i := range cutTasks {
		batch = append(batch, fmt.Sprintf(`{"id":"t%d","delay":"%v"}`, i, cutDue))
	}
	if a := n1.call("POST", "/v1/queues/q/tasks:batch", `{"tasks":[`+strings.Join(batch, ",")+`]}`); a.status != 200 {
		t.Fatalf("batch put before the cut: %v", a)
	}

	// A task reserved before the cut, to ack during it.
	if a := n1.call("POST", "/v1/queues/h/tasks", `{"id":"held"}`); a.status != http.StatusCreated {
		t.Fatalf("put before the cut: %v", a)
	}
	a := n1.call("POST", "/v1/queues/h/reserve", `{"max":1}`)
	var held struct {
		Tasks []struct{ ID, Lease string }
	}
	if err := json.Unmarshal(a.body, &held); err != nil || len(held.Tasks) != 1 {
		t.Fatalf("reserve before the cut: %v", a)
	}

	proxy.Set(mode)
	cut := time.Now()
	before := proxy.Accepted()

	// Puts on n1, at once, single and batches of more tasks than the
	// node has job ids in hand (so each batch fetches ids): each answers
	// within the timeout, saying that the database fails (503; each item
	// of a batch), none waiting behind another.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			path, body, status := "/v1/queues/q/tasks", fmt.Sprintf(`{"id":"cut%d"}`, i), http.StatusServiceUnavailable
			if i%2 == 1 {
				var items []string
				for k := range 150 {
					items = append(items, fmt.Sprintf(`{"id":"cut%d-%d"}`, i, k))
				}
				path, body, status = "/v1/queues/q/tasks:batch", `{"tasks":[`+strings.Join(items, ",")+`]}`, http.StatusOK
			}
			start := time.Now()
			a, err := n1.try("POST", path, body, "")
			took := time.Since(start)
			t.Logf("put %d during the cut: %v after %v", i, a.status, took.Round(time.Millisecond))
			switch {
			case err != nil:
				t.Errorf("put %d during the cut: %v", i, err)
			case a.status != status || !strings.Contains(string(a.body), `"hourglass: `) || !strings.Contains(string(a.body), "database"):
				t.Errorf("put %d during the cut: %v, want %d saying the database fails", i, a, status)
			case strings.Contains(string(a.body), proxy.Addr()):
				t.Errorf("put %d during the cut: %v quotes the database's address", i, a)
			case took > lateAllowed(t, cutDBTimeout+2*time.Second, start, start.Add(took)):
				t.Errorf("put %d during the cut answered after %v, want within --db-timeout %v (and a margin)", i, took, cutDBTimeout)
			}
		})
	}
	// Reads and an ack answer 503 within the timeout too.
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/v1/queues/q/tasks/t1", ""},
		{"GET", "/v1/queues", ""},
		{"POST", "/v1/queues/h/tasks/held/ack", `{"lease":"` + held.Tasks[0].Lease + `"}`},
	} {
		wg.Go(func() {
			start := time.Now()
			a, err := n1.try(r.method, r.path, r.body, "")
			took := time.Since(start)
			t.Logf("%s %s during the cut: %v after %v", r.method, r.path, a, took.Round(time.Millisecond))
			switch {
			case err != nil:
				t.Errorf("%s %s during the cut: %v", r.method, r.path, err)
			case a.status != http.StatusServiceUnavailable || !strings.Contains(string(a.body), `"hourglass: database unreachable`):
				t.Errorf("%s %s during the cut: %v, want 503 hourglass: database unreachable: ...", r.method, r.path, a)
			case took > lateAllowed(t, cutDBTimeout+2*time.Second, start, start.Add(took)):
				t.Errorf("%s %s during the cut answered after %v, want within --db-timeout %v (and a margin)", r.method, r.path, took, cutDBTimeout)
			}
		})
	}
	// A reserve that waits answers within its wait and the timeout.
	wg.Go(func() {
		start := time.Now()
		a, err := n1.try("POST", "/v1/queues/empty/reserve", `{"max":1,"wait":"2s"}`, "")
		took := time.Since(start)
		t.Logf("reserve during the cut: %v after %v", a, took.Round(time.Millisecond))
		switch {
		case err != nil:
			t.Errorf("reserve during the cut: %v", err)
		case a.status != http.StatusServiceUnavailable && a.status != http.StatusOK:
			t.Errorf("reserve during the cut: %v, want 503 or an empty 200", a)
		case took > lateAllowed(t, 2*time.Second+cutDBTimeout+2*time.Second, start, start.Add(took)):
			t.Errorf("reserve with a wait of 2s during the cut answered after %v", took)
		}
	})

	// /readyz turns 503 within two leases; /healthz stays 200.
	var notReady time.Time
	for time.Since(cut) < cutHold {
		if a, err := n1.try("GET", "/healthz", "", ""); err != nil || a.status != http.StatusOK {
			t.Errorf("/healthz during the cut: %v %v, want 200", a, err)
		}
		a, err := n1.try("GET", "/readyz", "", "")
		if err != nil {
			t.Fatalf("/readyz during the cut: %v", err)
		}
		if a.status == http.StatusServiceUnavailable {
			if !strings.Contains(string(a.body), `"hourglass: database unreachable`) || strings.Contains(string(a.body), proxy.Addr()) {
				t.Errorf("/readyz during the cut: %v, want hourglass: database unreachable: ..., without the database's address", a)
			}
			t.Logf("/readyz during the cut: %v", a)
			notReady = time.Now()
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if notReady.IsZero() {
		t.Fatalf("/readyz still 200 %v after the cut", cutHold)
	}
	if took := notReady.Sub(cut); took > lateAllowed(t, 2*cutLease+500*time.Millisecond, cut, notReady) {
		t.Errorf("/readyz turned 503 %v after the cut, want within two leases (%v)", took, 2*cutLease)
	}
	t.Logf("/readyz 503 %v after the cut", notReady.Sub(cut).Round(time.Millisecond))

	// n2 serves meanwhile, and delivers the tasks due during the cut,
	// n1's partitions' included once it took them over.
	if a, err := n2.try("POST", "/v1/queues/q/tasks", `{"id":"during"}`, ""); err != nil || a.status != http.StatusCreated {
		t.Errorf("put on n2 during the cut: %v %v, want 201", a, err)
	}
	got := map[string]bool{}
	reserveAll := func(s *server, want int, until time.Time) {
		for len(got) < want && time.Now().Before(until) {
			a, err := s.try("POST", "/v1/queues/q/reserve", `{"max":100,"wait":"500ms"}`, "")
			if err != nil || a.status != http.StatusOK {
				continue
			}
			var r struct {
				Tasks []struct{ ID string }
			}
			if err := json.Unmarshal(a.body, &r); err != nil {
				t.Fatalf("reserve: %v: %s", err, a.body)
			}
			for _, tk := range r.Tasks {
				if got[tk.ID] {
					t.Errorf("task %s delivered twice", tk.ID)
				}
				got[tk.ID] = true
			}
		}
	}
	reserveAll(n2, cutTasks+1, cut.Add(cutHold))
	if len(got) < cutTasks+1 {
		t.Errorf("n2 delivered %d of the %d tasks due during the cut", len(got), cutTasks+1)
	}

	// Hold the cut for cutHold in all, then count n1's warnings.
	time.Sleep(time.Until(cut.Add(cutHold)))
	restored := time.Now()
	wg.Wait()
	counts := map[string]int{}
	for _, e := range n1.runs[len(n1.runs)-1].log.entries() {
		msg, _ := e["msg"].(string)
		for _, m := range []string{"flushing timers failed", "lease tick failed"} {
			if strings.Contains(msg, m) {
				counts[m]++
			}
		}
	}
	conns := proxy.Accepted() - before
	t.Logf("n1's warnings during %v of cut: %v; connections it tried: %d", cutHold, counts, conns)
	if limit := int64(cutHold/time.Second) * 30; conns > limit {
		t.Errorf("n1 tried %d connections in %v of cut, want a few a second (at most %d)", conns, cutHold, limit)
	}
	for m, k := range counts {
		if limit := int(cutHold/time.Second) + 4; k > limit {
			t.Errorf("n1 logged %q %d times in %v of cut, want about once a second (at most %d)", m, k, cutHold, limit)
		}
	}

	// The link is back: n1 is ready again within about a second, and
	// serves.
	proxy.Set(tcpproxy.Pass)
	var ready time.Time
	for time.Since(restored) < 10*time.Second {
		if a, err := n1.try("GET", "/readyz", "", ""); err == nil && a.status == http.StatusOK {
			ready = time.Now()
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if ready.IsZero() {
		t.Fatalf("/readyz not 200 within 10s of the link coming back")
	}
	if took := ready.Sub(restored); took > lateAllowed(t, 2*time.Second, restored, ready) {
		t.Errorf("/readyz 200 again %v after the link came back, want within about a second", took)
	}
	t.Logf("/readyz 200 again %v after the link came back", ready.Sub(restored).Round(time.Millisecond))
	if a := n1.call("POST", "/v1/queues/q/tasks", `{"id":"after"}`); a.status != http.StatusCreated {
		t.Errorf("put on n1 after the cut: %v, want 201", a)
	}
	reserveAll(n1, cutTasks+2, time.Now().Add(10*time.Second))
	if len(got) != cutTasks+2 {
		t.Errorf("delivered %d tasks, want %d: none lost", len(got), cutTasks+2)
	}
}

// TestDBCut_Blip: a blip of the link, shorter than a quarter of a lease,
// costs a healthy node neither its leases nor its readiness: the lease
// loop's back-off after a failed tick stays short enough to renew them
// in time.
func TestDBCut_Blip(t *testing.T) {
	for _, c := range []struct {
		name string
		mode tcpproxy.Mode
	}{{"blackhole", tcpproxy.Blackhole}, {"cut", tcpproxy.Cut}} {
		t.Run(c.name, func(t *testing.T) {
			_, proxied, proxy := proxiedDatabase(t)
			const lease = 2 * time.Second
			n1 := startServer(t, withPostgres(proxied, "n1"), withFlags("--lease", lease.String(), "--db-timeout", "1s"))
			if a := n1.call("POST", "/v1/queues/q/tasks", `{"id":"before"}`); a.status != http.StatusCreated {
				t.Fatalf("put before the blip: %v", a)
			}
			blip := lease / 5
			proxy.Set(c.mode)
			start := time.Now()
			for time.Since(start) < 2*lease {
				if time.Since(start) >= blip {
					proxy.Set(tcpproxy.Pass)
				}
				if a, err := n1.try("GET", "/readyz", "", ""); err != nil || a.status != http.StatusOK {
					t.Fatalf("/readyz %v after a blip of %v: %v %v, want 200", time.Since(start).Round(time.Millisecond), blip, a, err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			m := string(n1.call("GET", "/metrics", "").body)
			if !strings.Contains(m, "\nhourglass_cluster_partitions_lost_total 0\n") || !strings.Contains(m, "\nhourglass_cluster_partitions_owned 64\n") {
				t.Errorf("after a blip of %v: want no partition lost and all 64 owned:\n%s", blip, grepLines(m, "hourglass_cluster_partitions"))
			}
			if a := n1.call("POST", "/v1/queues/q/tasks", `{"id":"after"}`); a.status != http.StatusCreated {
				t.Errorf("put after the blip: %v", a)
			}
		})
	}
}

// grepLines returns the lines of text that hold substr.
func grepLines(text, substr string) string {
	var out []string
	for line := range strings.Lines(text) {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}
