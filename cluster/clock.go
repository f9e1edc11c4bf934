package cluster

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// clock is a node's view of the cluster's one clock, the database
// server's (hourglass_now(), Unix ns): the offset of the database's clock
// from this process's wall clock, measured at each lease tick by reading
// the database's clock between two local readings (the error is at most
// half the round trip).
//
// The offset only says when to arm a wheel: a timer armed too early finds
// its task not yet due by the database's clock and is armed again for the
// rest (see flush), so a wrong offset makes delivery late, never early.
//
// A reading over a slow round trip (a loaded machine, a busy database)
// is off by up to half of it, and would stand for a whole tick: timers
// fired that much late (or early, and armed again), on every task of the
// node's partitions. So the offset is that of the fastest of the last
// clockSamples readings (as NTP's clock filter keeps the sample of least
// delay): one slow reading among fast ones changes nothing, and a clock
// that moves is followed within clockSamples ticks.
type clock struct {
	offset atomic.Int64 // database ns minus local ns
	skew   *atomic.Int64

	// samples are the last readings, oldest first; mu guards them (the
	// lease loop and Open measure, never at once in practice).
	mu      sync.Mutex
	samples []clockSample
}

// clockSamples is how many readings the offset is chosen among: with a
// reading every Lease/3, about 13 s of them by default.
const clockSamples = 8

// clockSample is one reading: the offset it gives and the round trip it
// took.
type clockSample struct{ offset, rtt int64 }

// measure reads the database's clock once and sets the offset.
func (c *clock) measure(ctx context.Context, db *pool) error {
	var dbNow int64
	t0 := time.Now()
	if err := db.QueryRow(ctx, "SELECT hourglass_now()").Scan(&dbNow); err != nil {
		return err
	}
	c.record(dbNow, t0, time.Now())
	return nil
}

// record takes a reading dbNow of the database's clock made between t0
// and t1, and sets the offset to that of the fastest of the last
// clockSamples readings. O(clockSamples).
func (c *clock) record(dbNow int64, t0, t1 time.Time) {
	rtt := t1.Sub(t0).Nanoseconds()
	mid := t0.UnixNano() + rtt/2
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.samples) == clockSamples {
		c.samples = append(c.samples[:0], c.samples[1:]...)
	}
	c.samples = append(c.samples, clockSample{offset: dbNow - mid, rtt: rtt})
	best := c.samples[0]
	for _, s := range c.samples[1:] {
		if s.rtt <= best.rtt {
			best = s
		}
	}
	c.offset.Store(best.offset)
}

// now returns this node's estimate of the database's clock.
func (c *clock) now() int64 {
	return time.Now().UnixNano() + c.offset.Load() + c.skew.Load()
}

// until returns how long from now until the database's clock reads at,
// by this node's estimate; at most zero when that has passed.
func (c *clock) until(at int64) time.Duration {
	return time.Duration(max(at-c.now(), 0))
}
