package api

import (
	"encoding/json"
	"time"
)

// ScheduleRequest is the body of PUT /v1/schedules/{name}: a cron line
// whose every occurrence puts one task into Queue, with the id
// "{name}@{occurrence time, RFC 3339}" so that no occurrence is put
// twice, across restarts too. Every field but Cron and Queue is optional;
// a bad one is 400 naming it, and nothing changes. A PUT replaces the
// whole schedule: a field left out takes its default.
type ScheduleRequest struct {
	// Cron is a standard five-field cron line (minute, hour, day of
	// month, month, day of week) or a descriptor such as "@hourly" or
	// "@every 1m30s", as hourglass.Cron reads it. Refused (400): an
	// @every of less than a second or not whole seconds (the parser would
	// round it), and a line that never fires ("0 0 30 2 *").
	Cron    string          `json:"cron"`
	Queue   string          `json:"queue"`
	Payload json.RawMessage `json:"payload,omitempty"`
	// Timezone is the IANA zone the line is read in; empty: UTC. Across a
	// daylight-saving change, a wall-clock time that does not exist has no
	// occurrence and one that exists twice has one, the first.
	Timezone string `json:"timezone,omitempty"`
	// Misfire says what is put for the occurrences missed while no server
	// ran: "skip" (none), "one" (the newest; the default) or "all" (every
	// one within CatchUp before now, at most 1,000, the newest).
	Misfire string `json:"misfire,omitempty"`
	// CatchUp bounds how far back "all" reaches, 1s to 8784h; default 24h.
	CatchUp *Duration `json:"catch_up,omitempty"`
	// Overlap is "allow" (the default) or "skip": an occurrence is skipped
	// (last outcome "skipped") while the schedule's previous task is still
	// waiting or reserved in its queue; a dead one does not hold it back.
	Overlap string `json:"overlap,omitempty"`
	// Priority, TTR and MaxAttempts are those of the tasks put, as in a
	// PutRequest; absent: DefaultPriority, the queue's policy or the
	// server's defaults.
	Priority    *uint32   `json:"priority,omitempty"`
	TTR         *Duration `json:"ttr,omitempty"`
	MaxAttempts *int      `json:"max_attempts,omitempty"`
	// Paused creates or keeps the schedule paused: it puts nothing until
	// POST /v1/schedules/{name}/resume, which starts it from now (the
	// occurrences that fell due while paused are not put, whatever the
	// misfire rule).
	Paused bool `json:"paused,omitempty"`
}

// Schedule is a schedule as the API shows it, its options with their
// defaults spelled out.
type Schedule struct {
	Name        string          `json:"name"`
	Cron        string          `json:"cron"`
	Queue       string          `json:"queue"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	Timezone    string          `json:"timezone,omitempty"`
	Misfire     string          `json:"misfire"`
	CatchUp     Duration        `json:"catch_up"`
	Overlap     string          `json:"overlap"`
	Priority    uint32          `json:"priority"`
	TTR         Duration        `json:"ttr,omitzero"`
	MaxAttempts int             `json:"max_attempts,omitzero"`
	Paused      bool            `json:"paused"`
	// Next is the next occurrence; absent if the line never fires again
	// or the schedule is paused.
	Next time.Time `json:"next,omitzero"`
	// Last is the newest occurrence (or run) put or skipped; absent for
	// none yet.
	Last *ScheduleLast `json:"last,omitempty"`
}

// ScheduleLast is a schedule's newest occurrence or run.
type ScheduleLast struct {
	// Time is the occurrence's (a run's: when it was asked).
	Time time.Time `json:"time"`
	// TaskID is its task's id; absent for an occurrence skipped.
	TaskID string `json:"task_id,omitempty"`
	// Outcome is "pending" (its task is waiting or reserved), "acked"
	// (acked, or deleted, or no longer in the history), "dead" or
	// "skipped" (the overlap rule).
	Outcome string `json:"outcome"`
}

// SchedulesResponse answers GET /v1/schedules, by name.
type SchedulesResponse struct {
	Schedules []Schedule `json:"schedules"`
}

// Routes of a schedule besides PUT, GET and DELETE /v1/schedules/{name}:
//
//	POST /v1/schedules/{name}/run     201, the Task of a put now, with the
//	                                  id "{name}@run-{Unix ms}" and the
//	                                  schedule's payload and task options
//	                                  (paused or not); it becomes the
//	                                  schedule's last; its next stays.
//	POST /v1/schedules/{name}/pause   204; durable; a paused schedule puts
//	                                  nothing.
//	POST /v1/schedules/{name}/resume  204; from now, with no catch-up.
//
// Each is 404 for no such schedule.

// ScheduleRunsResponse answers GET /v1/schedules/{name}/runs?limit=N&after=T:
// a page of the schedule's occurrences with what became of their tasks,
// newest first, from the newest not after now (after absent) or the
// newest before after (the Next of the previous page, RFC 3339); limit is
// 1 to [MaxRunsLimit] (absent: [DefaultRunsLimit]). A bad value answers
// 400 naming it; an unknown schedule 404.
//
// An occurrence whose task is neither live nor kept by the history is
// left out: not put (missed, paused, before the schedule), skipped by the
// overlap rule (only the newest skip is kept, and listed), or past the
// history's retention; tasks put by run now are not listed. A page looks
// at most 4×limit occurrences, so it may hold fewer than limit runs and
// still have a Next; the listing ends at a page of 4×limit occurrences
// without a run, or a year back.
//
//	{"runs":[{"time":"2026-03-01T09:00:00Z","task_id":"daily@2026-03-01T09:00:00Z","outcome":"acked","finished":"2026-03-01T09:00:02Z","attempts":1}],"next":""}
type ScheduleRunsResponse struct {
	Runs []ScheduleRun `json:"runs"`
	// Next is the after of the next page; "" when this is the last.
	Next string `json:"next"`
}

// ScheduleRun is one run of a [ScheduleRunsResponse]: the occurrence's
// time, its task's id, and its outcome: "pending" (State says waiting or
// reserved), "dead" (dead in its queue, or its finished record's), "acked",
// "deleted" (from its finished record, with Finished) or "skipped" (no
// task: the previous one was not finished).
type ScheduleRun struct {
	Time     time.Time  `json:"time"`
	TaskID   string     `json:"task_id,omitempty"`
	Outcome  string     `json:"outcome"`
	State    string     `json:"state,omitempty"`
	Finished *time.Time `json:"finished,omitempty"`
	Attempts int        `json:"attempts,omitempty"`
}

// Limits of a page of [ScheduleRunsResponse].
const (
	DefaultRunsLimit = 20
	MaxRunsLimit     = 100
)
