package broker

import (
	"errors"
	"time"
)

// State is where a task is in its life: delayed until its due time, ready
// to be reserved, reserved by a worker under a lease, or dead.
type State uint8

const (
	Delayed State = iota + 1
	Ready
	Reserved
	Dead
)

// String returns the state's name as the HTTP API spells it.
func (s State) String() string {
	switch s {
	case Delayed:
		return "delayed"
	case Ready:
		return "ready"
	case Reserved:
		return "reserved"
	case Dead:
		return "dead"
	}
	return "invalid"
}

// Task is a task as the broker reports it.
type Task struct {
	ID          string
	JobID       uint64
	Queue       string
	State       State
	Payload     []byte // nil in listings
	Priority    uint32
	Due         time.Time // UTC
	TTR         time.Duration
	Attempts    int
	MaxAttempts int       // 0: unlimited
	Created     time.Time // UTC
	Lease       string    // set in Reserve's answer and while reserved
	LeaseUntil  time.Time // zero unless reserved
	// Counters for beanstalkd's stats-job.
	Timeouts, Releases, Buries, Kicks int
}

// PutRequest describes one task to put. Exactly one of Delay and At may be
// set; with neither the task is ready at once.
type PutRequest struct {
	ID          string // empty: the broker makes one
	Payload     []byte
	Delay       time.Duration
	At          time.Time
	Priority    uint32
	TTR         time.Duration // 0: Config.DefaultTTR
	MaxAttempts int           // 0: unlimited
	Replace     bool
}

// PutResult is one answer of [Broker.PutBatch].
type PutResult struct {
	Task    Task
	Created bool
	Err     error
}

// QueueStats counts a queue's tasks by state.
type QueueStats struct {
	Name                           string
	Delayed, Ready, Reserved, Dead int
	Puts, Deliveries, Acks         uint64 // since start
}

// ScheduleSpec describes a cron schedule to create or replace.
type ScheduleSpec struct {
	Name     string
	Cron     string
	Queue    string
	Payload  []byte
	Timezone string // IANA name; empty: UTC
}

// ScheduleInfo is a schedule as the broker reports it.
type ScheduleInfo struct {
	ScheduleSpec
	Next time.Time // zero if the line never fires again
	Last time.Time // newest occurrence put; zero for none
}

// Errors the broker returns; callers branch on them with errors.Is. Bad
// input is reported as an error wrapping ErrInvalid whose text says what is
// wrong.
var (
	ErrInvalid  = errors.New("hourglass: invalid request")
	ErrNotFound = errors.New("hourglass: no such task")
	// ErrLease: the lease presented is not the task's current one (expired,
	// renewed by someone else, or never issued).
	ErrLease = errors.New("hourglass: stale or unknown lease")
	// ErrState: the task is not in a state the operation applies to (kick
	// of a task that is not dead).
	ErrState = errors.New("hourglass: task is not in a state for this")
	// ErrTooLarge: a payload over Config.MaxPayload.
	ErrTooLarge = errors.New("hourglass: payload too large")
	// ErrClosed: the broker is shutting down or closed.
	ErrClosed = errors.New("hourglass: broker closed")
	// ErrNoSchedule: no schedule of that name.
	ErrNoSchedule = errors.New("hourglass: no such schedule")
)
