package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/client"
	"github.com/hourglass-go/hourglass/internal/retry"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// heldFirst runs an acker that sends at most most acks a request, to a
// server that holds the first request while five more acks come, closes
// it, and returns the ids of each request sent.
func heldFirst(most int) [][]string {
	var mu sync.Mutex
	var sent [][]string // guarded by mu
	first := make(chan struct{})
	hold := make(chan struct{})
	send := func(ctx context.Context, acks []api.Ack) ([]error, error) {
		mu.Lock()
		ids := make([]string, len(acks))
		for i, a := range acks {
			ids[i] = a.ID
		}
		sent = append(sent, ids)
		n := len(sent)
		mu.Unlock()
		if n == 1 {
			close(first)
			<-hold
		}
		return make([]error, len(acks)), nil
	}
	a := newAcker(context.Background(), nil, send, 10, most, newFailureLog(quiet), nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.run()
	}()
	until := time.Now().Add(time.Minute)
	a.add(api.Ack{ID: "0"}, until)
	<-first
	for i := 1; i <= 5; i++ {
		a.add(api.Ack{ID: fmt.Sprint(i)}, until)
	}
	close(hold)
	a.close()
	<-done
	mu.Lock()
	defer mu.Unlock()
	return sent
}

// TestAcker_Batches holds the first request of an acker while more acks
// come: they go together in the second request, and close sends the
// rest before run returns.
func TestAcker_Batches(t *testing.T) {
	sent := heldFirst(api.MaxAcks)
	want := [][]string{{"0"}, {"1", "2", "3", "4", "5"}}
	if !slices.EqualFunc(sent, want, slices.Equal) {
		t.Errorf("requests %v, want %v", sent, want)
	}
}

// TestAcker_Most holds the first request of an acker that sends at most
// two acks a request while five more come: they go two by two.
func TestAcker_Most(t *testing.T) {
	sent := heldFirst(2)
	want := [][]string{{"0"}, {"1", "2"}, {"3", "4"}, {"5"}}
	if !slices.EqualFunc(sent, want, slices.Equal) {
		t.Errorf("requests %v, want %v", sent, want)
	}
}

// TestAcker_Retries retries a request answered 503 and gives up on one
// answered 400.
func TestAcker_Retries(t *testing.T) {
	calls := 0
	errs := []error{&client.Error{Status: 503, Message: "hourglass: stopping"}, nil}
	send := func(ctx context.Context, acks []api.Ack) ([]error, error) {
		err := errs[min(calls, len(errs)-1)]
		calls++
		return make([]error, len(acks)), err
	}
	a := newAcker(context.Background(), nil, send, 1, api.MaxAcks, newFailureLog(quiet), nil)
	a.flush([]pendingAck{{api.Ack{ID: "x"}, time.Now().Add(time.Minute), time.Time{}}})
	if calls != 2 {
		t.Errorf("%d requests, want 2: one retry of the 503", calls)
	}
	calls = 0
	errs = []error{&client.Error{Status: 400, Message: "hourglass: bad"}}
	a.flush([]pendingAck{{api.Ack{ID: "x"}, time.Now().Add(time.Minute), time.Time{}}})
	if calls != 1 {
		t.Errorf("%d requests, want 1: no retry of a 400", calls)
	}
}

// TestRetryCall_Backoff: a call failing for a transient reason is
// retried after internal/retry's back-off, 100 ms doubling up to 10 s,
// each wait within its jitter; the failures are logged about once a
// second, and the call working again once.
func TestRetryCall_Backoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got lines
		var tries []time.Time
		err := retryCall(context.Background(), nil, newFailureLog(slog.New(&got)), "ack", func(context.Context) error {
			tries = append(tries, time.Now())
			if len(tries) <= 12 {
				return unavailable
			}
			return nil
		})
		if err != nil || len(tries) != 13 {
			t.Fatalf("retryCall = %v after %d tries, want nil after 13", err, len(tries))
		}
		for i := 1; i < len(tries); i++ {
			want := min(minBackoff<<(i-1), maxBackoff)
			lo, hi := time.Duration(float64(want)*(1-retry.Jitter)), time.Duration(float64(want)*(1+retry.Jitter))
			if d := tries[i].Sub(tries[i-1]); d < lo || d > hi {
				t.Errorf("wait %d = %v, want %v ± %v%%", i, d, want, retry.Jitter*100)
			}
		}
		// 12 failures over about 53 s: the first at once, then one line
		// a second while the waits are short, then one per wait.
		if c := got.failures("ack failing, retrying"); len(c) < 7 || len(c) > 10 || c[0] != 1 {
			t.Errorf("failure lines with counts %v, want about 9, the first at once", c)
		}
		if c := got.failures("ack works again"); len(c) != 1 || c[0] != 12 {
			t.Errorf("recovery lines with counts %v, want one, after 12 failures", c)
		}
	})
}

