package hourglass

import "sync/atomic"

// limit is a Timer's [WithMaxPending] count: one place per pending
// timeout, shared by its shards. It is safe for concurrent use; with no
// limit it costs a comparison.
type limit struct {
	max  int64 // 0: no limit
	live atomic.Int64
}

// acquire takes one place under the limit, reporting false if the limit
// is reached. release gives one back.
func (l *limit) acquire() bool {
	if l.max == 0 {
		return true
	}
	if l.live.Add(1) > l.max {
		l.live.Add(-1)
		return false
	}
	return true
}

func (l *limit) release() {
	if l.max != 0 {
		l.live.Add(-1)
	}
}

// reset gives every place back, at Stop.
func (l *limit) reset() {
	if l.max != 0 {
		l.live.Store(0)
	}
}
