package worker_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/client"
	"github.com/hourglass-go/hourglass/worker"
)

// TestWorker_ManyTasks works 2,000 tasks over two queues with 16
// handlers: each is worked exactly once, never more than 16 at once, and
// all are acked.
func TestWorker_ManyTasks(t *testing.T) {
	const n, concurrency = 2000, 16
	var acks, reserves atomic.Int64 // requests
	url, stopServer, err := serveOn(nil, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/v1/acks":
				acks.Add(1)
			case "/v1/reserve":
				reserves.Add(1)
			}
			h.ServeHTTP(w, r)
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stopServer()
	c := clientOf(t, url)
	ids := append(put(t, c, "a", "a", n/2, api.PutRequest{}), put(t, c, "b", "b", n/2, api.PutRequest{})...)

	var mu sync.Mutex
	seen := map[string]int{} // guarded by mu
	var running, most, total atomic.Int64
	all := make(chan struct{})
	h := func(ctx context.Context, tk *worker.Task) error {
		r := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); r > m && !most.CompareAndSwap(m, r); m = most.Load() {
		}
		time.Sleep(time.Millisecond)
		mu.Lock()
		seen[tk.Queue+"/"+tk.ID]++
		mu.Unlock()
		if total.Add(1) == n {
			close(all)
		}
		return nil
	}
	w := worker.New(c, worker.Options{Concurrency: concurrency, Logger: quiet})
	w.Handle("a", h)
	w.Handle("b", h)
	stop := start(t, w)
	select {
	case <-all:
	case <-time.After(60 * time.Second):
		t.Fatalf("%d of %d tasks worked", total.Load(), n)
	}
	stop()

	if most.Load() > concurrency {
		t.Errorf("%d handlers at once, want at most %d", most.Load(), concurrency)
	}
	t.Logf("%d handlers at most at once; %d reserves, %d ack requests", most.Load(), reserves.Load(), acks.Load())
	for _, id := range ids {
		q := id[:1]
		if k := seen[q+"/"+id]; k != 1 {
			t.Errorf("task %s/%s worked %d times", q, id, k)
		}
	}
	for _, q := range []string{"a", "b"} {
		if left, _, err := c.ListTasks(context.Background(), q, "", "", 0); err != nil || len(left) != 0 {
			t.Errorf("queue %s keeps %d tasks (%v), want none: all acked", q, len(left), err)
		}
	}
}

// TestWorker_LongHandler runs a handler for 2.5 s on a task whose ttr is
// 1 s: the worker keeps its lease, and the task is worked once and
// acked.
func TestWorker_LongHandler(t *testing.T) {
	c := newClient(t)
	// A lease of 2 s renewed through a 3 s handler, a touch each second:
	// a touch has the half lease left, a second, to get through. A 200 ms
	// lease was lost now and then on a loaded machine, where a touch can
	// wait longer than the 100 ms left at its renewal.
	put(t, c, "slow", "s", 1, api.PutRequest{TTR: new(api.Duration(2 * time.Second))})
	var calls atomic.Int64
	done := make(chan struct{})
	w := worker.New(c, worker.Options{Logger: quiet})
	w.Handle("slow", func(ctx context.Context, tk *worker.Task) error {
		if calls.Add(1) > 1 {
			t.Errorf("task worked again (attempt %d): its lease was not kept", tk.Attempts)
			return nil
		}
		defer close(done)
		select {
		case <-time.After(3 * time.Second):
			return nil
		case <-ctx.Done():
			t.Errorf("handler cancelled: %v", context.Cause(ctx))
			return ctx.Err()
		}
	})
	stop := start(t, w)
	<-done
	eventually(t, "the ack", func() bool {
		tk, err := c.Get(context.Background(), "slow", "s0")
		return finished(tk, err)
	})
	time.Sleep(2200 * time.Millisecond) // a redelivery would come now
	stop()
	if calls.Load() != 1 {
		t.Errorf("%d calls, want 1", calls.Load())
	}
}

