package hourglass

import (
	"math"
	"time"
)

// clock is the time base of a Timer or a Keyed: the structures count
// unsigned nanoseconds since start, read from the monotonic clock. Any
// delay up to math.MaxInt64 added to a reading fits, since a reading stays
// far below 2^63 for centuries of uptime.
type clock struct {
	start time.Time
}

func newClock() clock { return clock{start: time.Now()} }

// now reads the clock.
func (c clock) now() uint64 { return uint64(time.Since(c.start)) }

// after returns the reading d after reading now, d < 0 counting as 0.
func after(now uint64, d time.Duration) uint64 { return now + uint64(max(d, 0)) }

// at converts an instant to a reading, clamping instants before start to
// 0, handling instants more than math.MaxInt64 after it, and saturating
// at 2·math.MaxInt64 (about 584 years after start).
func (c clock) at(when time.Time) uint64 {
	d := when.Sub(c.start) // saturates at math.MaxInt64
	if d <= 0 {
		return 0
	}
	if d == math.MaxInt64 {
		rest := when.Sub(c.start.Add(math.MaxInt64))
		return math.MaxInt64 + uint64(max(rest, 0))
	}
	return uint64(d)
}

// timeOf converts a reading back to an instant. A Duration holds less
// than half the readings, so a reading past math.MaxInt64 takes up to
// three steps (math.MaxUint64 is 2·math.MaxInt64 + 1).
func (c clock) timeOf(r uint64) time.Time {
	t := c.start
	for r > math.MaxInt64 {
		t = t.Add(math.MaxInt64)
		r -= math.MaxInt64
	}
	return t.Add(time.Duration(r))
}
