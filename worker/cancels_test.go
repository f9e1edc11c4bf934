package worker_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/worker"
)

// TestWorker_Cancelled cancels one of 20 running tasks whose touches are
// 30 s away: its handler's context ends with ErrCancelled within a few
// seconds (the worker's check, about once a second), the others run on
// and are acked, and the cancelled task is neither acked nor nacked. An
// idle worker asks nothing, and a busy one asks about once a second for
// all its tasks, not once per task.
func TestWorker_Cancelled(t *testing.T) {
	var checks atomic.Int64
	url, stopServer, err := serveOn(nil, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/leases:cancelled" {
				checks.Add(1)
			}
			h.ServeHTTP(w, r)
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stopServer()
	c := clientOf(t, url)
	const n = 20
	release := make(chan struct{})
	started := make(chan string, n)
	cause := make(chan error, 1)
	w := worker.New(c, worker.Options{Logger: quiet, Concurrency: n})
	w.Handle("q", func(ctx context.Context, tk *worker.Task) error {
		started <- tk.ID
		if tk.ID != "c0" {
			<-release
			return nil
		}
		select {
		case <-ctx.Done():
			cause <- context.Cause(ctx)
		case <-time.After(20 * time.Second):
			cause <- errors.New("context not cancelled in 20 s")
		}
		return ctx.Err()
	})
	stop := start(t, w)
	defer stop()

	time.Sleep(3 * time.Second)
	if k := checks.Load(); k != 0 {
		t.Fatalf("an idle worker checked %d times in 3 s; want 0", k)
	}
	put(t, c, "q", "c", 1, api.PutRequest{TTR: new(api.Duration(time.Minute))})
	put(t, c, "q", "busy", n-1, api.PutRequest{TTR: new(api.Duration(time.Minute))})
	for range n {
		<-started
	}
	before := checks.Load()
	held := time.Now()
	if err := c.Cancel(context.Background(), "q", "c0"); err != nil {
		t.Fatal(err)
	}
	if err := <-cause; !errors.Is(err, worker.ErrCancelled) {
		t.Fatalf("cause %v; want ErrCancelled", err)
	}
	took := time.Since(held)
	t.Logf("handler cancelled %s after the cancel", took.Round(time.Millisecond))
	time.Sleep(2 * time.Second)
	k, secs := checks.Load()-before, time.Since(held).Seconds()
	t.Logf("%d checks in %.1f s for %d tasks held", k, secs, n)
	if float64(k) > secs*1.5+1 {
		t.Fatalf("%d checks in %.1f s while holding %d tasks; want about one a second", k, secs, n)
	}
	close(release)
	eventually(t, "the other tasks' acks", func() bool {
		for i := range n - 1 {
			tk, err := c.Get(context.Background(), "q", "busy"+strconv.Itoa(i))
			if !finished(tk, err) {
				return false
			}
		}
		return true
	})
	if tk, err := c.Get(context.Background(), "q", "c0"); err != nil || tk.Outcome != api.FinishedCancelled {
		t.Fatalf("the cancelled task: %+v, %v; want finished, cancelled", tk, err)
	}
}

// TestWorker_CancelChecksBackOff: while the server answers the leases
// check with 503, the worker's checks back off (fewer than one a
// second over 12 s, the back-off growing past the period), and the
// handler runs on; once the server answers again, a cancel reaches it.
func TestWorker_CancelChecksBackOff(t *testing.T) {
	var checks atomic.Int64
	var failing atomic.Bool
	failing.Store(true)
	url, stopServer, err := serveOn(nil, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/leases:cancelled" {
				checks.Add(1)
				if failing.Load() {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusServiceUnavailable)
					w.Write([]byte(`{"error":"hourglass: not ready"}`))
					return
				}
			}
			h.ServeHTTP(w, r)
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stopServer()
	c := clientOf(t, url)
	started := make(chan struct{})
	cause := make(chan error, 1)
	w := worker.New(c, worker.Options{Logger: quiet})
	w.Handle("q", func(ctx context.Context, tk *worker.Task) error {
		close(started)
		select {
		case <-ctx.Done():
			cause <- context.Cause(ctx)
		case <-time.After(40 * time.Second):
			cause <- errors.New("context not cancelled in 40 s")
		}
		return ctx.Err()
	})
	stop := start(t, w)
	defer stop()
	put(t, c, "q", "b", 1, api.PutRequest{TTR: new(api.Duration(time.Minute))})
	<-started
	time.Sleep(12 * time.Second)
	k := checks.Load()
	t.Logf("%d checks in 12 s answered 503", k)
	if k >= 10 {
		t.Fatalf("%d checks in 12 s answered 503; want them backing off", k)
	}
	failing.Store(false)
	if err := c.Cancel(context.Background(), "q", "b0"); err != nil {
		t.Fatal(err)
	}
	if err := <-cause; !errors.Is(err, worker.ErrCancelled) {
		t.Fatalf("cause %v; want ErrCancelled", err)
	}
}

// TestWorker_CancelPrefetched: a task reserved ahead of a free handler
// (Options.Prefetch) and cancelled while it waits never starts.
func TestWorker_CancelPrefetched(t *testing.T) {
	c := newClient(t)
	release := make(chan struct{})
	ran := make(chan string, 10)
	w := worker.New(c, worker.Options{Logger: quiet, Concurrency: 1, Prefetch: 1})
	w.Handle("q", func(ctx context.Context, tk *worker.Task) error {
		ran <- tk.ID
		if tk.ID == "first0" {
			<-release
		}
		return nil
	})
	stop := start(t, w)
	defer stop()
	put(t, c, "q", "first", 1, api.PutRequest{TTR: new(api.Duration(time.Minute))})
	if id := <-ran; id != "first0" {
		t.Fatalf("ran %s first", id)
	}
	put(t, c, "q", "ahead", 1, api.PutRequest{TTR: new(api.Duration(time.Minute))})
	eventually(t, "the second task reserved ahead", func() bool {
		tk, err := c.Get(context.Background(), "q", "ahead0")
		return err == nil && tk.State == api.StateReserved
	})
	if err := c.Cancel(context.Background(), "q", "ahead0"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // the worker's check, about once a second
	close(release)
	put(t, c, "q", "last", 1, api.PutRequest{})
	for id := range ran {
		if id == "ahead0" {
			t.Fatal("the task cancelled while it waited for a handler ran")
		}
		if id == "last0" {
			break
		}
	}
}
