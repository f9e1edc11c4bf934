package client

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/hourglass-go/hourglass/api"
)

// Policy returns queue's policy: the zero Policy when it has none,
// besides Effective, the policy as the server applies it (each default
// filled in: the retry back-off, max_attempts, ttr).
func (c *Client) Policy(ctx context.Context, queue string) (api.Policy, error) {
	var p api.Policy
	_, err := c.do(ctx, http.MethodGet, path("queues", queue, "policy"), nil, &p)
	return p, err
}

// SetPolicy makes p queue's policy and returns it as the server recorded
// it, with Effective as Policy's. p's own Effective is ignored.
func (c *Client) SetPolicy(ctx context.Context, queue string, p api.Policy) (api.Policy, error) {
	var out api.Policy
	_, err := c.do(ctx, http.MethodPut, path("queues", queue, "policy"), p, &out)
	return out, err
}

// PatchPolicy changes queue's policy by patch, a JSON merge patch (RFC
// 7396; see api/merge.go): only the fields it names change, a null
// removing one. It returns the policy as the server recorded it.
func (c *Client) PatchPolicy(ctx context.Context, queue string, patch json.RawMessage) (api.Policy, error) {
	var out api.Policy
	_, err := c.do(ctx, http.MethodPatch, path("queues", queue, "policy"), patch, &out)
	return out, err
}

// DeletePolicy makes queue's policy the default again.
func (c *Client) DeletePolicy(ctx context.Context, queue string) error {
	_, err := c.do(ctx, http.MethodDelete, path("queues", queue, "policy"), nil, nil)
	return err
}

// Pause stops queue from handing out tasks for d (d ≤ 0: until
// [Client.Resume]). Puts go on.
func (c *Client) Pause(ctx context.Context, queue string, d time.Duration) error {
	var req api.PauseRequest
	if d > 0 {
		dd := api.Duration(d)
		req.For = &dd
	}
	_, err := c.do(ctx, http.MethodPost, path("queues", queue, "pause"), req, nil)
	return err
}

// Resume ends queue's pause.
func (c *Client) Resume(ctx context.Context, queue string) error {
	_, err := c.do(ctx, http.MethodPost, path("queues", queue, "resume"), nil, nil)
	return err
}
