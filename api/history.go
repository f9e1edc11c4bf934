package api

import "time"

// The types in this file answer the history's routes: what became of a
// task, attempt by attempt, and which tasks left a queue and how. The
// server keeps both for its retention (`hourglass serve --history`, 24h
// by default; 0 keeps none), after which a finished task and its
// attempts are gone.
//
//	GET /v1/queues/{queue}/tasks/{id}/attempts                       → 200 AttemptsResponse | 404
//	GET /v1/queues/{queue}/history?outcome=O&after=N&limit=N         → 200 HistoryResponse | 400

// AttemptsResponse answers GET /v1/queues/{queue}/tasks/{id}/attempts:
// the attempts of the task, oldest first (at most the newest
// [MaxAttemptsListed]), for a live task and for one that finished while
// the history keeps it (the newest task of that id). An id the server
// knows neither live nor in the history answers 404. The server keeps
// the first [AttemptsKeptFirst] and the last [AttemptsKeptLast] attempts
// of a task; Dropped counts the attempts between them left out.
//
//	{"attempts":[
//	  {"attempt":1,"started":"2026-03-01T12:00:00Z","ended":"2026-03-01T12:00:02.5Z","outcome":"nacked","error":"smtp: timeout","duration":"2.5s"},
//	  {"attempt":2,"started":"2026-03-01T12:00:12.5Z","duration":"800ms"}]}
type AttemptsResponse struct {
	Attempts []Attempt `json:"attempts"`
	// Dropped is how many attempts numbered below the last one listed
	// are not listed; absent for none.
	Dropped int `json:"dropped,omitempty"`
}

// Bounds of a task's attempt records (the server's task.AttemptsKept*).
const (
	AttemptsKeptFirst = 5
	AttemptsKeptLast  = 100
)

// Attempt is one attempt of a task: a reservation by a worker, or a push
// by the server, from its start to its end. A running attempt (the task
// is reserved, or being pushed) has no Ended and no Outcome, and its
// Duration is the time since it started.
type Attempt struct {
	// Attempt numbers the attempts of the task from 1, as its attempts
	// count them in Queue (task.Attempt): a release over HTTP gives its
	// number back, so the attempt after it has the same number, and a
	// task moved to a dead-letter queue starts there from 1 again.
	Attempt int `json:"attempt"`
	// Queue is the queue the task was in during the attempt; absent for
	// a record kept by an older server.
	Queue   string    `json:"queue,omitempty"`
	Started time.Time `json:"started"`
	// Ended is absent while the attempt runs.
	Ended *time.Time `json:"ended,omitempty"`
	// Outcome is one of the Attempt* outcomes; absent while it runs.
	Outcome string `json:"outcome,omitempty"`
	// Error is the nack's, the bury's or the failed push's error, if any.
	Error string `json:"error,omitempty"`
	// Status is the HTTP status a push got; absent when none.
	Status int `json:"status,omitempty"`
	// Node names the cluster node that ended the attempt (the one whose
	// call ended it; for a lease that ran out, its partition's owner);
	// absent while it runs and on the embedded engine.
	Node string `json:"node,omitempty"`
	// Duration is Ended − Started, or the time since Started while the
	// attempt runs.
	Duration Duration `json:"duration"`
}

// Outcomes of an [Attempt].
const (
	AttemptAcked      = "acked"
	AttemptNacked     = "nacked"
	AttemptReleased   = "released"    // given back without counting (a worker shutting down)
	AttemptBuried     = "buried"      // made dead by its worker
	AttemptExpired    = "expired"     // its lease ran out
	AttemptPushed     = "pushed"      // a push answered 2xx
	AttemptPushFailed = "push-failed" // a push failed (Error says how, Status what it got)
	AttemptCancelled  = "cancelled"   // its task was cancelled while the attempt ran
)

// MaxAttemptsListed bounds the attempts of an [AttemptsResponse].
const MaxAttemptsListed = 1000

// HistoryResponse answers GET /v1/queues/{queue}/history: one page of
// the tasks that left the queue, newest first.
//
// The query selects the page: outcome is "acked", "dead", "deleted" or "cancelled"
// (absent: any); after is the Next of the previous page (absent or 0:
// from the newest); limit is 1 to [MaxListLimit] (absent:
// [DefaultListLimit]). Any other value of them answers 400 naming it.
//
//	{"tasks":[{"id":"welcome-42","job_id":42,"outcome":"dead","finished":"2026-03-01T12:01:00Z","attempts":5,"last_error":"smtp: timeout"}],"next":0}
type HistoryResponse struct {
	Tasks []FinishedTask `json:"tasks"`
	// Next is the after of the next page; always present, 0 when this is
	// the last page.
	Next uint64 `json:"next"`
}

// FinishedTask is one task of a [HistoryResponse]: a task that was acked
// (or pushed with a 2xx answer), died (its attempts used up, or buried:
// whether it stays dead in the queue or moves to the queue's dead-letter
// queue, where it goes on under the same id) or was deleted.
type FinishedTask struct {
	ID       string    `json:"id"`
	JobID    uint64    `json:"job_id"`
	Outcome  string    `json:"outcome"` // one of the Finished* outcomes
	Finished time.Time `json:"finished"`
	// Attempts is how many attempts it had.
	Attempts  int    `json:"attempts"`
	LastError string `json:"last_error,omitempty"`
}

// Outcomes of a [FinishedTask], and the values of the history's outcome
// filter.
const (
	FinishedAcked     = "acked"
	FinishedDead      = "dead"
	FinishedDeleted   = "deleted"
	FinishedCancelled = "cancelled" // POST /v1/queues/{queue}/tasks/{id}/cancel
)
