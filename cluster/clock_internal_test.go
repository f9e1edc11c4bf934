package cluster

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestClock_FastestReading: the offset is that of the fastest of the last
// clockSamples readings. A reading over a slow round trip (here 40 ms,
// with the database's answer 20 ms off the middle of it, as a loaded
// machine makes it) changes nothing while a fast one is among the last
// clockSamples; once the fast one is that old, the fastest of the slow
// ones stands. Before, each reading set the offset alone: the slow one
// moved every timer of the node 20 ms for a tick.
func TestClock_FastestReading(t *testing.T) {
	c := &clock{skew: new(atomic.Int64)}
	base := time.Unix(1_000_000, 0)
	read := func(at time.Time, rtt, off time.Duration) {
		mid := at.Add(rtt / 2)
		c.record(mid.UnixNano()+int64(off), at, at.Add(rtt))
	}
	read(base, 200*time.Microsecond, 0) // fast, exact
	for i := range clockSamples - 1 {
		read(base.Add(time.Duration(i+1)*time.Second), 40*time.Millisecond, -20*time.Millisecond)
		if got := c.offset.Load(); got != 0 {
			t.Fatalf("after %d slow readings the offset is %v, want 0 (the fast reading's)", i+1, time.Duration(got))
		}
	}
	read(base.Add(clockSamples*time.Second), 30*time.Millisecond, -10*time.Millisecond)
	if got := time.Duration(c.offset.Load()); got != -10*time.Millisecond {
		t.Fatalf("with the fast reading %d readings old the offset is %v, want -10ms (the fastest left)", clockSamples, got)
	}
}
