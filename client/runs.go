package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/hourglass-go/hourglass/api"
)

// ScheduleRuns returns a page of the schedule name's runs, newest first:
// its occurrences with what became of their tasks (see
// [api.ScheduleRunsResponse]), and the after of the next page ("" when
// this is the last). after "" starts from now; limit 0 takes the server's
// default. [ErrNotFound] if there is no such schedule.
func (c *Client) ScheduleRuns(ctx context.Context, name, after string, limit int) ([]api.ScheduleRun, string, error) {
	q := url.Values{}
	if after != "" {
		q.Set("after", after)
	}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	p := path("schedules", name, "runs")
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	var out api.ScheduleRunsResponse
	_, err := c.do(ctx, http.MethodGet, p, nil, &out)
	return out.Runs, out.Next, err
}
