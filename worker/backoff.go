package worker

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/hourglass-go/hourglass/client"
)

// The back-off between retries of a call that failed for a transient
// reason: minBackoff after the first failure, doubling up to maxBackoff,
// each with equal jitter (see backoff).
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 10 * time.Second
)

// backoff returns the wait before the retry that follows n ≥ 1
// consecutive failures: minBackoff·2^(n−1), at most maxBackoff, of which
// a random half, so that workers that failed together (a server
// restarting) do not come back together.
func backoff(n int) time.Duration {
	d := maxBackoff
	if n < 10 { // 100ms << 9 is over maxBackoff already
		d = min(minBackoff<<max(n-1, 0), maxBackoff)
	}
	return d/2 + rand.N(d/2+1)
}

// retry calls f until it succeeds, fails for a reason that is not
// [client.IsTransient], ctx is done, or giveUp is closed (Run's shutdown
// is over: no more retries), waiting [backoff] between tries and
// counting each failure in fails. It returns f's last error.
func retry(ctx context.Context, giveUp <-chan struct{}, fails *failureLog, what string, f func(context.Context) error, attrs ...any) error {
	for n := 1; ; n++ {
		err := f(ctx)
		if err == nil || !client.IsTransient(err) || ctx.Err() != nil {
			return err
		}
		select {
		case <-giveUp:
			return err
		default:
		}
		d := backoff(n)
		fails.failed(time.Now(), what, err, d, attrs...)
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
