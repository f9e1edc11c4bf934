package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hourglass-go/hourglass/internal/retry"
)

// TestUntilRoom: a store that cannot open for a full disk is tried again
// after internal/retry's back-off (1 s doubling to 30 s, jittered), the
// failures logged about once a second with a count and the recovery
// once; another error ends the tries at once.
func TestUntilRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		log := slog.New(slog.NewTextHandler(&out, nil))
		var tries []time.Time
		full := fmt.Errorf("open store: %w", syscall.ENOSPC)
		run := untilRoom(context.Background(), log, func() opened {
			tries = append(tries, time.Now())
			if len(tries) <= 10 {
				return opened{err: full}
			}
			return opened{}
		})
		if run.err != nil || len(tries) != 11 {
			t.Fatalf("untilRoom = %v after %d tries, want nil after 11", run.err, len(tries))
		}
		atCap := map[time.Duration]bool{}
		for i := 1; i < len(tries); i++ {
			want := min(fullDiskFirst<<(i-1), fullDiskMax)
			d := tries[i].Sub(tries[i-1])
			if d < time.Duration(float64(want)*(1-retry.Jitter)) || d > time.Duration(float64(want)*(1+retry.Jitter)) {
				t.Errorf("wait %d = %v, want %v ± %v%%", i, d, want, retry.Jitter*100)
			}
			if want == fullDiskMax {
				atCap[d] = true
			}
		}
		if len(atCap) < 2 {
			t.Errorf("the waits at the cap took %d values: no jitter", len(atCap))
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) < 9 || len(lines) > 11 || !strings.Contains(lines[0], "disk is full") || !strings.Contains(lines[0], "failures=1") {
			t.Errorf("log:\n%s\nwant about a line a try (they are about a second or more apart), with a count, then the recovery", out.String())
		}
		if last := lines[len(lines)-1]; !strings.Contains(last, "has room again") || !strings.Contains(last, "failures=10") {
			t.Errorf("last line %q, want the recovery after 10 failures", last)
		}

		other := fmt.Errorf("open store: %w", syscall.EACCES)
		n := 0
		start := time.Now()
		if run := untilRoom(context.Background(), log, func() opened { n++; return opened{err: other} }); run.err != other || n != 1 || time.Since(start) != 0 {
			t.Errorf("untilRoom with another error = %v after %d tries and %v, want it at once", run.err, n, time.Since(start))
		}
	})
}