// TestWorker_LeaseLost deletes a task while its handler runs: the
// handler's context ends with ErrLeaseLost, and the worker goes on.
func TestWorker_LeaseLost(t *testing.T) {
	c := newClient(t)
	put(t, c, "q", "gone", 1, api.PutRequest{TTR: new(api.Duration(200 * time.Millisecond))})
	started := make(chan struct{})
	cause := make(chan error, 1)
	w := worker.New(c, worker.Options{Logger: quiet})
	w.Handle("q", func(ctx context.Context, tk *worker.Task) error {
		if tk.ID != "gone0" {
			return nil
		}
		close(started)
		select {
		case <-ctx.Done():
			cause <- context.Cause(ctx)
		case <-time.After(5 * time.Second):
			cause <- errors.New("context not cancelled")
		}
		return ctx.Err()
	})
	stop := start(t, w)
	defer stop()
	<-started
	if err := c.Delete(context.Background(), "q", "gone0"); err != nil {
		t.Fatal(err)
	}
	if err := <-cause; !errors.Is(err, worker.ErrLeaseLost) {
		t.Fatalf("cause %v, want ErrLeaseLost", err)
	}
	// The worker keeps working.
	put(t, c, "q", "next", 1, api.PutRequest{})
	eventually(t, "the next task's ack", func() bool {
		tk, err := c.Get(context.Background(), "q", "next0")
		return finished(tk, err)
	})
}

// TestWorker_Failures fails a task's first attempt by an error or a
// panic: the task is nacked with the failure's text and comes back, and
// the worker keeps running.
func TestWorker_Failures(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail func() error
		text string
	}{
		{"error", func() error { return errors.New("no route to the mail host") }, "no route to the mail host"},
		{"wrapped", func() error { return fmt.Errorf("sending: %w", errors.New("refused")) }, "sending: refused"},
		{"panic", func() error { panic("boom") }, "panic: boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t)
			put(t, c, "q", "t", 1, api.PutRequest{})
			second := make(chan *worker.Task, 1)
			w := worker.New(c, worker.Options{Logger: quiet})
			w.Handle("q", func(ctx context.Context, tk *worker.Task) error {
				if tk.Attempts == 1 {
					return tc.fail()
				}
				second <- tk
				return nil
			})
			stop := start(t, w)
			defer stop()
			var tk *worker.Task
			select {
			case tk = <-second:
			case <-time.After(10 * time.Second):
				t.Fatal("the failed task did not come back")
			}
			if tk.LastError != tc.text {
				t.Errorf("last error %q, want %q", tk.LastError, tc.text)
			}
		})
	}
}

