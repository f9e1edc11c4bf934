package cluster

import (
	"context"
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
type clock struct {
	offset atomic.Int64 // database ns minus local ns
	skew   *atomic.Int64
}

// measure reads the database's clock once and sets the offset.
func (c *clock) measure(ctx context.Context, db *pool) error {
	var dbNow int64
	t0 := time.Now()
	if err := db.QueryRow(ctx, "SELECT hourglass_now()").Scan(&dbNow); err != nil {
		return err
	}
	t1 := time.Now()
	mid := t0.UnixNano() + t1.Sub(t0).Nanoseconds()/2
	c.offset.Store(dbNow - mid)
	return nil
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
