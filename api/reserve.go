package api

import "time"

// ReserveRequest is the body of POST /v1/queues/{queue}/reserve. An empty
// body takes the defaults.
type ReserveRequest struct {
	// Max is how many tasks to take at most, 1 to [MaxReserve]; nil: 1.
	// An explicit 0 is an error.
	Max *int `json:"max,omitempty"`
	// Wait is how long to wait for a first task when none is ready, 0
	// to [MaxWait]; nil: answer at once.
	Wait *Duration `json:"wait,omitempty"`
}

// Limits of a [ReserveRequest].
const (
	MaxReserve = 1000
	MaxWait    = 5 * time.Minute
)

// ReserveResponse answers a reserve: the tasks taken, each with its
// lease, in priority order, then due time, then put order. Tasks is empty
// (never null) when none became ready within the wait.
type ReserveResponse struct {
	Tasks []Task `json:"tasks"`
}

// LeaseRequest is the body of ack and touch: the lease that reserve
// answered. A missing lease is an error (400); a stale one a conflict
// (409).
type LeaseRequest struct {
	Lease string `json:"lease"`
}

// NackRequest is the body of nack: the lease, how long the task waits
// before it is ready again (absent: as the queue's retry policy says,
// [DefaultRetry] without one), and why the attempt failed (kept as the
// task's last_error, at most [MaxError] bytes). The attempt counts: a
// task whose attempts are used up is dead, or moved to the queue's
// dead-letter queue. The answer is the task as it is after, without its
// payload ("payload": null; GET the task for it).
type NackRequest struct {
	Lease string    `json:"lease"`
	Delay *Duration `json:"delay,omitempty"`
	Error string    `json:"error,omitempty"`
}

// ReserveQueuesRequest is the body of POST /v1/reserve: a reserve from
// several queues at once, as beanstalkd's watch list does, with the rules
// of order, limits and long-poll of the per-queue reserve. Each task in
// the answer (a [ReserveResponse]) says its queue.
type ReserveQueuesRequest struct {
	// Queues are the queues to take from, 1 to [MaxReserveQueues].
	Queues []string `json:"queues"`
	// Max and Wait are as in [ReserveRequest].
	Max  *int      `json:"max,omitempty"`
	Wait *Duration `json:"wait,omitempty"`
}

// MaxReserveQueues bounds a [ReserveQueuesRequest]'s queues.
const MaxReserveQueues = 100

// AcksRequest is the body of POST /v1/acks: up to [MaxAcks] acks,
// committed together and answered each alone.
type AcksRequest struct {
	Acks []Ack `json:"acks"`
}

// Ack names one reserved task and its lease.
type Ack struct {
	Queue string `json:"queue"`
	ID    string `json:"id"`
	Lease string `json:"lease"`
}

// MaxAcks bounds an [AcksRequest].
const MaxAcks = 1000

// AcksResponse answers POST /v1/acks: one result per ack, in order.
type AcksResponse struct {
	Results []AckResult `json:"results"`
}

// AckResult is one ack's answer: empty when it took, else the error the
// ack alone would have answered.
type AckResult struct {
	Error string `json:"error,omitempty"`
}

// LeasesRequest is the body of POST /v1/leases:cancelled: up to
// [MaxAcks] leases a worker holds, each as a reserve answered it.
type LeasesRequest struct {
	Leases []string `json:"leases"`
}

// LeasesResponse answers POST /v1/leases:cancelled: those of the leases
// asked about whose tasks were deleted or cancelled while reserved, in
// the last minute (their holders are to stop their work); the others, as
// far as the server heard, still hold or ran out. A Go worker asks about
// once a second while it holds tasks, and cancels a handler whose lease
// is named here.
type LeasesResponse struct {
	Cancelled []string `json:"cancelled"`
}
