package beanstalk_test

import (
	"fmt"
	"testing"

	"github.com/hourglass-go/hourglass/beanstalk"
)

// TestAttemptsUnlimited: a beanstalkd job is never dead of its
// reservations, however many, as in beanstalkd: puts over the protocol
// ask for unlimited attempts rather than the service's default of 25, so
// a job reserved 30 times whose ttr then runs out is ready again, not
// buried, on every backend.
func TestAttemptsUnlimited(t *testing.T) {
	eachBackend(t, func(t *testing.T, start func(testing.TB, beanstalk.Options) *testServer) {
		ts := start(t, beanstalk.Options{})
		c := dial(t, ts.addr)
		id := c.put(0, 0, 2, "r")
		const n = 30
		for i := range n {
			if got := c.do("reserve-with-timeout 5"); got != fmt.Sprintf("RESERVED %d 1\r\nr\r\n", id) {
				t.Fatalf("reserve %d: %q", i+1, got)
			}
			c.must(fmt.Sprintf("release %d 0 0", id), "RELEASED")
		}
		c.do("reserve-with-timeout 5")
		// Its ttr runs out: ready again, and another connection gets it.
		other := dial(t, ts.addr)
		if got := other.do("reserve-with-timeout 10"); got != fmt.Sprintf("RESERVED %d 1\r\nr\r\n", id) {
			t.Fatalf("reserve after the ttr of reservation %d ran out: %q; want the job again", n+1, got)
		}
		st := other.do(fmt.Sprintf("stats-job %d", id))
		if yamlField(st, "reserves") != fmt.Sprint(n+2) || yamlField(st, "timeouts") != "1" {
			t.Fatalf("stats-job: %q; want reserves %d, timeouts 1", st, n+2)
		}
	})
}