// TestWorker_RetryAfter nacks a task with RetryAfter, wrapped: it comes
// back after the delay, not before.
func TestWorker_RetryAfter(t *testing.T) {
	const delay = 400 * time.Millisecond
	c := newClient(t)
	put(t, c, "q", "t", 1, api.PutRequest{})
	var failed atomic.Int64 // Unix ns, set by the first attempt
	back := make(chan time.Duration, 1)
	w := worker.New(c, worker.Options{Logger: quiet})
	w.Handle("q", func(ctx context.Context, tk *worker.Task) error {
		if tk.Attempts == 1 {
			failed.Store(time.Now().UnixNano())
			return fmt.Errorf("rate limited: %w", worker.RetryAfter(delay, errors.New("429")))
		}
		back <- time.Since(time.Unix(0, failed.Load()))
		return nil
	})
	stop := start(t, w)
	defer stop()
	select {
	case d := <-back:
		if d < delay {
			t.Errorf("back after %s, want at least %s", d, delay)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the task did not come back")
	}
}

// TestWorker_Fail buries a task whose handler returns Fail, wrapped.
func TestWorker_Fail(t *testing.T) {
	c := newClient(t)
	put(t, c, "q", "t", 1, api.PutRequest{})
	w := worker.New(c, worker.Options{Logger: quiet})
	w.Handle("q", func(ctx context.Context, tk *worker.Task) error {
		return fmt.Errorf("parsing: %w", worker.Fail(errors.New("not JSON")))
	})
	stop := start(t, w)
	defer stop()
	eventually(t, "a dead task", func() bool {
		tk, err := c.Get(context.Background(), "q", "t0")
		return err == nil && tk.State == api.StateDead && tk.LastError == "parsing: not JSON"
	})
}

// TestWorker_Shutdown stops a worker whose handler ignores the shutdown
// until its context is cancelled: the handler's context ends with
// ErrShutdown after ShutdownTimeout, and its task is released, its
// attempt not counted.
func TestWorker_Shutdown(t *testing.T) {
	const timeout = 200 * time.Millisecond
	c := newClient(t)
	put(t, c, "q", "t", 1, api.PutRequest{})
	before, err := c.Get(context.Background(), "q", "t0")
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	cause := make(chan error, 1)
	w := worker.New(c, worker.Options{Logger: quiet, ShutdownTimeout: timeout})
	w.Handle("q", func(ctx context.Context, tk *worker.Task) error {
		close(started)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return ctx.Err()
	})
	stop := start(t, w)
	<-started
	begin := time.Now()
	stop()
	if d := time.Since(begin); d < timeout {
		t.Errorf("Run returned after %s, before the shutdown timeout %s", d, timeout)
	}
	if err := <-cause; !errors.Is(err, worker.ErrShutdown) {
		t.Errorf("cause %v, want ErrShutdown", err)
	}
	after, err := c.Get(context.Background(), "q", "t0")
	if err != nil || after.State != api.StateReady || after.Attempts != before.Attempts {
		t.Errorf("after the shutdown: %+v, %v; want ready with %d attempts", after, err, before.Attempts)
	}
}

// TestWorker_ShutdownWaits stops a worker while its handler runs: Run
// waits for the handler, which finishes and is acked.
func TestWorker_ShutdownWaits(t *testing.T) {
	c := newClient(t)
	put(t, c, "q", "t", 1, api.PutRequest{})
	started := make(chan struct{})
	w := worker.New(c, worker.Options{Logger: quiet})
	w.Handle("q", func(ctx context.Context, tk *worker.Task) error {
		close(started)
		time.Sleep(200 * time.Millisecond)
		return ctx.Err()
	})
	stop := start(t, w)
	<-started
	stop()
	if tk, err := c.Get(context.Background(), "q", "t0"); !finished(tk, err) {
		t.Errorf("Get after the shutdown: %+v, %v, want its finished record: acked", tk, err)
	}
}

// TestWorker_Misuse: Run without handlers or twice is an error, Handle
// after Run a panic.
func TestWorker_Misuse(t *testing.T) {
	c := newClient(t)
	if err := worker.New(c, worker.Options{}).Run(context.Background()); err == nil {
		t.Error("Run without handlers: no error")
	}
	w := worker.New(c, worker.Options{Logger: quiet})
	called := make(chan struct{}, 1)
	w.Handle("q", func(context.Context, *worker.Task) error {
		called <- struct{}{}
		return nil
	})
	stop := start(t, w)
	put(t, c, "q", "t", 1, api.PutRequest{})
	<-called // Run runs
	if err := w.Run(context.Background()); err == nil {
		t.Error("second Run: no error")
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Handle after Run: no panic")
			}
		}()
		w.Handle("r", func(context.Context, *worker.Task) error { return nil })
	}()
	stop()
}

// finished reports whether a Get answered that the task is no longer
// live: its finished record (from the server's history), or not found.
func finished(tk api.Task, err error) bool {
	return errors.Is(err, client.ErrNotFound) || err == nil && tk.State == api.StateFinished
}
