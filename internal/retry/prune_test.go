package retry

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// store is a PruneFunc's records: their ages at their writing, by the
// bubble's clock.
type store struct {
	mu      sync.Mutex
	written []time.Time // oldest first
	calls   []time.Time // when Prune was called
	ages    []time.Duration
	fail    error
}

func (s *store) prune(ctx context.Context, age time.Duration, max int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, time.Now())
	s.ages = append(s.ages, age)
	if s.fail != nil {
		return 0, s.fail
	}
	n := 0
	for n < len(s.written) && n < max && s.written[n].Before(time.Now().Add(-age)) {
		n++
	}
	s.written = s.written[n:]
	return n, nil
}

func (s *store) state() (left, calls int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.written), len(s.calls)
}

// TestPruner_Rounds: with a retention of a minute, a round runs every
// 5 s (the cap), removes 2,500 records past the retention in three
// batches 10 ms apart, passes the retention as the age, and leaves the
// records within it.
func TestPruner_Rounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &store{}
		for range 2500 {
			s.written = append(s.written, time.Now())
		}
		time.Sleep(31 * time.Second)
		s.written = append(s.written, time.Now()) // within the retention at the next round
		p := &Pruner{What: "the history", Retention: time.Minute, Prune: s.prune, Log: quiet}
		p.Start()
		time.Sleep(29 * time.Second) // rounds at 5 s … 25 s: nothing past the retention
		if left, calls := s.state(); left != 2501 || calls != 5 {
			t.Fatalf("after 29 s: %d records left, %d calls; want 2501 and 5 (a round every 5 s)", left, calls)
		}
		time.Sleep(time.Second + 100*time.Millisecond) // the round at 30 s
		p.Stop()
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.written) != 1 {
			t.Fatalf("%d records left, want the one within the retention", len(s.written))
		}
		last := s.calls[len(s.calls)-3:]
		if d := last[1].Sub(last[0]); d != PrunePause {
			t.Errorf("batches %v apart, want %v", d, PrunePause)
		}
		for _, a := range s.ages {
			if a != time.Minute {
				t.Fatalf("Prune called with age %v, want the retention", a)
			}
		}
	})
}

// TestPruner_Every: the time between rounds is a quarter of a short
// retention, at least PruneMinEvery, and PruneEvery when none is kept.
func TestPruner_Every(t *testing.T) {
	for _, c := range []struct{ retention, want time.Duration }{
		{0, PruneEvery},
		{time.Hour, PruneEvery},
		{time.Second, 250 * time.Millisecond},
		{time.Millisecond, PruneMinEvery},
	} {
		if got := (&Pruner{Retention: c.retention}).Every(); got != c.want {
			t.Errorf("Every() with retention %v = %v, want %v", c.retention, got, c.want)
		}
	}
}

// TestPruner_BacksOff: a prune that keeps failing is tried after a
// growing back-off (not every 25 ms, the retention's quarter), and the
// failure is logged about once a second, then once when it works again.
func TestPruner_BacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		s := &store{fail: errors.New("connection refused")}
		p := &Pruner{What: "the history", Retention: 100 * time.Millisecond, Prune: s.prune, Log: slog.New(slog.NewTextHandler(&out, nil))}
		p.Start()
		time.Sleep(20 * time.Second)
		_, calls := s.state()
		// 25 ms, then back-offs of 0.1, 0.2, 0.4 … 5 s (±20 %): about 8.
		if calls < 5 || calls > 12 {
			t.Errorf("%d tries in 20 s of failures, want about 8 (a back-off), not 800", calls)
		}
		s.mu.Lock()
		s.fail = nil
		s.mu.Unlock()
		time.Sleep(7 * time.Second)
		p.Stop()
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) < 2 || len(lines) > calls {
			t.Fatalf("%d log lines for %d failures:\n%s", len(lines), calls, out.String())
		}
		if !strings.Contains(lines[0], "pruning the history failed") {
			t.Errorf("first line %q", lines[0])
		}
		if last := lines[len(lines)-1]; !strings.Contains(last, "works again") {
			t.Errorf("last line %q, want the recovery", last)
		}
		_, after := s.state()
		if after-calls < 50 {
			t.Errorf("%d rounds in 7 s after the recovery, want every 25 ms again", after-calls)
		}
	})
}

// TestPruner_Leads: a process that does not lead does not prune.
func TestPruner_Leads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &store{}
		var leads bool
		var mu sync.Mutex
		p := &Pruner{What: "x", Prune: s.prune, Log: quiet, Leads: func() bool { mu.Lock(); defer mu.Unlock(); return leads }}
		p.Start()
		// Half a round off the rounds' instants, so that no round falls
		// at the moment leads changes or the test stops.
		time.Sleep(time.Minute + PruneEvery/2)
		if _, calls := s.state(); calls != 0 {
			t.Fatalf("%d prunes by a process that does not lead", calls)
		}
		mu.Lock()
		leads = true
		mu.Unlock()
		time.Sleep(PruneEvery)
		p.Stop()
		if _, calls := s.state(); calls != 1 {
			t.Fatalf("%d prunes in a round once it leads, want 1", calls)
		}
	})
}

// TestPruner_StopCancels: Stop cancels a batch in progress (a statement
// the database does not answer), logs nothing, and leaves no goroutine
// behind (synctest.Test fails otherwise).
func TestPruner_StopCancels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		started := make(chan struct{})
		var deadline time.Time
		p := &Pruner{What: "x", Log: slog.New(slog.NewTextHandler(&out, nil)), Prune: func(ctx context.Context, age time.Duration, max int) (int, error) {
			deadline, _ = ctx.Deadline()
			close(started)
			<-ctx.Done()
			return 0, ctx.Err()
		}}
		p.Start()
		<-started
		if d := time.Until(deadline); d != PruneTimeout {
			t.Errorf("a batch's deadline in %v, want %v", d, PruneTimeout)
		}
		time.Sleep(time.Second)
		p.Stop()
		if out.Len() != 0 {
			t.Errorf("a stop logged %q", out.String())
		}
	})
	(&Pruner{}).Stop() // never started
}
