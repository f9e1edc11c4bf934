package e2e_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/internal/tcpproxy"
)

// TestDBCut_Stop: a node whose database does not answer (a blackholed
// link, for long enough that statements were cut short by their
// deadlines) exits within a few --db-timeout of SIGTERM, well within
// serve's shutdown bound: each step of its shutdown that talks to the
// database (the last notifications, the release of its partitions, the
// pool's close) gives up after the timeout.
func TestDBCut_Stop(t *testing.T) {
	_, proxied, proxy := proxiedDatabase(t)
	n1 := startServer(t, withPostgres(proxied, "n1"), withFlags("--lease", "1s", "--db-timeout", "1s"))
	if a := n1.call("POST", "/v1/queues/q/tasks", `{"id":"x","delay":"1s"}`); a.status != 201 {
		t.Fatalf("put: %v", a)
	}
	proxy.Set(tcpproxy.Blackhole)
	time.Sleep(3 * time.Second) // timers fire, ticks and flushes time out
	p := n1.proc
	start := time.Now()
	n1.signal(syscall.SIGTERM)
	if !n1.wait(stopTimeout) {
		n1.signal(syscall.SIGKILL)
		n1.wait(killTimeout)
		t.Fatalf("the node did not exit within %v of SIGTERM with its database out of reach:\n%s", stopTimeout, p.log)
	}
	// It exits with an error: it could not release its partitions (they
	// run out with their leases).
	took := time.Since(start)
	t.Logf("exited %v after SIGTERM: %s", took.Round(time.Millisecond), p.state())
	if bound := 8 * time.Second; took > lateAllowed(t, bound, start, start.Add(took)) {
		t.Errorf("the node took %v to exit after SIGTERM with its database out of reach, want within %v (--db-timeout 1s)", took, bound)
	}
}
