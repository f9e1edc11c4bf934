package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/hourglass-go/hourglass/api"
)

// Attempts returns the attempts of the task id of queue, oldest first: a
// live task's, or a finished one's while the server's history keeps it.
// A running attempt has no Ended and no Outcome. An id the server knows
// neither way answers [ErrNotFound].
func (c *Client) Attempts(ctx context.Context, queue, id string) ([]api.Attempt, error) {
	var out api.AttemptsResponse
	_, err := c.do(ctx, http.MethodGet, path("queues", queue, "tasks", id, "attempts"), nil, &out)
	return out.Attempts, err
}

// History returns a page of up to limit tasks that left queue, newest
// first (1 to api.MaxListLimit; 0: the server's default), whose outcome
// is outcome ("" for any: api.FinishedAcked, api.FinishedDead or
// api.FinishedDeleted), from the cursor after (0: the newest), and the
// after of the next page (0: none).
func (c *Client) History(ctx context.Context, queue, outcome string, after uint64, limit int) ([]api.FinishedTask, uint64, error) {
	q := url.Values{}
	if outcome != "" {
		q.Set("outcome", outcome)
	}
	if after != 0 {
		q.Set("after", strconv.FormatUint(after, 10))
	}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	p := path("queues", queue, "history")
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	var out api.HistoryResponse
	_, err := c.do(ctx, http.MethodGet, p, nil, &out)
	return out.Tasks, out.Next, err
}
