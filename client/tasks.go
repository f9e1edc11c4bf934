package client

import (
	"context"
	"net/http"

	"github.com/hourglass-go/hourglass/api"
)

// Put puts a task into queue. created is true when the task is new, and
// false when a task of the same id existed: then t is that task,
// unchanged, or with r.Replace its replacement; or when the queue's
// dedupe window ([api.Policy].Dedupe) answered the put: then nothing was
// put and t is the task of that id that finished, t.State
// [api.StateFinished], with its Outcome and Finished (see [Deduped]).
func (c *Client) Put(ctx context.Context, queue string, r api.PutRequest) (t api.Task, created bool, err error) {
	status, err := c.do(ctx, http.MethodPost, path("queues", queue, "tasks"), r, &t)
	return t, status == http.StatusCreated, err
}

// PutBatch puts up to [api.MaxBatch] tasks into queue in one commit and
// returns one result per task, in order: a task, the error that refused
// it, or, for a put the queue's dedupe window answered, the finished
// task's record (Finished, Status 200). An error return means the batch
// as a whole failed.
func (c *Client) PutBatch(ctx context.Context, queue string, rs []api.PutRequest) ([]api.BatchResult, error) {
	var out api.BatchResponse
	if rs == nil {
		rs = []api.PutRequest{}
	}
	_, err := c.do(ctx, http.MethodPost, path("queues", queue, "tasks:batch"), api.BatchRequest{Tasks: rs}, &out)
	return out.Results, err
}

// Deduped reports whether t, an answer of Put, is the task of its id
// that finished within its queue's dedupe window rather than one put or
// found live: the put put nothing.
func Deduped(t api.Task) bool { return t.State == api.StateFinished }

// Get returns the task id of queue; [ErrNotFound] if there is none.
func (c *Client) Get(ctx context.Context, queue, id string) (api.Task, error) {
	var t api.Task
	_, err := c.do(ctx, http.MethodGet, path("queues", queue, "tasks", id), nil, &t)
	return t, err
}

// Delete deletes the task id of queue, whatever its state; [ErrNotFound]
// if there is none.
func (c *Client) Delete(ctx context.Context, queue, id string) error {
	_, err := c.do(ctx, http.MethodDelete, path("queues", queue, "tasks", id), nil, nil)
	return err
}

// Cancel deletes the task id of queue, whatever its state, and records
// it cancelled; the work under way on a reserved task stops (its push is
// aborted, a worker's handler cancelled). [ErrNotFound] if there is
// none, and for a second cancel of the same task.
func (c *Client) Cancel(ctx context.Context, queue, id string) error {
	_, err := c.do(ctx, http.MethodPost, path("queues", queue, "tasks", id, "cancel"), nil, nil)
	return err
}

// ListTasks returns a page of up to limit tasks of queue (1 to
// api.MaxListLimit; 0: the server's default), in state (""
// for any: api.StateReady, ...), in due order after after ("": from the
// start), without payloads, and the after of the next page ("": none):
// FindTasks with no filter but the state.
func (c *Client) ListTasks(ctx context.Context, queue, state string, after string, limit int) ([]api.Task, string, error) {
	return c.FindTasks(ctx, queue, api.Filter{State: state}, after, limit)
}
