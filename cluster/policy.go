package cluster

import (
	"context"
	"errors"
	"time"

	"github.com/hourglass-go/hourglass/task"
)

var errNotYet = errors.New("hourglass: not implemented yet")

func (n *Node) Release(ctx context.Context, queue, id, lease string, delay time.Duration) (task.Task, error) {
	return task.Task{}, errNotYet
}

func (n *Node) Bury(ctx context.Context, queue, id, lease, reason string) (task.Task, error) {
	return task.Task{}, errNotYet
}

func (n *Node) SetPolicy(ctx context.Context, queue string, p task.Policy) (task.Policy, error) {
	return task.Policy{}, errNotYet
}

func (n *Node) Policy(ctx context.Context, queue string) (task.Policy, error) {
	return task.Policy{}, nil
}

func (n *Node) DeletePolicy(ctx context.Context, queue string) error { return errNotYet }
