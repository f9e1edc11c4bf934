package httpapi

import (
	"encoding/json"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/task"
)

// putRequest turns a put's wire form into the broker's, checking what the
// broker cannot tell apart: both delay and at (the broker cannot see an
// explicit "0s"), and an absent priority, which means the default.
func putRequest(p api.PutRequest) (task.PutRequest, error) {
	if p.Delay != nil && p.At != nil {
		return task.PutRequest{}, badRequest("give delay or at, not both")
	}
	r := task.PutRequest{
		ID:          p.ID,
		Priority:    api.DefaultPriority,
		MaxAttempts: p.MaxAttempts,
		Replace:     p.Replace,
	}
	if len(p.Payload) > 0 && string(p.Payload) != "null" {
		r.Payload = p.Payload
	}
	if p.Delay != nil {
		r.Delay = p.Delay.D()
	}
	if p.At != nil {
		if p.At.IsZero() {
			return task.PutRequest{}, badRequest("at is the zero time")
		}
		r.At = *p.At
	}
	if p.Priority != nil {
		r.Priority = *p.Priority
	}
	if p.TTR != nil {
		r.TTR = p.TTR.D()
	}
	return r, nil
}

// toTask turns the broker's task into its wire form, with the lease when
// withLease is set (reserve and touch answers only).
func toTask(t task.Task, withLease bool) api.Task {
	a := api.Task{
		ID:          t.ID,
		JobID:       t.JobID,
		Queue:       t.Queue,
		State:       t.State.String(),
		Payload:     payload(t.Payload),
		Priority:    t.Priority,
		Due:         utc(t.Due),
		TTR:         api.Duration(t.TTR),
		Attempts:    t.Attempts,
		MaxAttempts: t.MaxAttempts,
		Created:     utc(t.Created),
	}
	if withLease {
		a.Lease = t.Lease
	}
	return a
}

// payload returns a stored payload as JSON: as it is when it is JSON
// (every payload put over this API is), or as a JSON string of its bytes
// when another protocol put bytes that are not.
func payload(p []byte) json.RawMessage {
	if len(p) == 0 {
		return nil // null
	}
	if json.Valid(p) {
		return p
	}
	s, _ := json.Marshal(string(p))
	return s
}

// utc returns t in UTC, so that it is written with a "Z".
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}

// toSchedule turns the broker's schedule into its wire form.
func toSchedule(s task.ScheduleInfo) api.Schedule {
	return api.Schedule{
		Name:     s.Name,
		Cron:     s.Cron,
		Queue:    s.Queue,
		Payload:  payload(s.Payload),
		Timezone: s.Timezone,
		Next:     utc(s.Next),
		Last:     utc(s.Last),
	}
}
