package worker

import (
	"context"
	"encoding/json"
	"time"

	"github.com/hourglass-go/hourglass/api"
)

// Handler works one task. It returns nil when the task is done (the
// worker acks it), [RetryAfter] to try again after a delay, [Fail] when
// no retry can succeed, and any other error to try again when the
// queue's retry policy says. A panic counts as an error with the panic's
// text.
//
// ctx ends when the task's lease is lost (context.Cause: [ErrLeaseLost])
// or when the worker stops and the handler has outlived its
// ShutdownTimeout ([ErrShutdown]); a handler should then return soon.
// Handlers run concurrently, up to [Options.Concurrency] at once, each
// task in one goroutine; t is the handler's to keep.
type Handler func(ctx context.Context, t *Task) error

// Task is a task as its handler sees it: the fields of [api.Task] that
// describe the work, without its lease, which the worker keeps.
type Task struct {
	ID      string // unique in its queue
	JobID   uint64 // unique in the server
	Queue   string
	Payload json.RawMessage
	// Priority orders ready tasks, lower first.
	Priority uint32
	// Attempts counts the task's reservations, this one included: 1 the
	// first time.
	Attempts int
	// MaxAttempts is how many attempts the task gets before it is dead;
	// 0: unlimited.
	MaxAttempts int
	// Due is when the task became ready.
	Due time.Time
	// TTR is how long a lease lasts; the worker renews it while the
	// handler runs.
	TTR     time.Duration
	Created time.Time
	// LastError is why the previous attempt failed ("" the first time):
	// a nack's or bury's error, or "lease expired".
	LastError string
	// Traceparent and Tracestate are the W3C trace context the task was
	// put with ("" for none), the same on every attempt: a handler that
	// traces continues the producer's trace from them (as package
	// otelhourglass's Handler does).
	Traceparent, Tracestate string
	// Key is the task's key ("" for none; api.PutRequest.Key).
	Key string
}

// newTask returns the handler's view of t.
func newTask(t *api.Task) *Task {
	return &Task{
		ID:          t.ID,
		JobID:       t.JobID,
		Queue:       t.Queue,
		Payload:     t.Payload,
		Priority:    t.Priority,
		Attempts:    t.Attempts,
		MaxAttempts: t.MaxAttempts,
		Due:         t.Due,
		TTR:         t.TTR.D(),
		Created:     t.Created,
		LastError:   t.LastError,
		Traceparent: t.Traceparent,
		Tracestate:  t.Tracestate,
		Key:         t.Key,
	}
}
