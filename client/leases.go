package client

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/hourglass-go/hourglass/api"
)

// Reserve takes up to max ready tasks of queue (max ≤ 0: one), each with
// a lease for its ttr, waiting up to wait for the first one when none is
// ready. It returns an empty list when none came. The call's deadline is
// wait plus [Options.Timeout]; the context should outlast wait, and
// cancelling it ends the wait on the server too.
func (c *Client) Reserve(ctx context.Context, queue string, max int, wait time.Duration) ([]api.Task, error) {
	req := api.ReserveRequest{}
	req.Max, req.Wait = reserveLimits(max, wait)
	var out api.ReserveResponse
	_, err := c.doWait(ctx, reserveDeadline(wait), http.MethodPost, path("queues", queue, "reserve"), req, &out)
	return out.Tasks, err
}

// Ack acknowledges the task id reserved under lease: it is done and
// removed. [ErrConflict] if the lease is stale (expired, so the task may
// be with another worker), [ErrNotFound] if the task is gone.
func (c *Client) Ack(ctx context.Context, queue, id, lease string) error {
	_, err := c.do(ctx, http.MethodPost, path("queues", queue, "tasks", id, "ack"), api.LeaseRequest{Lease: lease}, nil)
	return err
}

// Touch renews the lease of the task id for another ttr and returns the
// task with its lease.
func (c *Client) Touch(ctx context.Context, queue, id, lease string) (api.Task, error) {
	var t api.Task
	_, err := c.do(ctx, http.MethodPost, path("queues", queue, "tasks", id, "touch"), api.LeaseRequest{Lease: lease}, &t)
	return t, err
}

// RetryDelay, as a nack's delay, leaves the delay to the queue's retry
// policy (api.DefaultRetry without one).
const RetryDelay time.Duration = -1

// Nack gives the task id back after a failed attempt, keeping reason as
// its last error: ready again after delay (RetryDelay: as the queue's
// retry policy says), or dead (or moved to the queue's dead-letter queue)
// when its attempts are used up. It returns the task as it is after.
func (c *Client) Nack(ctx context.Context, queue, id, lease string, delay time.Duration, reason string) (api.Task, error) {
	req := api.NackRequest{Lease: lease, Error: reason}
	if delay >= 0 {
		d := api.Duration(delay)
		req.Delay = &d
	}
	var t api.Task
	_, err := c.do(ctx, http.MethodPost, path("queues", queue, "tasks", id, "nack"), req, &t)
	return t, err
}

// Release gives the task id back, ready after delay, without counting
// the attempt: what a worker shutting down does with its tasks. It
// returns the task.
func (c *Client) Release(ctx context.Context, queue, id, lease string, delay time.Duration) (api.Task, error) {
	req := api.ReleaseRequest{Lease: lease}
	if delay > 0 {
		d := api.Duration(delay)
		req.Delay = &d
	}
	var t api.Task
	_, err := c.do(ctx, http.MethodPost, path("queues", queue, "tasks", id, "release"), req, &t)
	return t, err
}

// Bury makes the task id dead at once, whatever attempts are left (or
// moves it to the queue's dead-letter queue), keeping reason as its last
// error. It returns the task.
func (c *Client) Bury(ctx context.Context, queue, id, lease, reason string) (api.Task, error) {
	var t api.Task
	_, err := c.do(ctx, http.MethodPost, path("queues", queue, "tasks", id, "bury"), api.BuryRequest{Lease: lease, Error: reason}, &t)
	return t, err
}

// Kick makes the dead task id ready again; [ErrConflict] if it is not
// dead.
func (c *Client) Kick(ctx context.Context, queue, id string) error {
	_, err := c.do(ctx, http.MethodPost, path("queues", queue, "tasks", id, "kick"), nil, nil)
	return err
}

// ReserveQueues takes up to max ready tasks from any of queues, in
// delivery order across them (each task says its queue), waiting up to
// wait for the first, as [Client.Reserve] does for one queue.
func (c *Client) ReserveQueues(ctx context.Context, queues []string, max int, wait time.Duration) ([]api.Task, error) {
	req := api.ReserveQueuesRequest{Queues: queues}
	req.Max, req.Wait = reserveLimits(max, wait)
	var out api.ReserveResponse
	_, err := c.doWait(ctx, reserveDeadline(wait), http.MethodPost, "/v1/reserve", req, &out)
	return out.Tasks, err
}

// AckMany acknowledges up to api.MaxAcks reserved tasks in one request
// and returns one error per ack, in order: nil where it took, else an
// [*Error] with the server's message (Status 0: the answer gives none per
// ack). The second result is the request's own error.
func (c *Client) AckMany(ctx context.Context, acks []api.Ack) ([]error, error) {
	var out api.AcksResponse
	if _, err := c.do(ctx, http.MethodPost, "/v1/acks", api.AcksRequest{Acks: acks}, &out); err != nil {
		return nil, err
	}
	if len(out.Results) != len(acks) {
		return nil, fmt.Errorf("hourglass: %d results for %d acks", len(out.Results), len(acks))
	}
	errs := make([]error, len(acks))
	for i, r := range out.Results {
		if r.Error != "" {
			errs[i] = &Error{Message: r.Error}
		}
	}
	return errs, nil
}

// CancelledLeases returns those of leases (1 to [api.MaxAcks]) whose
// tasks were deleted or cancelled while reserved, lately: their holders
// are to stop. It reads the server's memory only; package worker asks
// about the leases it holds once a second.
func (c *Client) CancelledLeases(ctx context.Context, leases []string) ([]string, error) {
	var out api.LeasesResponse
	_, err := c.do(ctx, http.MethodPost, "/v1/leases:cancelled", api.LeasesRequest{Leases: leases}, &out)
	return out.Cancelled, err
}

// reserveDeadline returns how much longer than an ordinary call a
// reserve that waits up to wait may take: wait, up to api.MaxWait (the
// server's own bound; a longer wait is refused at once).
func reserveDeadline(wait time.Duration) time.Duration {
	return min(max(wait, 0), api.MaxWait)
}

// reserveLimits returns a reserve's max and wait as the wire has them:
// absent (the server's defaults, 1 and no wait) when not positive.
func reserveLimits(max int, wait time.Duration) (*int, *api.Duration) {
	var m *int
	var w *api.Duration
	if max > 0 {
		m = &max
	}
	if wait > 0 {
		d := api.Duration(wait)
		w = &d
	}
	return m, w
}
