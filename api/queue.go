package api

import "time"

// QueuesResponse answers GET /v1/queues: every queue that holds tasks,
// by name.
type QueuesResponse struct {
	Queues []Queue `json:"queues"`
}

// Queue counts one queue's tasks by state, and shows its pause and
// policy.
type Queue struct {
	Name     string `json:"name"`
	Delayed  int    `json:"delayed"`
	Ready    int    `json:"ready"`
	Reserved int    `json:"reserved"`
	Dead     int    `json:"dead"`
	// Paused is true while the queue is paused; PausedUntil says until
	// when (absent for a pause until resumed).
	Paused      bool       `json:"paused,omitempty"`
	PausedUntil *time.Time `json:"paused_until,omitempty"`
	// Policy is the queue's policy, absent when it has none.
	Policy *Policy `json:"policy,omitempty"`
}
