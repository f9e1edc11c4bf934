package beanstalk_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/beanstalk"
)

// TestMaxConns checks MaxConns: at the limit a new connection closes the
// one that has waited longest for a command holding no reservation, and
// is served; a connection that holds a reservation (a worker at work) or
// serves a command (a reserve waiting) is never closed for it; when no
// connection is idle without a reservation, the new one is closed at
// once.
func TestMaxConns(t *testing.T) {
	t.Parallel()
	ts := start(t, beanstalk.Options{MaxConns: 2})
	a := dial(t, ts.addr)
	id := a.put(0, 0, 60, "job")
	b := dial(t, ts.addr)
	b.must("list-tube-used", "USING default")

	// a has waited longest: it makes room for c.
	c := dial(t, ts.addr)
	c.must("list-tube-used", "USING default")
	if got := a.read(5 * time.Second); got != "<closed>" {
		t.Fatalf("the connection idle the longest: %q, want it closed", got)
	}

	// b reserves the job: it keeps its connection, c makes room for d.
	if got := b.do("reserve-with-timeout 0"); !strings.HasPrefix(got, fmt.Sprintf("RESERVED %d ", id)) {
		t.Fatalf("reserve: %q", got)
	}
	d := dial(t, ts.addr)
	d.must("list-tube-used", "USING default")
	if got := c.read(5 * time.Second); got != "<closed>" {
		t.Fatalf("the idle connection without a reservation: %q, want it closed", got)
	}
	if got := b.do("stats-job " + fmt.Sprint(id)); !strings.Contains(got, "state: reserved") {
		t.Fatalf("the reserved job after the closes: %q", got)
	}

	// d waits in a reserve, b holds its job: a new connection is closed.
	d.send("reserve-with-timeout 30\r\n")
	for try := 0; !strings.Contains(b.do("stats"), "current-waiting: 1\n"); try++ {
		if try == 100 {
			t.Fatal("the reserve does not wait")
		}
		time.Sleep(20 * time.Millisecond)
	}
	e := dial(t, ts.addr)
	e.send("list-tube-used\r\n")
	if got := e.read(5 * time.Second); got != "<closed>" {
		t.Fatalf("a connection with none idle: %q, want it closed", got)
	}

	// b gives its job back and serves d's reserve; now b, idle without a
	// reservation, makes room.
	b.must(fmt.Sprintf("release %d 0 0", id), "RELEASED")
	if got := d.read(5 * time.Second); !strings.HasPrefix(got, fmt.Sprintf("RESERVED %d ", id)) {
		t.Fatalf("the waiting reserve: %q", got)
	}
	dial(t, ts.addr).must("list-tube-used", "USING default")
	if got := b.read(5 * time.Second); got != "<closed>" {
		t.Fatalf("b, idle without a reservation: %q, want it closed", got)
	}
	d.must(fmt.Sprintf("delete %d", id), "DELETED")
}
