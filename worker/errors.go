package worker

import (
	"errors"
	"fmt"
	"time"
)

// Causes of a handler's context ending, as context.Cause reports them.
var (
	// ErrLeaseLost: the task's lease is gone (the task was deleted, or its
	// lease ran out and it may be with another worker). The worker
	// neither acks nor nacks it.
	ErrLeaseLost = errors.New("hourglass: lease lost")
	// ErrShutdown: [Worker.Run] is stopping and the handler outlived
	// [Options.ShutdownTimeout]. Unless the handler returns nil, its task
	// is released, its attempt not counted.
	ErrShutdown = errors.New("hourglass: worker shutting down")
	// ErrCancelled: the task was cancelled or deleted on the server while
	// its handler ran (POST .../cancel, DELETE): the worker learns it
	// within about a second (see [Worker.Run]) and neither acks nor
	// nacks it. Its lease is lost too: errors.Is(ErrCancelled,
	// ErrLeaseLost) holds, so a handler that tells ErrLeaseLost apart
	// needs no change.
	ErrCancelled = fmt.Errorf("%w: the task was cancelled", ErrLeaseLost)
)

// RetryAfter returns an error that makes the worker nack the task with
// delay d: ready again d after the nack, whatever the queue's retry
// policy says. Its text is err's; errors.Is and errors.As see err
// through it. It is honoured when wrapped (fmt.Errorf("...: %w", ...)).
func RetryAfter(d time.Duration, err error) error {
	return &retryError{delay: max(d, 0), err: err}
}

// Fail returns an error that makes the worker bury the task: dead at
// once (or moved to the queue's dead-letter queue), whatever attempts
// are left, with err's text as its last error. Use it for failures that
// no retry can cure, such as a payload that does not parse. It is
// honoured when wrapped, and prevails over a [RetryAfter] in the same
// chain.
func Fail(err error) error {
	return &failError{err: err}
}

// retryError is [RetryAfter]'s error.
type retryError struct {
	delay time.Duration
	err   error
}

func (e *retryError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("retry after %s", e.delay)
	}
	return e.err.Error()
}

func (e *retryError) Unwrap() error { return e.err }

// failError is [Fail]'s error.
type failError struct{ err error }

func (e *failError) Error() string {
	if e.err == nil {
		return "failed"
	}
	return e.err.Error()
}

func (e *failError) Unwrap() error { return e.err }

// outcome is what the worker does with a task whose handler returned err
// (not nil): bury it, or nack it after delay (client.RetryDelay: as the
// queue's retry policy says).
func outcome(err error) (bury bool, delay time.Duration) {
	var f *failError
	if errors.As(err, &f) {
		return true, 0
	}
	var r *retryError
	if errors.As(err, &r) {
		return false, r.delay
	}
	return false, -1
}

// Outcomes of a handler's return, as [Outcome] names them.
const (
	OutcomeAck   = "ack"   // nil: the worker acks the task
	OutcomeRetry = "retry" // an error but Fail's: the worker nacks it, to be tried again
	OutcomeFail  = "fail"  // [Fail]: the worker buries it, no retry
)

// Outcome names what the worker does with a task whose handler returned
// err: [OutcomeAck], [OutcomeRetry] or [OutcomeFail], for a middleware
// that reports it (package otelhourglass). A retry past the task's
// attempts makes it dead all the same.
func Outcome(err error) string {
	if err == nil {
		return OutcomeAck
	}
	if bury, _ := outcome(err); bury {
		return OutcomeFail
	}
	return OutcomeRetry
}
