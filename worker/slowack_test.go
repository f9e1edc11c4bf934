package worker_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/worker"
)

// TestWorker_SlowAck holds the worker's first ack request (POST
// /v1/acks) at the real server, as a commit waiting for a slow fsync
// would, until the worker has handled far more tasks than it has
// handlers: a pending ack must not keep the handlers' slots, or the
// worker stops reserving until the ack is answered and every task of
// another key waits that long (issue 42's small key under a flood).
func TestWorker_SlowAck(t *testing.T) {
	const n, concurrency, during = 600, 4, 400
	var handled atomic.Int64
	release := make(chan struct{})
	var once sync.Once
	held := make(chan struct{})
	url, stop, err := serveOn(nil, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && r.URL.Path == "/v1/acks" {
				first := false
				once.Do(func() { first = true })
				if first {
					close(held)
					<-release
				}
			}
			h.ServeHTTP(w, r)
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	c := clientOf(t, url)
	put(t, c, "q", "t", n, api.PutRequest{})

	w := worker.New(c, worker.Options{Concurrency: concurrency, Logger: quiet})
	all := make(chan struct{})
	w.Handle("q", func(context.Context, *worker.Task) error {
		if handled.Add(1) == n {
			close(all)
		}
		return nil
	})
	stopRun := start(t, w)
	defer stopRun()
	released := sync.OnceFunc(func() { close(release) })
	defer released() // before stopRun: Run waits for the held ack

	<-held
	// The ack is held; a worker whose slots wait for it stops at a few
	// times its concurrency. Nothing here depends on how fast the
	// machine is: the bound only ends a test that failed.
	deadline := time.Now().Add(10 * time.Second)
	for handled.Load() < during && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := handled.Load(); got < during {
		t.Fatalf("%d tasks handled while an ack was held, want at least %d (the worker stopped reserving)", got, during)
	}
	released()
	select {
	case <-all:
	case <-time.After(20 * time.Second):
		t.Fatalf("%d of %d tasks handled", handled.Load(), n)
	}
}
