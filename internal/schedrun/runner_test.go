package schedrun_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hourglass-go/hourglass"
	"github.com/hourglass-go/hourglass/internal/schedrun"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// engine is a fake engine's primitives, recording their calls; its
// Occur fails while fails > 0 (counting down) or always with failAlways.
type engine struct {
	mu         sync.Mutex
	calls      []call
	settled    []time.Time
	fails      int
	failAlways bool
	hang       bool // Occur waits for its context's end
	skip       bool
	put, skips map[string]int
	missed     map[string]int
}

// call is one Occur: the occurrence, and when it was called.
type call struct {
	name     string
	at, when time.Time
}

func newEngine() *engine {
	return &engine{put: map[string]int{}, skips: map[string]int{}, missed: map[string]int{}}
}

func (e *engine) occur(ctx context.Context, s *schedrun.Schedule, at time.Time) (bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls = append(e.calls, call{s.Spec.Name, at, time.Now()})
	if e.hang {
		e.mu.Unlock()
		<-ctx.Done()
		e.mu.Lock()
		return false, ctx.Err()
	}
	if e.failAlways || e.fails > 0 {
		e.fails--
		return false, errors.New("connection refused")
	}
	return e.skip, nil
}

func (e *engine) settle(ctx context.Context, s *schedrun.Schedule, through time.Time) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.settled = append(e.settled, through)
	return nil
}

func (e *engine) Occurred(name string) { e.mu.Lock(); e.put[name]++; e.mu.Unlock() }
func (e *engine) Skips(name string)    { e.mu.Lock(); e.skips[name]++; e.mu.Unlock() }
func (e *engine) Misses(name string, n int) {
	e.mu.Lock()
	e.missed[name] += n
	e.mu.Unlock()
}

// snapshot returns a copy of the calls so far.
func (e *engine) snapshot() []call {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]call(nil), e.calls...)
}

// run makes a Runner over a fresh engine and a timer of the bubble, and
// stops both at the test's end.
func run(t *testing.T, log *slog.Logger) (*schedrun.Runner, *engine) {
	t.Helper()
	e := newEngine()
	timer := hourglass.New(hourglass.WithShards(1))
	r := schedrun.New(schedrun.Config{Timer: timer, Occur: e.occur, Settle: e.settle, Metrics: e, Log: log})
	t.Cleanup(func() {
		r.Stop()
		timer.Stop()
	})
	return r, e
}

// sched returns the schedule name of cron line line (UTC), misfire rule
// misfire, at version 1, its cursor from.
func sched(t *testing.T, name, line, misfire string, from time.Time) schedrun.Schedule {
	t.Helper()
	spec := service.NormalSchedule(task.ScheduleSpec{Name: name, Cron: line, Queue: "q", Misfire: misfire})
	c, loc, err := service.ParseSchedule(spec, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return schedrun.Schedule{Spec: spec, Cron: c, Loc: loc, Version: 1, From: from}
}

// minute returns the start of the bubble's minute, plus m minutes.
func minute(m int) time.Time {
	return time.Date(2000, 1, 1, 0, m, 0, 0, time.UTC)
}

// TestRunner_Arms: an armed schedule's occurrences are put each at its
// time, each counted, and Next is the one armed.
func TestRunner_Arms(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, e := run(t, quiet)
		r.Arm(sched(t, "tick", "* * * * *", "", time.Now()), time.Now())
		if got := r.Next("tick"); !got.Equal(minute(1)) {
			t.Fatalf("Next = %v, want %v", got, minute(1))
		}
		time.Sleep(3*time.Minute + time.Second)
		synctest.Wait()
		calls := e.snapshot()
		if len(calls) != 3 {
			t.Fatalf("%d puts in 3 minutes: %v", len(calls), calls)
		}
		for i, c := range calls {
			if !c.at.Equal(minute(i+1)) || c.when.Sub(c.at) < 0 || c.when.Sub(c.at) > 10*time.Millisecond {
				t.Errorf("put %d: occurrence %v called at %v; want %v, on time", i, c.at, c.when, minute(i+1))
			}
		}
		if e.put["tick"] != 3 {
			t.Errorf("counted %d puts, want 3", e.put["tick"])
		}
		if got := r.Next("tick"); !got.Equal(minute(4)) {
			t.Errorf("Next = %v, want %v", got, minute(4))
		}
		// A skip is counted as one.
		e.mu.Lock()
		e.skip = true
		e.mu.Unlock()
		time.Sleep(time.Minute)
		synctest.Wait()
		if e.skips["tick"] != 1 || e.put["tick"] != 3 {
			t.Errorf("after a skip: %d skips, %d puts; want 1 and 3", e.skips["tick"], e.put["tick"])
		}
	})
}

