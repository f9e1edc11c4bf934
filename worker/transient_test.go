package worker_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/worker"
)

// TestWorker_Unavailable answers 503 to every call but puts and gets for
// a while, as a recovering server does: the worker retries its reserves,
// touches and acks, and works the tasks once the server is back, each
// once.
func TestWorker_Unavailable(t *testing.T) {
	var down atomic.Bool
	var refused atomic.Int64
	url, stop, err := serveOn(nil, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			worker := strings.HasSuffix(r.URL.Path, "/reserve") || strings.HasSuffix(r.URL.Path, "/touch") || r.URL.Path == "/v1/acks"
			if worker && down.Load() {
				refused.Add(1)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusServiceUnavailable)
				w.Write([]byte(`{"error":"hourglass: not ready: recovering"}`))
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	c := clientOf(t, url)

	// The first task's handler runs through an outage of the touches
	// that it begins and that lasts 2 s (ttr 3 s, touched at 1.5 s,
	// retried after 0.1, 0.2, 0.4 s: through at about 2.2 s). The
	// outage's times count from the handler's start, and a touch has
	// 800 ms to spare: a loaded machine that starts the handler late, or
	// answers slowly, does not lose the lease.
	put(t, c, "q", "long", 1, api.PutRequest{TTR: new(api.Duration(3 * time.Second))})
	var calls atomic.Int64
	w := worker.New(c, worker.Options{Concurrency: 2, Logger: quiet})
	w.Handle("q", func(ctx context.Context, tk *worker.Task) error {
		calls.Add(1)
		if tk.ID == "long0" {
			down.Store(true)
			time.AfterFunc(2*time.Second, func() { down.Store(false) })
			select {
			case <-time.After(3500 * time.Millisecond):
			case <-ctx.Done():
				t.Errorf("handler cancelled: %v", context.Cause(ctx))
			}
		}
		return nil
	})
	stopWorker := start(t, w)
	defer stopWorker()
	eventually(t, "the first task's ack", func() bool {
		tk, err := c.Get(context.Background(), "q", "long0")
		return finished(tk, err)
	})

	// An outage with tasks waiting: they are worked once it ends. (A
	// reserve already waiting when it begins may take some before.)
	down.Store(true)
	refusedBefore := refused.Load()
	ids := put(t, c, "q", "t", 20, api.PutRequest{})
	eventually(t, "a refusal", func() bool { return refused.Load() > refusedBefore })
	time.Sleep(200 * time.Millisecond)
	down.Store(false)
	for _, id := range ids {
		eventually(t, "the acks", func() bool {
			tk, err := c.Get(context.Background(), "q", id)
			return finished(tk, err)
		})
	}
	if refusedBefore == 0 {
		t.Error("the first outage refused no call")
	}
	if n := calls.Load(); n != 21 {
		t.Errorf("%d calls, want 21: each task once", n)
	}
}

// TestWorker_Refused starts a worker before its server: it retries the
// refused connections and works the tasks once the server listens.
func TestWorker_Refused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // refused from now on
	c := clientOf(t, "http://"+addr)
	done := make(chan struct{})
	w := worker.New(c, worker.Options{Logger: quiet})
	w.Handle("q", func(ctx context.Context, tk *worker.Task) error {
		close(done)
		return nil
	})
	stopWorker := start(t, w)
	time.Sleep(300 * time.Millisecond) // a few refusals

	l, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the port was taken meanwhile: %v", err)
	}
	_, stop, err := serveOn(l, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	put(t, c, "q", "t", 1, api.PutRequest{})
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("the task was not worked")
	}
	stopWorker()
}
