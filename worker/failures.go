package worker

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/hourglass-go/hourglass/client"
)

// logEvery is the least time between two lines about the failures of
// one kind of call.
const logEvery = time.Second

// failureLog logs the failures of the calls the worker retries (a
// reserve, a touch, an ack...) about once a second for each kind of
// call, with the count of its failures since the previous line, rather
// than at each try: during an outage, a worker with 64 handlers whose
// touches and nacks each back off on their own would otherwise log
// hundreds of lines a second. The first failure of a kind after a second
// without a line is logged at once.
//
// It never reads the clock: each failure comes with its time. Its
// methods are safe for concurrent use; each is O(1).
type failureLog struct {
	log *slog.Logger

	mu sync.Mutex
	// kinds holds the count of each kind of call, by the call's name: a
	// few (the worker's calls), never a name a server chose. Guarded by
	// mu.
	kinds map[string]*failureCount
}

// failureCount is the state of one kind of call in a [failureLog].
type failureCount struct {
	n    int       // failures since the last line
	last time.Time // of the last line; zero before the first
}

func newFailureLog(log *slog.Logger) *failureLog {
	return &failureLog{log: log, kinds: map[string]*failureCount{}}
}

// failed counts a failure at now of a call of kind what, retried after
// retryIn, and logs it, with attrs and the count, unless a line about
// what was logged less than logEvery before.
func (f *failureLog) failed(now time.Time, what string, err error, retryIn time.Duration, attrs ...any) {
	f.mu.Lock()
	c := f.kinds[what]
	if c == nil {
		c = &failureCount{}
		f.kinds[what] = c
	}
	c.n++
	if !c.last.IsZero() && now.Sub(c.last) < logEvery {
		f.mu.Unlock()
		return
	}
	n := c.n
	c.n, c.last = 0, now
	f.mu.Unlock()
	f.log.Warn(what+" failing, retrying", append(attrs, "error", err, "failures", n, "retry_in", retryIn)...)
}

// stopError is what [Worker.Run] returns when a call failed for good:
// [client.IsPermanent], or a reserve the server refused. It reads as
// err, with one prefix, and unwraps to it.
type stopError struct {
	what string // the call: reserve, touch, ack, nack...
	err  error
}

func (e *stopError) Error() string {
	msg := strings.TrimPrefix(e.err.Error(), "hourglass: ")
	var ce *client.Error
	if errors.As(e.err, &ce) && ce.Status != 0 {
		return fmt.Sprintf("hourglass: worker stopped: the server answered its %s %d: %s", e.what, ce.Status, msg)
	}
	return fmt.Sprintf("hourglass: worker stopped: its %s failed for good: %s", e.what, msg)
}

func (e *stopError) Unwrap() error { return e.err }
