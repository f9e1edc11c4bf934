package client

import (
	"context"
	"net/http"

	"github.com/hourglass-go/hourglass/api"
)

// Queues returns every queue's counts by state, by name.
func (c *Client) Queues(ctx context.Context) ([]api.Queue, error) {
	var out api.QueuesResponse
	_, err := c.do(ctx, http.MethodGet, path("queues"), nil, &out)
	return out.Queues, err
}

// SetSchedule creates or replaces the schedule name and returns it with
// its next occurrence. A bad cron line or zone is [ErrInvalid].
func (c *Client) SetSchedule(ctx context.Context, name string, s api.ScheduleRequest) (api.Schedule, error) {
	var out api.Schedule
	_, err := c.do(ctx, http.MethodPut, path("schedules", name), s, &out)
	return out, err
}

// Schedules returns every schedule with its next occurrence, by name.
func (c *Client) Schedules(ctx context.Context) ([]api.Schedule, error) {
	var out api.SchedulesResponse
	_, err := c.do(ctx, http.MethodGet, path("schedules"), nil, &out)
	return out.Schedules, err
}

// Schedule returns the schedule name with its next occurrence and its
// last (with its task's outcome); [ErrNotFound] if there is none.
func (c *Client) Schedule(ctx context.Context, name string) (api.Schedule, error) {
	var out api.Schedule
	_, err := c.do(ctx, http.MethodGet, path("schedules", name), nil, &out)
	return out, err
}

// RunSchedule puts a task of the schedule name now (id NAME@run-MS) and
// returns it; [ErrNotFound] if there is no such schedule.
func (c *Client) RunSchedule(ctx context.Context, name string) (api.Task, error) {
	var out api.Task
	_, err := c.do(ctx, http.MethodPost, path("schedules", name, "run"), struct{}{}, &out)
	return out, err
}

// PauseSchedule pauses the schedule name, durably; ResumeSchedule
// resumes it from now, with no catch-up. [ErrNotFound] if there is none.
func (c *Client) PauseSchedule(ctx context.Context, name string) error {
	_, err := c.do(ctx, http.MethodPost, path("schedules", name, "pause"), struct{}{}, nil)
	return err
}

// ResumeSchedule resumes the schedule name from now (see PauseSchedule).
func (c *Client) ResumeSchedule(ctx context.Context, name string) error {
	_, err := c.do(ctx, http.MethodPost, path("schedules", name, "resume"), struct{}{}, nil)
	return err
}

// DeleteSchedule deletes the schedule name; [ErrNotFound] if there is
// none. Tasks it put stay.
func (c *Client) DeleteSchedule(ctx context.Context, name string) error {
	_, err := c.do(ctx, http.MethodDelete, path("schedules", name), nil, nil)
	return err
}

// Ready returns nil once the server has recovered and serves, and an
// error matching [ErrUnavailable] while it recovers or stops.
func (c *Client) Ready(ctx context.Context) error {
	_, err := c.do(ctx, http.MethodGet, "/readyz", nil, nil)
	return err
}
