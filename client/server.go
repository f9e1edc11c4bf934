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
