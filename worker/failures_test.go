package worker

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hourglass-go/hourglass/api"
)

// lines is a slog.Handler that keeps the records it gets.
type lines struct {
	mu      sync.Mutex
	records []slog.Record // guarded by mu
}

func (l *lines) Enabled(context.Context, slog.Level) bool { return true }
func (l *lines) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *lines) WithGroup(string) slog.Handler            { return l }
func (l *lines) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, r.Clone())
	return nil
}

// failures returns, for each record with the message msg, its
// "failures" count.
func (l *lines) failures(msg string) []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var counts []int64
	for _, r := range l.records {
		if r.Message != msg {
			continue
		}
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "failures" {
				counts = append(counts, a.Value.Int64())
			}
			return true
		})
	}
	return counts
}

// TestFailureLog_OncePerSecond counts 300 failures of touches and 3 of
// reserves over 3 s: the touches are logged 3 times with their counts,
// the first at once, and the reserves apart from them.
func TestFailureLog_OncePerSecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got lines
		f := newFailureLog(slog.New(&got))
		err := errors.New("hourglass: unavailable")
		for i := range 300 {
			f.failed("touch", err, time.Second, "id", strconv.Itoa(i))
			if i%100 == 50 {
				f.failed("reserve", err, time.Second)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if c := got.failures("touch failing, retrying"); len(c) != 3 || c[0] != 1 || c[1] != 100 || c[2] != 100 {
			t.Errorf("touch lines with counts %v, want [1 100 100]", c)
		}
		if c := got.failures("reserve failing, retrying"); len(c) != 3 {
			t.Errorf("reserve lines with counts %v, want 3 lines", c)
		}
	})
}

// TestLease_LogsOncePerSecond keeps 20 leases through an outage of
// their touches for 20 s of virtual time: their retries are logged
// about once a second in all, not once per try.
func TestLease_LogsOncePerSecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got lines
		fails := newFailureLog(slog.New(&got))
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var wg sync.WaitGroup
		var mu sync.Mutex
		tries := 0 // guarded by mu
		for i := range 20 {
			l := newLease(&api.Task{Queue: "q", ID: strconv.Itoa(i), Lease: "l", TTR: api.Duration(time.Minute)}, time.Now().Add(-30*time.Second))
			wg.Go(func() {
				l.keep(ctx, func(ctx context.Context) error {
					mu.Lock()
					tries++
					mu.Unlock()
					return unavailable
				}, fails, func(error) {})
			})
		}
		wg.Wait()
		counts := got.failures("touch failing, retrying")
		t.Logf("%d tries, %d lines", tries, len(counts))
		if len(counts) > 21 {
			t.Errorf("%d lines for %d tries in 20 s, want one a second", len(counts), tries)
		}
		var sum int64
		for _, c := range counts {
			sum += c
		}
		if tries < 100 || sum > int64(tries) || sum < int64(tries)/2 {
			t.Errorf("%d tries, %d counted in %d lines", tries, sum, len(counts))
		}
	})
}
