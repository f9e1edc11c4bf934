package cluster

import (
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"
)

// What a loop that talks to the database does when it fails: it waits a
// back-off before trying again (backoff), and says so in the log about
// once a second, with a count, rather than at every try (failureLog). A
// database that is down then sees a few tries a second from each loop,
// not ten, and the log a line a second, not hundreds.

// backoff is a capped exponential back-off with jitter, after grpc-go's
// (internal/backoff): the n-th wait in a row is min(base·2ⁿ, max), then
// spread by ±jitter of itself, so that the nodes of a cluster, and the
// loops of a node, cut off together do not come back in step. The zero
// backoff is not usable; its fields are set once. A backoff is used by
// one goroutine, its loop's.
type backoff struct {
	base, max time.Duration
	// fails counts the failures in a row, since the last reset.
	fails int
}

// jitter is the part of each wait spread at random either way.
const jitter = 0.2

// Default back-off of the node's loops: from a tenth of a second to five.
const (
	backoffBase = 100 * time.Millisecond
	backoffMax  = 5 * time.Second
)

// next returns how long to wait before the next try, after a failure.
// O(1).
func (b *backoff) next() time.Duration {
	d := b.base
	for i := 0; i < b.fails && d < b.max; i++ {
		d *= 2
	}
	d = min(d, b.max)
	b.fails++
	return time.Duration(float64(d) * (1 + jitter*(2*rand.Float64()-1)))
}

// reset forgets the failures: the call succeeded.
func (b *backoff) reset() { b.fails = 0 }

// failureLog logs the failures of one loop about once per every: the
// first at once, then, while they go on, one line per every with the
// count of failures since the line before, and one line when the loop
// works again. failureLog is safe for concurrent use.
type failureLog struct {
	log       *slog.Logger
	msg       string // the warning, e.g. "hourglass: flushing timers failed"
	recovered string // the line once it works again
	every     time.Duration

	mu sync.Mutex
	// last is when the last line was written; zero for none since the
	// loop last worked. Guarded by mu.
	last time.Time
	// failures since the last line, and in all since the loop last
	// worked. Guarded by mu.
	unlogged, total int
}

// logEvery is how often a failure that lasts is logged.
const logEvery = time.Second

// newFailureLog returns the failure log of a loop whose failures log
// msg (a warning), and recovered once it works again (info).
func newFailureLog(log *slog.Logger, msg, recovered string) *failureLog {
	return &failureLog{log: log, msg: msg, recovered: recovered, every: logEvery}
}

// failed counts a failure, err, and logs it if no line was written in
// the last every. O(1).
func (l *failureLog) failed(err error) {
	now := time.Now()
	l.mu.Lock()
	l.unlogged++
	l.total++
	if !l.last.IsZero() && now.Sub(l.last) < l.every {
		l.mu.Unlock()
		return
	}
	k, total := l.unlogged, l.total
	l.unlogged, l.last = 0, now
	l.mu.Unlock()
	l.log.Warn(l.msg, "err", err, "failures", k, "in a row", total)
}

// ok records that the loop worked; after failures it logs that it
// recovered, and how many failures there were. O(1).
func (l *failureLog) ok() {
	l.mu.Lock()
	total := l.total
	l.total, l.unlogged, l.last = 0, 0, time.Time{}
	l.mu.Unlock()
	if total > 0 {
		l.log.Info(l.recovered, "failures", total)
	}
}