// TestOutcome reads RetryAfter and Fail through wrapping.
func TestOutcome(t *testing.T) {
	base := errors.New("x")
	for _, tc := range []struct {
		err   error
		bury  bool
		delay time.Duration
	}{
		{base, false, -1},
		{RetryAfter(time.Second, base), false, time.Second},
		{fmt.Errorf("a: %w", RetryAfter(time.Second, base)), false, time.Second},
		{fmt.Errorf("a: %w", Fail(base)), true, 0},
		{RetryAfter(time.Second, Fail(base)), true, 0},
		{RetryAfter(-time.Second, base), false, 0},
	} {
		bury, delay := outcome(tc.err)
		if bury != tc.bury || delay != tc.delay {
			t.Errorf("outcome(%v) = %v, %s; want %v, %s", tc.err, bury, delay, tc.bury, tc.delay)
		}
		if !errors.Is(tc.err, base) || tc.err.Error() != "x" && tc.err.Error() != "a: x" {
			t.Errorf("%v does not read as its error", tc.err)
		}
	}
}

// TestAcker_AckErrors logs each ack the server refused, and only those.
func TestAcker_AckErrors(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	send := func(ctx context.Context, acks []api.Ack) ([]error, error) {
		return []error{nil, &client.Error{Message: "hourglass: stale or unknown lease"}}, nil
	}
	a := newAcker(context.Background(), nil, send, 2, api.MaxAcks, newFailureLog(log), nil)
	until := time.Now().Add(time.Minute)
	a.flush([]pendingAck{{api.Ack{Queue: "q", ID: "ok"}, until, time.Time{}}, {api.Ack{Queue: "q", ID: "stale"}, until, time.Time{}}})
	out := buf.String()
	if !strings.Contains(out, "id=stale") || strings.Contains(out, "id=ok") || strings.Count(out, "\n") != 1 {
		t.Errorf("log:\n%s\nwant one line, of the stale ack", out)
	}
}

// TestAcker_Linger: acks that finish within ackLinger of the first share
// one request, which starts ackLinger after the first was queued, not
// later; an ack queued past that goes in a request of its own.
func TestAcker_Linger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		type request struct {
			ids []string
			at  time.Duration
		}
		start := time.Now()
		var mu sync.Mutex
		var sent []request // guarded by mu
		send := func(ctx context.Context, acks []api.Ack) ([]error, error) {
			r := request{at: time.Since(start)}
			for _, a := range acks {
				r.ids = append(r.ids, a.ID)
			}
			mu.Lock()
			sent = append(sent, r)
			mu.Unlock()
			return make([]error, len(acks)), nil
		}
		a := newAcker(context.Background(), nil, send, 10, api.MaxAcks, newFailureLog(quiet), nil)
		done := make(chan struct{})
		go func() {
			defer close(done)
			a.run()
		}()
		until := time.Now().Add(time.Minute)
		a.add(api.Ack{ID: "0"}, until)
		time.Sleep(ackLinger / 4)
		a.add(api.Ack{ID: "1"}, until)
		time.Sleep(ackLinger / 2)
		a.add(api.Ack{ID: "2"}, until)
		time.Sleep(ackLinger)
		a.add(api.Ack{ID: "3"}, until)
		a.close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		want := []request{{[]string{"0", "1", "2"}, ackLinger}, {[]string{"3"}, ackLinger/4 + ackLinger/2 + ackLinger}}
		if !slices.EqualFunc(sent, want, func(a, b request) bool { return a.at == b.at && slices.Equal(a.ids, b.ids) }) {
			t.Errorf("requests %v, want %v", sent, want)
		}
	})
}
