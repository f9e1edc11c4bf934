package api

import "time"

// The types in this file answer the routes for looking at a server rather
// than moving tasks through it: the dashboard that `hourglass serve`
// shows at "/" reads them, and so may any other tool. They follow the
// rest of the API: the same token, the same [Error] bodies, times in RFC
// 3339 UTC and durations as Go duration strings.
//
//	GET    /v1/queues/{queue}/tasks?state=S&after=C&limit=N → 200 TasksResponse | 400 (filters: api/bulk.go)
//	POST   /v1/queues/{queue}/dead:kick                    → 200 KickedResponse
//	DELETE /v1/queues/{queue}/dead                         → 200 DeletedResponse
//	GET    /v1/stats/queues                                → 200 QueueStatsResponse
//	GET    /v1/stats/lateness                              → 200 LatenessResponse
//	GET    /v1/stats/due?queue=Q&width=D&n=N               → 200 DueResponse | 400
//	POST   /v1/cron:check  CronCheckRequest                → 200 CronCheckResponse | 400 (the parser's error)

// TasksResponse answers GET /v1/queues/{queue}/tasks: one page of the
// queue's tasks in due order, without payloads (each Task's payload is
// null; GET the task for it). The query's filters are those of [Filter]
// (api/bulk.go).
//
// Due order is ascending due time, then job id, in every state: the due
// a Task shows, which is, for a reserved task, the due time it was
// reserved at, and for a dead task the due time of its last attempt.
// after is the Next of the previous page (absent or "": from the start;
// "0" too, for clients of the job id cursor before it); limit is 1 to
// [MaxListLimit] (absent: [DefaultListLimit]). A page reads at most
// [MaxFindScan] tasks, so with a rare state or a selective filter it may
// hold fewer than limit, none even, and still have a Next.
type TasksResponse struct {
	Tasks []Task `json:"tasks"`
	// Next is the after of the next page, "" on the last: an opaque
	// cursor to give back as it is, nothing more. An after that is not
	// one is 400.
	Next string `json:"next"`
}

// Limits of a page of [TasksResponse].
const (
	DefaultListLimit = 100
	MaxListLimit     = 1000
)

// KickedResponse answers POST /v1/queues/{queue}/dead:kick: every dead
// task of the queue is ready again, and Kicked says how many there were.
type KickedResponse struct {
	Kicked int `json:"kicked"`
}

// DeletedResponse answers DELETE /v1/queues/{queue}/dead: every dead
// task of the queue is deleted, and Deleted says how many there were.
type DeletedResponse struct {
	Deleted int `json:"deleted"`
}

// QueueStatsResponse answers GET /v1/stats/queues: every queue's counts
// by state, as GET /v1/queues, with counters of what happened to it since
// the server started, and the server's time when they were read, so that
// a reader polling it gets rates from the differences of two answers:
// (b.Puts − a.Puts) / (b.Time − a.Time). A counter going down means the
// server restarted.
type QueueStatsResponse struct {
	Time   time.Time    `json:"time"`
	Queues []QueueStats `json:"queues"`
}

// QueueStats is one queue of a [QueueStatsResponse].
type QueueStats struct {
	Queue
	Puts       uint64 `json:"puts"`       // tasks put, new or replacing
	Deliveries uint64 `json:"deliveries"` // tasks handed to a reserver
	Acks       uint64 `json:"acks"`       // tasks acknowledged
}

// LatenessResponse answers GET /v1/stats/lateness: how late tasks were
// handed to reservers in the 10-second windows of the last 15 minutes
// that had deliveries, oldest first. Windows without deliveries are left
// out. Each window's P50, P99 and Max measure from due time to hand-over,
// waiting for a reserver included; its Ready splits off the server's own
// lateness (due time to ready: a late timer, a slow flush, a restart)
// and its Wait the time ready tasks waited for a worker (ready to
// hand-over: no reserver asking, or the queue paused or limited). A task
// ready at once (put due now, nacked, kicked, its lease run out) is ready
// at its due time.
type LatenessResponse struct {
	Windows []LatenessWindow `json:"windows"`
}

// LatenessWindow is one window of a [LatenessResponse]. P50 and P99 are
// upper bounds within a factor of two (the server counts lateness in
// buckets of powers of two microseconds); Max is exact.
type LatenessWindow struct {
	Start      time.Time `json:"start"`
	Deliveries int       `json:"deliveries"`
	P50        Duration  `json:"p50"`
	P99        Duration  `json:"p99"`
	Max        Duration  `json:"max"`
	// Ready is the server's lateness: due time to ready.
	Ready LatenessQuantiles `json:"ready"`
	// Wait is the wait for a worker: ready to hand-over.
	Wait LatenessQuantiles `json:"wait"`
}

// LatenessQuantiles are the quantiles of one part of a [LatenessWindow]'s
// lateness, bounds as its own.
type LatenessQuantiles struct {
	P50 Duration `json:"p50"`
	P99 Duration `json:"p99"`
	Max Duration `json:"max"`
}

// DueResponse answers GET /v1/stats/due: how many delayed tasks fall due
// in each of n windows of the given width from Start, the server's time
// of the answer: Counts[i] is the number due in [Start+i·Width,
// Start+(i+1)·Width).
//
// The query: queue (absent: every queue), width (a Go duration, absent:
// "1m"), n (1 to [MaxDueWindows], absent: 60). The server counts every
// delayed task: O(delayed tasks) a call.
type DueResponse struct {
	Start  time.Time `json:"start"`
	Width  Duration  `json:"width"`
	Counts []int     `json:"counts"`
}

// MaxDueWindows is the largest n of GET /v1/stats/due.
const MaxDueWindows = 10000

// CronCheckRequest is the body of POST /v1/cron:check: a cron line and
// time zone as a [ScheduleRequest] carries them.
type CronCheckRequest struct {
	Cron     string `json:"cron"`
	Timezone string `json:"timezone,omitempty"`
}

// CronCheckResponse answers a [CronCheckRequest] whose line the server's
// parser accepts: its next five occurrences after now, fewer when it
// stops firing. A line or zone it refuses answers 400 with the parser's
// message.
type CronCheckResponse struct {
	Next []time.Time `json:"next"`
}

// CronCheckTimes is how many occurrences a [CronCheckResponse] lists.
const CronCheckTimes = 5
