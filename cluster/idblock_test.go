package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/task"
)

// TestIDBlock_WaitersGiveUp: a put waiting for the job ids held by
// another (whose query the database does not answer) gives up with its
// own deadline, or the node's database timeout without one, instead of
// queueing on a lock until the holder is done.
func TestIDBlock_WaitersGiveUp(t *testing.T) {
	n := &Node{db: &pool{timeout: 100 * time.Millisecond}}
	b := idBlock{turn: make(chan struct{}, 1)}
	b.turn <- struct{}{} // held by a put stuck on the database
	for _, c := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"own deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 50*time.Millisecond)
		}, context.DeadlineExceeded},
		{"no deadline", func() (context.Context, context.CancelFunc) {
			return context.WithCancel(context.Background())
		}, task.ErrClosed},
	} {
		ctx, cancel := c.ctx()
		done := make(chan error, 1)
		go func() {
			_, err := b.take(ctx, n, 1)
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, c.want) {
				t.Errorf("%s: take: %v, want %v", c.name, err, c.want)
			}
		case <-time.After(10 * time.Second): // a bound, on a loaded machine
			t.Fatalf("%s: take still waiting after 10s", c.name)
		}
		cancel()
	}
}
