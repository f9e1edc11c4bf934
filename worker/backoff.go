package worker

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
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

// transient reports whether a call that failed with err may succeed if
// tried again: the server or a proxy answered 502, 503 (recovering or
// stopping) or 504, or the request did not get through (connection
// refused or reset, a timeout). Other error answers are the call's own
// fault and final.
func transient(err error) bool {
	var e *client.Error
	if errors.As(err, &e) {
		return e.Status == http.StatusBadGateway || e.Status == http.StatusServiceUnavailable || e.Status == http.StatusGatewayTimeout
	}
	var u *url.Error
	return errors.As(err, &u) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// retry calls f until it succeeds, fails for a reason that is not
// [transient], ctx is done, or giveUp is closed (Run's shutdown is over:
// no more retries), waiting [backoff] between tries and logging each
// failure. It returns f's last error.
func retry(ctx context.Context, giveUp <-chan struct{}, log *slog.Logger, what string, f func(context.Context) error, attrs ...any) error {
	for n := 1; ; n++ {
		err := f(ctx)
		if err == nil || !transient(err) || ctx.Err() != nil {
			return err
		}
		select {
		case <-giveUp:
			return err
		default:
		}
		d := backoff(n)
		log.Warn(what+" failed, retrying", append(attrs, "error", err, "attempt", n, "in", d)...)
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
