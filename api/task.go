package api

import (
	"encoding/json"
	"time"
)

// Task is a task as the API shows it. Lease is set only in the answers
// of reserve and touch: the holder of a lease is whoever reserved the
// task, and GET never reveals it.
type Task struct {
	ID          string          `json:"id"`
	JobID       uint64          `json:"job_id"` // unique in the server, stable across restarts
	Queue       string          `json:"queue"`
	State       string          `json:"state"` // "delayed", "ready", "reserved" or "dead"
	Payload     json.RawMessage `json:"payload"`
	Priority    uint32          `json:"priority"` // lower first
	Due         time.Time       `json:"due"`
	TTR         Duration        `json:"ttr"` // how long a lease lasts
	Attempts    int             `json:"attempts"`
	MaxAttempts int             `json:"max_attempts"` // as recorded at the put: 0 is no limit
	Created     time.Time       `json:"created"`
	Lease       string          `json:"lease,omitempty"`
	// LeaseExpires is when the lease ends, while the task is reserved.
	LeaseExpires *time.Time `json:"lease_expires,omitempty"`
	// LastError is why its last attempt failed: a nack's or bury's
	// error, or "lease expired".
	LastError string `json:"last_error,omitempty"`
	// Traceparent and Tracestate are the W3C trace context the task was
	// put with, if any (see [TraceparentHeader]).
	Traceparent string `json:"traceparent,omitempty"`
	Tracestate  string `json:"tracestate,omitempty"`
	// Key is the task's key (PutRequest.Key); absent for none.
	Key string `json:"key,omitempty"`
	// Outcome and Finished are set only in the answer for a finished
	// task ([FinishedRecord], State [StateFinished]).
	Outcome  string     `json:"outcome,omitempty"`
	Finished *time.Time `json:"finished,omitempty"`
}

// States a [Task] can be in; StateFinished only in a [FinishedRecord].
const (
	StateDelayed  = "delayed"
	StateReady    = "ready"
	StateReserved = "reserved"
	StateDead     = "dead"
	StateFinished = "finished"
)

// FinishedRecord answers a put deduped by its queue's dedupe window
// ([Policy].Dedupe: 200, the task that finished, nothing put), and GET
// /v1/queues/{queue}/tasks/{id} for a task
// no longer live whose finished record the history keeps (for the
// server's retention, `hourglass serve --history`; the newest task of
// that id to leave the queue): State is [StateFinished], Outcome one of
// the Finished* outcomes ("acked", "dead" for one moved to a dead-letter
// queue, "deleted"), Finished when it left. A live task of that id
// answers as a [Task]; an id neither live nor kept answers 404. Decoded
// into a [Task], it fills the fields of the same names.
//
//	{"id":"welcome-42","job_id":42,"queue":"emails","state":"finished","outcome":"acked","finished":"2026-03-01T12:01:00Z","attempts":1}
type FinishedRecord struct {
	ID        string    `json:"id"`
	JobID     uint64    `json:"job_id"`
	Queue     string    `json:"queue"`
	State     string    `json:"state"`
	Outcome   string    `json:"outcome"`
	Finished  time.Time `json:"finished"`
	Attempts  int       `json:"attempts"`
	LastError string    `json:"last_error,omitempty"`
}

// DefaultPriority is the priority of a task put without one: the middle
// of beanstalkd's customary range, so that both more and less urgent
// tasks can be put beside it.
const DefaultPriority = 1024

// PutRequest is the body of POST /v1/queues/{queue}/tasks and one item of
// a [BatchRequest]. Every field is optional; Delay and At exclude each
// other, and with neither the task is ready at once.
type PutRequest struct {
	// ID names the task in its queue: 1 to 200 printable ASCII bytes
	// without "/" or space. Empty: the server makes one. Putting an id
	// that exists answers the existing task unchanged (200) unless
	// Replace is set.
	ID string `json:"id,omitempty"`
	// Payload is any JSON value in valid UTF-8, stored and returned as
	// sent.
	Payload json.RawMessage `json:"payload,omitempty"`
	// Delay makes the task due this long after the put; at most the
	// server's --max-delay.
	Delay *Duration `json:"delay,omitempty"`
	// At makes the task due at this time (RFC 3339).
	At *time.Time `json:"at,omitempty"`
	// Priority orders ready tasks, lower first; nil: [DefaultPriority].
	Priority *uint32 `json:"priority,omitempty"`
	// TTR is how long a reservation's lease lasts, 1ms to [MaxTTR]; nil:
	// the server's --default-ttr ("0s" is refused).
	TTR *Duration `json:"ttr,omitempty"`
	// MaxAttempts makes the task dead once reserved this many times
	// without an ack; absent or 0: the queue policy's, else the default
	// [DefaultMaxAttempts]; [UnlimitedAttempts] (-1): no limit. The task
	// records the result (its max_attempts; 0 there is no limit).
	MaxAttempts int `json:"max_attempts,omitempty"`
	// Replace replaces an existing task of the same ID instead of
	// answering it unchanged.
	Replace bool `json:"replace,omitempty"`
	// Traceparent and Tracestate are the producer's W3C trace context,
	// kept with the task and handed on with each delivery; absent: the
	// request's headers of the same names (see [TraceparentHeader]). A
	// malformed one is dropped, not refused.
	Traceparent string `json:"traceparent,omitempty"`
	Tracestate  string `json:"tracestate,omitempty"`
	// Key names who the task is for (a tenant, say), with the rules of
	// an ID: when tasks of several keys are ready in a queue, reserves
	// and pushes take them in turn across keys (priority first, then
	// round-robin), so one key's backlog does not hold up the others.
	// Absent or "": the key "", a key of its own. GET
	// /v1/queues/{queue}/tasks?key= finds a key's tasks.
	Key string `json:"key,omitempty"`
}

// BatchRequest is the body of POST /v1/queues/{queue}/tasks:batch: up to
// [MaxBatch] puts into one queue, committed together.
type BatchRequest struct {
	Tasks []PutRequest `json:"tasks"`
}

// MaxTTR bounds a task's ttr: a worker that needs longer touches its
// lease.
const MaxTTR = 24 * time.Hour

// MaxBatch is the most tasks one batch may carry.
const MaxBatch = 1000

// BatchResponse answers a [BatchRequest]: one result per task, in order.
type BatchResponse struct {
	Results []BatchResult `json:"results"`
}

// BatchResult is the outcome of one put of a batch: the task, or the
// error that refused it (in the form of [Error.Error]), or, for a put
// deduped by the queue's dedupe window ([Policy].Dedupe), the finished
// task's record. Status is what a put alone would have answered: 201 for
// a new task, 200 for an existing or deduped one, the error's status for
// a refused one. One refused item does not fail the others.
type BatchResult struct {
	Status   int             `json:"status,omitempty"`
	Task     *Task           `json:"task,omitempty"`
	Finished *FinishedRecord `json:"finished,omitempty"`
	Error    string          `json:"error,omitempty"`
}
