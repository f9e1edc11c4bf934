package worker

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/client"
)

// keepFor runs a lease of ttr reserved now through keep with touch for
// d of virtual time, and returns the times of the touches since the
// start, whether lost was called, and when.
func keepFor(t *testing.T, ttr, d time.Duration, touch func(n int) error) (touches []time.Duration, lost bool, lostAt time.Duration) {
	t.Helper()
	start := time.Now()
	l := newLease(&api.Task{Queue: "q", ID: "t", Lease: "l", TTR: api.Duration(ttr)}, start)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.keep(ctx, func(ctx context.Context) error {
			touches = append(touches, time.Since(start))
			return touch(len(touches))
		}, newFailureLog(quiet), func(error) {
			lost = true
			lostAt = time.Since(start)
		})
	}()
	<-done
	if lost != l.isLost() {
		t.Errorf("lost called %v, isLost %v", lost, l.isLost())
	}
	return touches, lost, lostAt
}

var unavailable = &client.Error{Status: http.StatusServiceUnavailable, Message: "hourglass: stopping"}

// TestLease_TouchesHalfway touches a lease of 10 s every 5 s.
func TestLease_TouchesHalfway(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		touches, lost, _ := keepFor(t, 10*time.Second, 32*time.Second, func(int) error { return nil })
		want := []time.Duration{5 * time.Second, 10 * time.Second, 15 * time.Second, 20 * time.Second, 25 * time.Second, 30 * time.Second}
		if lost || len(touches) != len(want) {
			t.Fatalf("touches at %v, lost %v; want %v", touches, lost, want)
		}
		for i := range want {
			if touches[i] != want[i] {
				t.Fatalf("touches at %v, want %v", touches, want)
			}
		}
	})
}

// TestLease_RetriesTransient retries touches answered 503 within the
// lease, which is then kept.
func TestLease_RetriesTransient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		touches, lost, _ := keepFor(t, 10*time.Second, 9*time.Second, func(n int) error {
			if n <= 3 {
				return unavailable
			}
			return nil
		})
		if lost || len(touches) < 4 || touches[3] >= 10*time.Second {
			t.Fatalf("touches at %v, lost %v; want 3 refused and a fourth within the lease", touches, lost)
		}
	})
}

// TestLease_Gone stops at a 409 or 404 and calls lost.
func TestLease_Gone(t *testing.T) {
	for _, err := range []error{
		&client.Error{Status: http.StatusConflict, Message: "hourglass: stale or unknown lease"},
		&client.Error{Status: http.StatusNotFound, Message: "hourglass: not found"},
	} {
		synctest.Test(t, func(t *testing.T) {
			touches, lost, at := keepFor(t, 10*time.Second, time.Minute, func(int) error { return err })
			if !lost || at != 5*time.Second || len(touches) != 1 {
				t.Fatalf("%v: touches at %v, lost %v at %v; want lost at the first touch, 5s", err, touches, lost, at)
			}
		})
	}
}

// TestLease_RunsOut gives the lease up when no touch gets through
// before its deadline, with back-off between the tries.
func TestLease_RunsOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		touches, lost, at := keepFor(t, 10*time.Second, time.Minute, func(int) error {
			return unavailable
		})
		if !lost || at > 10*time.Second+minTouch || at < 10*time.Second {
			t.Fatalf("lost %v at %v, want lost at 10s", lost, at)
		}
		if len(touches) > 40 {
			t.Errorf("%d touches in 5 s: no back-off", len(touches))
		}
	})
}
