package worker

import (
	"context"
	"time"

	"github.com/hourglass-go/hourglass/client"
	"github.com/hourglass-go/hourglass/internal/retry"
)

// The back-off between retries of a call that failed for a transient
// reason: internal/retry's rule ([retry.Backoff], ±[retry.Jitter] at
// random, so that workers that failed together, a server restarting, do
// not come back together), from minBackoff after the first failure,
// doubling up to maxBackoff.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 10 * time.Second
)

// newBackoff returns the back-off of one loop of retries.
func newBackoff() retry.Backoff { return retry.Backoff{Base: minBackoff, Max: maxBackoff} }

// retryCall calls f until it succeeds, fails for a reason that is not
// [client.IsTransient], ctx is done, or giveUp is closed (Run's shutdown
// is over: no more retries), waiting a back-off ([newBackoff]) between
// tries and counting each failure, and each success, in fails under
// what. It returns f's last error.
func retryCall(ctx context.Context, giveUp <-chan struct{}, fails *failureLog, what string, f func(context.Context) error, attrs ...any) error {
	b := newBackoff()
	for {
		err := f(ctx)
		if err == nil {
			fails.ok(what)
		}
		if err == nil || !client.IsTransient(err) || ctx.Err() != nil {
			return err
		}
		select {
		case <-giveUp:
			return err
		default:
		}
		d := b.Next()
		fails.failed(what, err, d, attrs...)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
		case <-giveUp:
		case <-t.C:
			continue
		}
		t.Stop()
		return err
	}
}
