package cluster

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hourglass-go/hourglass/task"
)

// TestBackoff: the waits double from base up to max, each within the
// jitter of its nominal value and not all equal, and reset starts again
// from base.
func TestBackoff(t *testing.T) {
	b := backoff{base: 100 * time.Millisecond, max: time.Second}
	check := func(nominal ...time.Duration) {
		t.Helper()
		for _, want := range nominal {
			got := b.next()
			lo, hi := time.Duration(float64(want)*(1-jitter)), time.Duration(float64(want)*(1+jitter))
			if got < lo || got > hi {
				t.Fatalf("next() = %v, want %v ± %v%%", got, want, jitter*100)
			}
		}
	}
	check(100*time.Millisecond, 200*time.Millisecond, 400*time.Millisecond, 800*time.Millisecond, time.Second, time.Second)
	seen := map[time.Duration]bool{}
	for range 100 {
		seen[b.next()] = true
	}
	if len(seen) < 50 {
		t.Errorf("100 waits at the cap took %d values: no jitter", len(seen))
	}
	b.reset()
	check(100*time.Millisecond, 200*time.Millisecond)
}

// TestFailureLog: a failure every 100 ms for 10 s is logged about once a
// second, each line with the count since the line before; the loop
// working again logs one line with the count in all.
func TestFailureLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		l := newFailureLog(slog.New(slog.NewTextHandler(&out, nil)), "hourglass: flushing timers failed", "hourglass: flushing timers works again")
		for range 100 {
			l.failed(errors.New("refused"))
			time.Sleep(100 * time.Millisecond)
		}
		l.ok()
		l.ok() // nothing more to say
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		failed := 0
		for _, line := range lines {
			if strings.Contains(line, "flushing timers failed") {
				failed++
			}
		}
		if failed < 9 || failed > 11 {
			t.Errorf("%d warnings for 10 s of failures, want about 10:\n%s", failed, out.String())
		}
		if !strings.Contains(lines[1], "failures=10 ") {
			t.Errorf("second line %q, want the 10 failures since the first", lines[1])
		}
		last := lines[len(lines)-1]
		if !strings.Contains(last, "works again") || !strings.Contains(last, "failures=100") || len(lines) != failed+1 {
			t.Errorf("last line %q of %d, want one saying it works again after 100 failures", last, len(lines))
		}
	})
}

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
