package api

import "time"

// The types in this file are the operator's console (issue 44): finding
// a queue's tasks by a filter, and acting on every task a filter matches.
//
//	GET  /v1/queues/{queue}/tasks?state=&error=&due_after=&due_before=&created_after=&created_before=&id_prefix=&key=&after=&limit=
//	                                                    → 200 TasksResponse | 400
//	POST /v1/queues/{queue}/tasks:delete  BulkRequest → 200 BulkResponse | 400
//	POST /v1/queues/{queue}/tasks:kick    BulkRequest → 200 BulkResponse | 400 (dead → ready)
//	POST /v1/queues/{queue}/tasks:retry   BulkRequest → 200 BulkResponse | 400 (dead or delayed → ready now)
//	POST /v1/queues/{queue}/tasks:move    BulkRequest → 200 BulkResponse | 400 (into "to")
//
// The GET's filters are those of [Filter], as query parameters; with none
// of them it lists every task. A page reads at most [MaxFindScan] tasks
// of the queue, so that it answers in bounded time whatever the queue's
// size: with a selective filter it may hold fewer than limit tasks, none
// even, and still have a Next. Pages are in due order (due time, then job
// id: [TasksResponse]), and Next is an opaque cursor to give back as
// after, nothing more; an after the server did not give is 400.
//
// A bad filter is 400 naming the parameter, and nothing changes.

// Filter selects tasks: those matching every field given.
type Filter struct {
	// State is "delayed", "ready", "reserved" or "dead".
	State string `json:"state,omitempty"`
	// Error is a substring of the task's last_error.
	Error string `json:"error,omitempty"`
	// DueAfter (at or after) and DueBefore (before) bound the due time,
	// CreatedAfter and CreatedBefore when the task was put.
	DueAfter      *time.Time `json:"due_after,omitempty"`
	DueBefore     *time.Time `json:"due_before,omitempty"`
	CreatedAfter  *time.Time `json:"created_after,omitempty"`
	CreatedBefore *time.Time `json:"created_before,omitempty"`
	// IDPrefix is a prefix of the task's id.
	IDPrefix string `json:"id_prefix,omitempty"`
	// Key is the task's key ([PutRequest.Key]); absent or "": any key.
	Key string `json:"key,omitempty"`
}

// BulkRequest is the body of the bulk routes: the filter, the target
// queue of a move, and dry_run to count the tasks matched and change
// nothing. An empty filter matches every task of the queue.
type BulkRequest struct {
	Filter
	To     string `json:"to,omitempty"`
	DryRun bool   `json:"dry_run,omitempty"`
}

// BulkResponse answers a bulk route: how many tasks the filter matched
// and how many of them the action changed (0 for a dry run). A task that
// changed between its match and its action (a kick of one no longer
// dead, a delete of one reserved since) is not changed. A move leaves in
// place a task whose id the target queue has: Clashed counts them and
// Clashes names the first [MaxClashes].
type BulkResponse struct {
	Matched int      `json:"matched"`
	Changed int      `json:"changed"`
	Clashed int      `json:"clashed,omitempty"`
	Clashes []string `json:"clashes,omitempty"`
}

// Limits of the operator's console.
const (
	MaxFindScan   = 20000 // tasks a filtered page reads at most
	MaxClashes    = 100   // ids a BulkResponse names
	MaxFilterText = 200   // bytes of error and id_prefix
)

// KeysResponse answers GET /v1/queues/{queue}/keys?limit=&after=: a page
// of the keys of the queue's live tasks (PutRequest.Key; "" for the tasks
// put without one), busiest first (the most ready, reserved and delayed
// tasks, then by key), at most limit ([DefaultListLimit], up to
// [MaxListLimit]). Next is the after of the next page, "" on the last:
// a cursor to give back, nothing more. Dead tasks are not counted.
//
//	{"keys":[{"key":"tenant-42","ready":1200,"reserved":8,"delayed":3},{"key":"","ready":2,"reserved":0,"delayed":0}],"next":""}
type KeysResponse struct {
	Keys []KeyCount `json:"keys"`
	Next string     `json:"next"`
}

// KeyCount is one key of a [KeysResponse] with its tasks by state.
type KeyCount struct {
	Key      string `json:"key"`
	Ready    int    `json:"ready"`
	Reserved int    `json:"reserved"`
	Delayed  int    `json:"delayed"`
}
