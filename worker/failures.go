package worker

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/hourglass-go/hourglass/client"
	"github.com/hourglass-go/hourglass/internal/retry"
)

// failureLog logs the failures of the calls the worker retries (a
// reserve, a touch, an ack...) with internal/retry's rule: about once a
// second for each kind of call, with the count of its failures since the
// previous line, rather than at each try, and once when that kind of
// call works again (a second after its last failure). During an outage,
// a worker with 64 handlers whose touches and nacks each back off on
// their own would otherwise log hundreds of lines a second; the calls of
// one kind share one [retry.FailureLog], as one run of failures.
//
// Its methods are safe for concurrent use; each is O(1).
type failureLog struct {
	log *slog.Logger

	mu sync.Mutex
	// kinds holds the log of each kind of call, by the call's name: a
	// few (the worker's calls), never a name a server chose. Guarded by
	// mu.
	kinds map[string]*retry.FailureLog
}

func newFailureLog(log *slog.Logger) *failureLog {
	return &failureLog{log: log, kinds: map[string]*retry.FailureLog{}}
}

// kind returns the log of the calls named what.
func (f *failureLog) kind(what string) *retry.FailureLog {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := f.kinds[what]
	if k == nil {
		k = retry.NewFailureLog(f.log, what+" failing, retrying", what+" works again")
		f.kinds[what] = k
	}
	return k
}

// failed counts a failure of a call of kind what, retried after
// retryIn, and logs it, with attrs and the count, unless a line about
// what was logged less than a second before.
func (f *failureLog) failed(what string, err error, retryIn time.Duration, attrs ...any) {
	f.kind(what).Failed(err, append(attrs, "retry_in", retryIn)...)
}

// ok records that a call of kind what worked.
func (f *failureLog) ok(what string) { f.kind(what).OKShared() }

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
