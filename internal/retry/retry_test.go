package retry

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestBackoff: the waits double from Base up to Max, each within the
// jitter of its nominal value and not all equal, and Reset starts again
// from Base.
func TestBackoff(t *testing.T) {
	b := Backoff{Base: 100 * time.Millisecond, Max: time.Second}
	check := func(nominal ...time.Duration) {
		t.Helper()
		for _, want := range nominal {
			got := b.Next()
			lo, hi := time.Duration(float64(want)*(1-Jitter)), time.Duration(float64(want)*(1+Jitter))
			if got < lo || got > hi {
				t.Fatalf("Next() = %v, want %v ± %v%%", got, want, Jitter*100)
			}
		}
	}
	check(100*time.Millisecond, 200*time.Millisecond, 400*time.Millisecond, 800*time.Millisecond, time.Second, time.Second)
	seen := map[time.Duration]bool{}
	for range 100 {
		seen[b.Next()] = true
	}
	if len(seen) < 50 {
		t.Errorf("100 waits at the cap took %d values: no jitter", len(seen))
	}
	b.Reset()
	check(100*time.Millisecond, 200*time.Millisecond)
}

// TestFailureLog: a failure every 100 ms for 10 s is logged about once a
// second, each line with the count since the line before; the loop
// working again logs one line with the count in all.
func TestFailureLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		l := NewFailureLog(slog.New(slog.NewTextHandler(&out, nil)), "hourglass: flushing timers failed", "hourglass: flushing timers works again")
		for range 100 {
			l.Failed(errors.New("refused"), "queue", "q")
			time.Sleep(100 * time.Millisecond)
		}
		l.OK()
		l.OK() // nothing more to say
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
		if !strings.Contains(lines[1], "failures=10 ") || !strings.Contains(lines[1], "queue=q") {
			t.Errorf("second line %q, want the 10 failures since the first, and the queue", lines[1])
		}
		last := lines[len(lines)-1]
		if !strings.Contains(last, "works again") || !strings.Contains(last, "failures=100") || len(lines) != failed+1 {
			t.Errorf("last line %q of %d, want one saying it works again after 100 failures", last, len(lines))
		}
	})
}

// TestFailureLog_OKShared: loops sharing a log, one failing every 10 ms
// while another works every 10 ms for 5 s, log about once a second, not
// at each success after a failure; once the failures stop, the first
// success a second after the last failure logs their end, with the
// count in all.
func TestFailureLog_OKShared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		l := NewFailureLog(slog.New(slog.NewTextHandler(&out, nil)), "hourglass: touch failed", "hourglass: touch works again")
		for range 500 {
			l.Failed(errors.New("refused"))
			time.Sleep(5 * time.Millisecond)
			l.OKShared()
			time.Sleep(5 * time.Millisecond)
		}
		for range 200 { // 2 s of successes only
			l.OKShared()
			time.Sleep(10 * time.Millisecond)
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) < 5 || len(lines) > 7 {
			t.Fatalf("%d lines for 5 s of failures among successes, want about 6:\n%s", len(lines), out.String())
		}
		last := lines[len(lines)-1]
		if !strings.Contains(last, "works again") || !strings.Contains(last, "failures=500") {
			t.Errorf("last line %q, want one saying it works again after 500 failures", last)
		}
		for _, line := range lines[:len(lines)-1] {
			if strings.Contains(line, "works again") {
				t.Errorf("recovery logged while failures went on: %q", line)
			}
		}
	})
}
