// Package task holds the types every part of the delay-queue service
// shares: a task and its states, a put, a queue's counts, a schedule, the
// limits a client's input must keep and the errors callers branch on. It
// imports nothing of the project, so that the semantics (package service),
// the two engines (package broker over an embedded store, package cluster
// over PostgreSQL) and the transports (httpapi, beanstalk) all speak in
// these types.
package task

import (
	"errors"
	"time"
)

// State is where a task is in its life: delayed until its due time, ready
// to be reserved, reserved by a worker under a lease, or dead. Done
// ("finished" on the wire) is no state of a live task: it marks the
// answer of a put deduped by its queue's policy (Policy.Dedupe), a task
// that left its queue.
type State uint8

const (
	Delayed State = iota + 1
	Ready
	Reserved
	Dead
	Done
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
	case Done:
		return "finished"
	}
	return "invalid"
}

// Task is a task as the service reports it.
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
	MaxAttempts int       // 0: unlimited (as recorded: see PutRequest)
	Created     time.Time // UTC
	Lease       string    // set in Reserve's answer and while reserved
	LeaseUntil  time.Time // zero unless reserved
	// LastError is why the last attempt failed: a nack's or bury's error
	// text, or LeaseExpired; "" when none failed or none said why.
	LastError string
	// Trace is the trace context the task was put with (see [Trace]).
	Trace Trace
	// Key is the task's fairness key (PutRequest.Key): "" for none.
	Key string
	// Counters for beanstalkd's stats-job.
	Timeouts, Releases, Buries, Kicks int
	// Outcome (a Finished* outcome) and Finished (when it left its
	// queue) are set only with State Done: a deduped put's answer.
	Outcome  string
	Finished time.Time
}

// PutRequest describes one task to put. Exactly one of Delay and At may be
// set; with neither the task is ready at once. A MaxAttempts of 0 takes
// the queue policy's, else service.DefaultMaxAttempts; UnlimitedAttempts
// asks for no limit. The task records the result, 0 standing for no
// limit (service.ApplyDefaults).
type PutRequest struct {
	ID          string // empty: the service makes one
	Payload     []byte
	Delay       time.Duration
	At          time.Time
	Priority    uint32
	TTR         time.Duration // 0: the server's default
	MaxAttempts int           // 0: the queue's (service.MaxAttempts); UnlimitedAttempts: none
	Replace     bool
	// Trace is the producer's trace context, kept with the task; one
	// that is not valid is dropped (service.CheckPut, [Trace.Clean]).
	Trace Trace
	// Key names who the task is for (a tenant, say): reserves take the
	// ready tasks of a queue's keys in turn (fairness). "" is a key of
	// its own, every task put without one. A key has the rules of an id
	// (service.CheckKey).
	Key string
}

// PutResult is one answer of a batch put.
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
	// PausedUntil is when a pause ends: zero when not paused,
	// PausedForever for a pause until resumed.
	PausedUntil time.Time
	// Policy is the queue's policy (the zero Policy when none was set).
	Policy Policy
}

// QueueDetail is what beanstalkd's stats-tube reports of a queue.
type QueueDetail struct {
	QueueStats
	// Urgent counts ready tasks with priority under DefaultPriority.
	Urgent int
	// Waiting counts reservers blocked on the queue.
	Waiting int
	// Pause is the time left of a pause (0: none), and Pauses the number
	// of PauseQueue calls.
	PauseLeft time.Duration
	Pauses    uint64
}

// LatenessWindow is delivery lateness in one 10-second window: how many
// tasks were handed out, and quantiles of how late (from due time to hand-
// over), each an upper bound within a factor of two, except Max; Ready
// the same of the server's part (due time to ready), Wait of the wait
// for a worker (ready to hand-over). See service/lateness.go.
type LatenessWindow struct {
	Start         time.Time
	Deliveries    int
	P50, P99, Max time.Duration
	Ready, Wait   Quantiles
}

// Quantiles are a [LatenessWindow]'s quantiles of one measure.
type Quantiles struct {
	P50, P99, Max time.Duration
}

// ScheduleSpec describes a cron schedule to create or replace. The rules
// of Misfire, Overlap and CatchUp are in package service (schedule.go).
type ScheduleSpec struct {
	Name     string
	Cron     string
	Queue    string
	Payload  []byte
	Timezone string // IANA name; empty: UTC
	// Misfire says what is put for the occurrences missed while no server
	// ran: "skip", "one" (the newest; "" means it) or "all" within CatchUp.
	Misfire string
	// CatchUp bounds how far back "all" reaches; 0: a day.
	CatchUp time.Duration
	// Overlap: "allow" ("" means it) or "skip" (an occurrence whose
	// schedule's previous task is still waiting or reserved is skipped).
	Overlap string
	// Priority, TTR and MaxAttempts are those of the tasks put: nil
	// Priority is DefaultPriority, zero TTR and MaxAttempts the queue's
	// policy or the server's defaults.
	Priority    *uint32
	TTR         time.Duration
	MaxAttempts int
	// Paused: a paused schedule puts nothing.
	Paused bool
}

// ScheduleInfo is a schedule as the service reports it.
type ScheduleInfo struct {
	ScheduleSpec
	Next time.Time // zero if the line never fires again (or paused)
	// Last is the newest occurrence (or run) put or skipped; zero for
	// none. LastTaskID is its task's id ("" if skipped) and LastOutcome
	// one of the Schedule* outcomes.
	Last        time.Time
	LastTaskID  string
	LastOutcome string
}

// Outcomes of a schedule's last occurrence (ScheduleInfo.LastOutcome).
const (
	SchedulePending = "pending" // its task is waiting or reserved
	ScheduleAcked   = "acked"   // its task was acked (or deleted)
	ScheduleDead    = "dead"    // its task is dead
	ScheduleSkipped = "skipped" // skipped: the previous task was not finished
)

// Errors of the service, on either engine; callers branch on them with
// errors.Is. Bad input is reported as an error wrapping ErrInvalid whose
// text says what is wrong.
var (
	ErrInvalid  = errors.New("hourglass: invalid request")
	ErrNotFound = errors.New("hourglass: no such task")
	// ErrLease: the lease presented is not the task's current one (expired,
	// renewed by someone else, or never issued).
	ErrLease = errors.New("hourglass: stale or unknown lease")
	// ErrState: the task is not in a state the operation applies to (kick
	// of a task that is not dead).
	ErrState = errors.New("hourglass: task is not in a state for this")
	// ErrTooLarge: a payload over the server's limit.
	ErrTooLarge = errors.New("hourglass: payload too large")
	// ErrClosed: the service is shutting down or closed.
	ErrClosed = errors.New("hourglass: closed")
	// ErrNoSpace: a write refused because the disk under the embedded
	// store is full (HTTP 507).
	ErrNoSpace = errors.New("hourglass: no space left on the store's disk")
	// ErrNoSchedule: no schedule of that name.
	ErrNoSchedule = errors.New("hourglass: no such schedule")
)

// Ack names one reserved task to acknowledge: its queue, id and lease.
type Ack struct {
	Queue, ID, Lease string
}

// KeyCount counts a queue's live tasks of one key (PutRequest.Key) by
// state: what the operator's list of keys shows.
type KeyCount struct {
	Key                      string
	Ready, Reserved, Delayed int
}

// Total is the count of the key's tasks in the three states.
func (k KeyCount) Total() int { return k.Ready + k.Reserved + k.Delayed }