// TestRunner_Disarm: a schedule disarmed (deleted, paused) or not
// retained (a partition lost) puts nothing more, and has no Next.
func TestRunner_Disarm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, e := run(t, quiet)
		r.Arm(sched(t, "del", "* * * * *", "", time.Now()), time.Now())
		r.Arm(sched(t, "lost", "* * * * *", "", time.Now()), time.Now())
		time.Sleep(time.Minute + time.Second)
		synctest.Wait()
		if n := len(e.snapshot()); n != 2 {
			t.Fatalf("%d puts in the first minute, want 2", n)
		}
		r.Disarm("del")
		r.Retain(func(s *schedrun.Schedule) bool { return s.Spec.Name != "lost" })
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		if n := len(e.snapshot()); n != 2 {
			t.Fatalf("%d puts after the disarms, want still 2", n)
		}
		if !r.Next("del").IsZero() || !r.Next("lost").IsZero() {
			t.Errorf("Next of disarmed schedules: %v, %v", r.Next("del"), r.Next("lost"))
		}
		// A replacement re-arms from its time, without a catch-up.
		r.Arm(sched(t, "del", "*/2 * * * *", "", time.Now()), time.Now())
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		calls := e.snapshot()
		if len(calls) != 3 || !calls[2].at.Equal(minute(8)) {
			t.Fatalf("after the re-arm: %v; want one more, at %v", calls, minute(8))
		}
	})
}

// TestRunner_Retries: an occurrence whose put fails is tried again after
// a growing back-off (about 0.1, 0.2, 0.4 s), counted once when put, the
// failure logged once; the next occurrence is armed as usual.
func TestRunner_Retries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		r, e := run(t, slog.New(slog.NewTextHandler(&out, nil)))
		e.fails = 3
		r.Arm(sched(t, "tick", "* * * * *", "", time.Now()), time.Now())
		time.Sleep(2*time.Minute + time.Second)
		synctest.Wait()
		calls := e.snapshot()
		if len(calls) != 5 {
			t.Fatalf("%d calls, want 4 of the first occurrence and 1 of the second: %v", len(calls), calls)
		}
		for i, want := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond} {
			gap := calls[i+1].when.Sub(calls[i].when)
			if !calls[i+1].at.Equal(minute(1)) || gap < want*8/10 || gap > want*12/10+time.Millisecond {
				t.Errorf("try %d: occurrence %v after %v; want %v after about %v", i+2, calls[i+1].at, gap, minute(1), want)
			}
		}
		if !calls[4].at.Equal(minute(2)) {
			t.Errorf("then %v, want %v", calls[4].at, minute(2))
		}
		if e.put["tick"] != 2 || e.missed["tick"] != 0 {
			t.Errorf("counted %d puts and %d missed, want 2 and 0", e.put["tick"], e.missed["tick"])
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) != 2 || !strings.Contains(lines[0], "failed; retrying") || !strings.Contains(lines[1], "works again") {
			t.Errorf("log: %q; want one failure line, then one of the recovery", lines)
		}
	})
}

// TestRunner_GivesUpAtNext: an occurrence whose put keeps failing is
// tried until the next try would come after the next occurrence, then
// counted missed, and the next is tried in its turn; the failures are
// logged about once a second, not at every try.
func TestRunner_GivesUpAtNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		r, e := run(t, slog.New(slog.NewTextHandler(&out, nil)))
		e.failAlways = true
		r.Arm(sched(t, "tick", "@every 10s", "", time.Now()), time.Now())
		time.Sleep(30*time.Second + 500*time.Millisecond)
		r.Disarm("tick")
		synctest.Wait()
		byAt := map[time.Time]int{}
		for _, c := range e.snapshot() {
			byAt[c.at]++
			if next := c.at.Add(10 * time.Second); !c.when.Before(next) {
				t.Errorf("occurrence %v tried at %v, once the next was due", c.at, c.when)
			}
		}
		start := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
		for i := 1; i <= 2; i++ {
			// 0.1+0.2+0.4+0.8+1.6+3.2 s ±20 %, then 5 s: 6 to 8 tries.
			if n := byAt[start.Add(time.Duration(i)*10*time.Second)]; n < 5 || n > 9 {
				t.Errorf("occurrence %d tried %d times, want about 7 (%v)", i, n, byAt)
			}
		}
		if e.missed["tick"] != 2 || e.put["tick"] != 0 {
			t.Errorf("counted %d missed and %d puts; want 2 (the third disarmed while tried) and 0", e.missed["tick"], e.put["tick"])
		}
		tries := len(e.snapshot())
		failures := strings.Count(out.String(), "failed; retrying")
		if failures < 3 || failures > 31 || failures >= tries*3/4 {
			t.Errorf("%d failure lines for %d tries in 30 s, want at most about one a second:\n%s", failures, tries, out.String())
		}
	})
}

