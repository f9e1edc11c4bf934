package task

import "time"

// Limits on what a client chooses, the same on every engine and over
// every transport. Package api documents them for the wire; a test there
// checks that its copy agrees.
const (
	// MaxNameLen bounds queue names, task ids and schedule names.
	MaxNameLen = 200
	// MaxBatch bounds the tasks of one batch put.
	MaxBatch = 1000
	// MaxReserve bounds the tasks one reserve hands out.
	MaxReserve = 1000
	// MaxWait bounds how long one reserve waits.
	MaxWait = 5 * time.Minute
	// MaxList bounds a page of a queue's tasks.
	MaxList = 1000
	// MaxDueWindows bounds the windows of a due histogram.
	MaxDueWindows = 10000
)

// Defaults of a server's limits, each changed by a flag of
// `hourglass serve`.
const (
	DefaultMaxDelay   = 10 * 365 * 24 * time.Hour
	DefaultMaxPayload = 1 << 20
	DefaultTTR        = 60 * time.Second
	// DefaultMaxSchedules bounds how many schedules a server keeps: a
	// new schedule past it is refused (ErrInvalid), a replacement of
	// one that exists never is.
	DefaultMaxSchedules = 10_000
	// DefaultPriority is the priority of a task put without one, as in
	// beanstalkd's clients.
	DefaultPriority = 1024
)

// Limits of the calls on many queues or tasks at once.
const (
	// MaxReserveQueues bounds the queues of one reserve over HTTP.
	MaxReserveQueues = 100
	// MaxWatch bounds the queues of one ReserveAny, a beanstalkd
	// connection's watch list (beanstalkd has no bound but memory).
	MaxWatch = 1000
	// MaxAcks bounds the acks of one batch.
	MaxAcks = 1000
)
