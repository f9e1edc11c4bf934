// Package retry is what a loop that calls another process (a database, a
// store, a server) does when the call fails: it waits a capped, jittered
// back-off before the next try ([Backoff]), and says so in the log about
// once a second with a count, rather than at every try ([FailureLog]). A
// database that is down then sees a few tries a second from each loop,
// not hundreds, and the log a line a second.
//
// [Pruner] is the one loop of this kind both engines run: it removes the
// records past their retention (the history, the dedupe windows), each
// engine supplying only the delete of one batch.
package retry

import (
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"
)

// Backoff is a capped exponential back-off with jitter, after grpc-go's
// (internal/backoff): the n-th wait in a row is min(Base·2ⁿ, Max), then
// spread by ±Jitter of itself, so that the nodes of a cluster, and the
// loops of a node, cut off together do not come back in step. Set Base
// and Max once, before the first Next; the zero Backoff waits nothing. A
// Backoff is used by one goroutine, its loop's.
type Backoff struct {
	Base, Max time.Duration
	// fails counts the failures in a row, since the last Reset.
	fails int
}

// Jitter is the part of each wait spread at random either way.
const Jitter = 0.2

// Default back-off of a loop: from a tenth of a second to five.
const (
	DefaultBase = 100 * time.Millisecond
	DefaultMax  = 5 * time.Second
)

// Next returns how long to wait before the next try, after a failure.
// O(1).
func (b *Backoff) Next() time.Duration {
	d := b.Base
	for i := 0; i < b.fails && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	b.fails++
	return time.Duration(float64(d) * (1 + Jitter*(2*rand.Float64()-1)))
}

// Reset forgets the failures: the call succeeded. O(1).
func (b *Backoff) Reset() { b.fails = 0 }

// Failures returns the failures in a row since the last Reset.
func (b *Backoff) Failures() int { return b.fails }

// FailureLog logs the failures of one loop about once per LogEvery: the
// first at once, then, while they go on, one line per LogEvery with the
// count of failures since the line before and in a row, and one line
// when the loop works again. A FailureLog is safe for concurrent use.
type FailureLog struct {
	log       *slog.Logger
	msg       string // the warning, e.g. "hourglass: flushing timers failed"
	recovered string // the line once it works again

	mu sync.Mutex
	// last is when the last line was written; zero for none since the
	// loop last worked. Guarded by mu.
	last time.Time
	// failures since the last line, and in all since the loop last
	// worked. Guarded by mu.
	unlogged, total int
	// lastFailure is when Failed was last called; [FailureLog.OKShared]
	// reads it. Guarded by mu.
	lastFailure time.Time
}

// LogEvery is how often a failure that lasts is logged.
const LogEvery = time.Second

// NewFailureLog returns the failure log of a loop whose failures log msg
// (a warning), and recovered once it works again (info).
func NewFailureLog(log *slog.Logger, msg, recovered string) *FailureLog {
	return &FailureLog{log: log, msg: msg, recovered: recovered}
}

// Failed counts a failure, err, and logs it with args (key-value pairs
// after slog's) if no line was written in the last LogEvery. O(1).
func (l *FailureLog) Failed(err error, args ...any) {
	now := time.Now()
	l.mu.Lock()
	l.unlogged++
	l.total++
	l.lastFailure = now
	if !l.last.IsZero() && now.Sub(l.last) < LogEvery {
		l.mu.Unlock()
		return
	}
	k, total := l.unlogged, l.total
	l.unlogged, l.last = 0, now
	l.mu.Unlock()
	l.log.Warn(l.msg, append([]any{"err", err, "failures", k, "in a row", total}, args...)...)
}

// OK records that the loop worked; after failures it logs that it
// recovered, and how many failures there were. O(1).
func (l *FailureLog) OK() {
	l.mu.Lock()
	total := l.total
	l.total, l.unlogged, l.last = 0, 0, time.Time{}
	l.mu.Unlock()
	if total > 0 {
		l.log.Info(l.recovered, "failures", total)
	}
}

// OKShared is [FailureLog.OK] for a log that several loops share (a
// worker's touches of its leases, each lease its own loop, counted as
// one kind of call): one of them worked, while others may still be
// failing. The failures count as over, and their end is logged, only
// once none came for LogEvery; until then they stay one run, logged once
// per LogEvery, so that loops failing and working in turn never log more
// than that. O(1).
func (l *FailureLog) OKShared() {
	now := time.Now()
	l.mu.Lock()
	if l.total == 0 || now.Sub(l.lastFailure) < LogEvery {
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	l.OK()
}