// TestRunner_SyncMisfire: a schedule taken up after ten occurrences
// missed puts what its misfire rule keeps, counts the rest as missed,
// settles them if it put none, then goes on from now.
func TestRunner_SyncMisfire(t *testing.T) {
	for _, c := range []struct {
		misfire string
		put     []time.Time
		missed  int
	}{
		{service.MisfireSkip, nil, 10},
		{service.MisfireOne, []time.Time{minute(10)}, 9},
		{service.MisfireAll, []time.Time{minute(1), minute(2), minute(3), minute(4), minute(5), minute(6), minute(7), minute(8), minute(9), minute(10)}, 0},
	} {
		t.Run(c.misfire, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r, e := run(t, quiet)
				time.Sleep(10*time.Minute + 30*time.Second)
				now := time.Now()
				r.Sync(context.Background(), []schedrun.Schedule{sched(t, "m", "* * * * *", c.misfire, minute(0))})
				calls := e.snapshot()
				if len(calls) != len(c.put) {
					t.Fatalf("put %v, want %v", calls, c.put)
				}
				for i, at := range c.put {
					if !calls[i].at.Equal(at) {
						t.Errorf("put %d: %v, want %v", i, calls[i].at, at)
					}
				}
				if e.missed["m"] != c.missed || e.put["m"] != len(c.put) {
					t.Errorf("counted %d missed and %d put, want %d and %d", e.missed["m"], e.put["m"], c.missed, len(c.put))
				}
				// Settled when nothing was put: a put records its own.
				if want := len(c.put) == 0; want != (len(e.settled) == 1 && e.settled[0].Equal(now)) || len(e.settled) > 1 {
					t.Errorf("settled %v; want %v settled at %v", e.settled, want, now)
				}
				if got := r.Next("m"); !got.Equal(minute(11)) {
					t.Errorf("Next = %v, want %v", got, minute(11))
				}
			})
		})
	}
}

// TestRunner_Sync: a schedule listed again at its version is left
// armed (no second catch-up), one listed at a new version is taken up
// afresh, and one no longer listed is disarmed; a catch-up put that
// fails is retried in the background, Sync not waiting for it.
func TestRunner_Sync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, e := run(t, quiet)
		time.Sleep(90 * time.Second)
		a, b := sched(t, "a", "* * * * *", "", minute(0)), sched(t, "b", "* * * * *", "", minute(0))
		e.fails = 1
		r.Sync(context.Background(), []schedrun.Schedule{a, b})
		if calls := e.snapshot(); len(calls) != 2 || calls[0].name != "a" || calls[1].name != "b" {
			t.Fatalf("first Sync: %v; want a tried (failing), then b", calls)
		}
		time.Sleep(time.Second) // a's retry
		synctest.Wait()
		if calls := e.snapshot(); len(calls) != 3 || calls[2].name != "a" || !calls[2].at.Equal(minute(1)) {
			t.Fatalf("after a second: %v; want a's occurrence retried", calls)
		}
		if e.put["a"] != 1 || e.put["b"] != 1 || e.missed["a"] != 0 {
			t.Fatalf("counted put %v, missed %v", e.put, e.missed)
		}
		r.Sync(context.Background(), []schedrun.Schedule{a, b})
		if n := len(e.snapshot()); n != 3 {
			t.Fatalf("%d calls after a Sync of the same versions, want still 3", n)
		}
		a.Version, a.From = 2, minute(1)
		time.Sleep(time.Minute) // 00:02:31: a missed 00:02
		r.Sync(context.Background(), []schedrun.Schedule{a})
		calls := e.snapshot()
		if len(calls) != 6 || calls[5].name != "a" || !calls[5].at.Equal(minute(2)) {
			t.Fatalf("after the new version: %v; want a and b at 00:02, then a's catch-up of 00:02", calls)
		}
		if !r.Next("b").IsZero() || !r.Next("a").Equal(minute(3)) {
			t.Fatalf("Next: b %v (unlisted), a %v", r.Next("b"), r.Next("a"))
		}
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		for _, c := range e.snapshot()[6:] {
			if c.name != "a" {
				t.Fatalf("%s put after it was no longer listed", fmt.Sprint(c))
			}
		}
	})
}

// TestRunner_StopEndsRetries: Stop ends a firing waiting to retry, and
// leaves no goroutine behind (synctest fails a test that does).
func TestRunner_StopEndsRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, e := run(t, quiet)
		e.failAlways = true
		r.Arm(sched(t, "tick", "@every 1h", "", time.Now()), time.Now())
		time.Sleep(time.Hour + 2*time.Second)
		n := len(e.snapshot())
		r.Stop()
		time.Sleep(time.Minute)
		if m := len(e.snapshot()); m != n || n < 3 {
			t.Fatalf("%d tries before Stop, %d after; want some, then none", n, m)
		}
		r.Arm(sched(t, "tick", "@every 1h", "", time.Now()), time.Now())
		if !r.Next("tick").IsZero() {
			t.Fatalf("armed after Stop")
		}
	})
}

// TestRunner_StopCancelsPut: Stop cancels a put under way (a store that
// does not answer) rather than waiting for its timeout.
func TestRunner_StopCancelsPut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, e := run(t, quiet)
		e.hang = true
		r.Arm(sched(t, "tick", "@every 1h", "", time.Now()), time.Now())
		time.Sleep(time.Hour + time.Second)
		synctest.Wait()
		if n := len(e.snapshot()); n != 1 {
			t.Fatalf("%d puts under way, want 1", n)
		}
		start := time.Now()
		r.Stop()
		if d := time.Since(start); d > 0 {
			t.Fatalf("Stop took %v, waiting for the put; want it cancelled at once", d)
		}
	})
}
