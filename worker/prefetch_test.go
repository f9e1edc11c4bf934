package worker_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/worker"
)

// TestWorker_Prefetch works 16 tasks of ttr 1 s with 2 handlers that
// take 400 ms each and a prefetch of 4: the worker never holds more
// than 6 tasks (and the acks on their way) nor runs more than 2 handlers, releases the tasks it
// reserved ahead that no handler started by half their ttr (without
// counting the attempt), and works each task once.
func TestWorker_Prefetch(t *testing.T) {
	const n, concurrency, prefetch = 16, 2, 4
	c := newClient(t)
	ids := put(t, c, "q", "t", n, api.PutRequest{TTR: new(api.Duration(time.Second))})

	var mu sync.Mutex
	seen := map[string]int{} // guarded by mu
	var running, most, total atomic.Int64
	all := make(chan struct{})
	w := worker.New(c, worker.Options{Concurrency: concurrency, Prefetch: prefetch, Logger: quiet})
	w.Handle("q", func(ctx context.Context, tk *worker.Task) error {
		r := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); r > m && !most.CompareAndSwap(m, r); m = most.Load() {
		}
		if tk.Attempts != 1 {
			t.Errorf("task %s: attempt %d, want 1: a release does not count", tk.ID, tk.Attempts)
		}
		time.Sleep(400 * time.Millisecond)
		mu.Lock()
		seen[tk.ID]++
		mu.Unlock()
		if total.Add(1) == n {
			close(all)
		}
		return nil
	})
	stop := start(t, w)
	held := 0
	for done := false; !done; {
		select {
		case <-all:
			done = true
		case <-time.After(20 * time.Millisecond):
			qs, err := c.Queues(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for _, q := range qs {
				held = max(held, q.Reserved)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("%d of %d tasks worked", total.Load(), n)
		}
	}
	stop()
	if most.Load() > concurrency {
		t.Errorf("%d handlers at once, want at most %d", most.Load(), concurrency)
	}
	// A handler's slot is free once its ack is queued, so the acks on
	// their way (one per handler at most) show as reserved too.
	if held > 2*concurrency+prefetch {
		t.Errorf("%d tasks reserved at once, want at most %d", held, 2*concurrency+prefetch)
	}
	if held <= concurrency {
		t.Errorf("at most %d tasks reserved at once: none reserved ahead", held)
	}
	for _, id := range ids {
		if k := seen[id]; k != 1 {
			t.Errorf("task %s worked %d times", id, k)
		}
	}
}
