package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/hourglass-go/hourglass/api"
)

// BulkWait is how much longer than the client's timeout a bulk call may
// take: the server acts on a large set in chunks before it answers.
const BulkWait = 10 * time.Minute

// FindTasks returns a page of up to limit tasks of queue (1 to
// api.MaxListLimit; 0: the server's default) that f matches, in due
// order after after ("": from the start), without payloads, and the
// after of the next page ("": none), an opaque cursor to give back as it
// is. A page may be short, or empty, and still have a next (api/bulk.go).
func (c *Client) FindTasks(ctx context.Context, queue string, f api.Filter, after string, limit int) ([]api.Task, string, error) {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("state", f.State)
	set("error", f.Error)
	set("id_prefix", f.IDPrefix)
	set("key", f.Key)
	for k, t := range map[string]*time.Time{"due_after": f.DueAfter, "due_before": f.DueBefore, "created_after": f.CreatedAfter, "created_before": f.CreatedBefore} {
		if t != nil {
			q.Set(k, t.UTC().Format(time.RFC3339Nano))
		}
	}
	set("after", after)
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	p := path("queues", queue, "tasks")
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	var out api.TasksResponse
	_, err := c.do(ctx, http.MethodGet, p, nil, &out)
	return out.Tasks, out.Next, err
}

// Bulk does action ("delete", "kick", "retry" or "move") on every task of
// queue that r's filter matches, and returns what the server did; it may
// take BulkWait more than the client's timeout.
func (c *Client) Bulk(ctx context.Context, queue, action string, r api.BulkRequest) (api.BulkResponse, error) {
	var out api.BulkResponse
	_, err := c.doWait(ctx, BulkWait, http.MethodPost, path("queues", queue, "tasks:"+action), r, &out)
	return out, err
}

// Keys returns a page of up to limit (0: the server's default) keys of
// queue's live tasks with their counts, busiest first, after the cursor
// after ("": the first page), and the cursor of the next page ("":
// none).
func (c *Client) Keys(ctx context.Context, queue, after string, limit int) ([]api.KeyCount, string, error) {
	q := url.Values{}
	if after != "" {
		q.Set("after", after)
	}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	p := path("queues", queue, "keys")
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	var out api.KeysResponse
	_, err := c.do(ctx, http.MethodGet, p, nil, &out)
	return out.Keys, out.Next, err
}
