package api

import (
	"encoding/json"
	"time"
)

// ScheduleRequest is the body of PUT /v1/schedules/{name}: a cron line
// whose every occurrence puts one task into Queue, with the id
// "{name}@{occurrence time, RFC 3339}" so that no occurrence is put
// twice, across restarts too.
type ScheduleRequest struct {
	// Cron is a standard five-field cron line (minute, hour, day of
	// month, month, day of week) or a descriptor such as "@hourly" or
	// "@every 1m30s", as hourglass.Cron reads it.
	Cron    string          `json:"cron"`
	Queue   string          `json:"queue"`
	Payload json.RawMessage `json:"payload,omitempty"`
	// Timezone is the IANA zone the line is read in; empty: UTC.
	Timezone string `json:"timezone,omitempty"`
}

// Schedule is a schedule as the API shows it.
type Schedule struct {
	Name     string          `json:"name"`
	Cron     string          `json:"cron"`
	Queue    string          `json:"queue"`
	Payload  json.RawMessage `json:"payload,omitempty"`
	Timezone string          `json:"timezone,omitempty"`
	// Next is the next occurrence; absent if the line never fires again.
	Next time.Time `json:"next,omitzero"`
	// Last is the newest occurrence put; absent for none yet.
	Last time.Time `json:"last,omitzero"`
}

// SchedulesResponse answers GET /v1/schedules, by name.
type SchedulesResponse struct {
	Schedules []Schedule `json:"schedules"`
}
