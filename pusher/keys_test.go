package pusher_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/hourglass-go/hourglass/pusher"
	"github.com/hourglass-go/hourglass/task"
)

// TestPusher_FairKeys: pushes reserve through the same path as workers,
// so they take a queue's keys in turn: with key A's backlog of 500 ready
// tasks and keys B to K one each, put while the queue was paused, every
// one of B to K is pushed among the first 20 pushes.
func TestPusher_FairKeys(t *testing.T) {
	var (
		mu    sync.Mutex
		order []string
	)
	s, _ := setup(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		order = append(order, r.Header.Get("Hourglass-Task-Id"))
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}), task.Push{}, pusher.Options{Concurrency: 2})
	ctx := context.Background()
	if err := s.PauseQueue(ctx, "q", task.PauseIndefinitely); err != nil {
		t.Fatal(err)
	}
	var rs []task.PutRequest
	for i := range 500 {
		rs = append(rs, task.PutRequest{ID: fmt.Sprintf("a%d", i), Key: "A"})
	}
	for c := 'B'; c <= 'K'; c++ {
		rs = append(rs, task.PutRequest{ID: "small-" + string(c), Key: string(c)})
	}
	for i, r := range s.PutBatch(ctx, "q", rs) {
		if r.Err != nil {
			t.Fatalf("put %s: %v", rs[i].ID, r.Err)
		}
	}
	if err := s.PauseQueue(ctx, "q", 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "20 pushes", func() bool { mu.Lock(); defer mu.Unlock(); return len(order) >= 20 })
	mu.Lock()
	first := slices.Clone(order[:20])
	mu.Unlock()
	for c := 'B'; c <= 'K'; c++ {
		if !slices.Contains(first, "small-"+string(c)) {
			t.Fatalf("small-%c not among the first 20 pushes: %v", c, first)
		}
	}
}
