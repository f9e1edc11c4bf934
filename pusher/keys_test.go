package pusher_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

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

// TestPusher_PerKeyConcurrency: pushes reserve through the same path as
// workers, so a queue's per_key.concurrency bounds the pushes of a key
// under way: with per_key 1 and keys A and B of 5 tasks each, a push
// slot of 8 and a receiver that holds each push, one push of each key
// is under way, never two of one key, and all 10 are pushed in the end.
func TestPusher_PerKeyConcurrency(t *testing.T) {
	var (
		mu               sync.Mutex
		inFlight, most   = map[string]int{}, map[string]int{}
		total, delivered int
	)
	hold := make(chan struct{})
	s, _ := setup(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("Hourglass-Task-Id")
		key := id[:1]
		mu.Lock()
		inFlight[key]++
		total++
		most[key] = max(most[key], inFlight[key])
		mu.Unlock()
		<-hold
		mu.Lock()
		inFlight[key]--
		delivered++
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}), task.Push{}, pusher.Options{Concurrency: 8})
	ctx := context.Background()
	if _, err := s.SetPolicy(ctx, "q", task.Policy{PerKey: &task.PerKey{Concurrency: 1}}); err != nil {
		t.Fatal(err)
	}
	var rs []task.PutRequest
	for i := range 5 {
		rs = append(rs, task.PutRequest{ID: fmt.Sprintf("A%d", i), Key: "A"}, task.PutRequest{ID: fmt.Sprintf("B%d", i), Key: "B"})
	}
	for i, r := range s.PutBatch(ctx, "q", rs) {
		if r.Err != nil {
			t.Fatalf("put %s: %v", rs[i].ID, r.Err)
		}
	}
	waitFor(t, "a push of each key under way", func() bool { mu.Lock(); defer mu.Unlock(); return total >= 2 })
	time.Sleep(100 * time.Millisecond) // room for a push the limit should have stopped
	mu.Lock()
	if total != 2 || inFlight["A"] != 1 || inFlight["B"] != 1 {
		t.Errorf("pushes under way: %v (%d started); want one of A and one of B", inFlight, total)
	}
	mu.Unlock()
	close(hold)
	waitFor(t, "all 10 pushed", func() bool { mu.Lock(); defer mu.Unlock(); return delivered == 10 })
	mu.Lock()
	defer mu.Unlock()
	if most["A"] != 1 || most["B"] != 1 {
		t.Fatalf("most pushes of a key under way at once: %v; want 1 each", most)
	}
}

// TestPusher_PerKeyRate: pushes reserve through the same path as
// workers, so a queue's per_key.rate spaces the pushes of a key: with a
// rate of 1 a 200 ms per key and keys A and B of 3 tasks each, put while
// the queue was paused, the first push of each key comes at once and the
// next ones each 200 ms after the one before, all 6 pushed in 400 ms.
//
// It runs in virtual time (a synctest bubble, the receiver a real HTTP
// server over in-memory connections): on the wall clock the gaps the
// receiver sees are the reserves' gaps plus the differences of two
// pushes' delays, which a loaded machine makes shorter than the rate
// allows without any fault (194 ms for 200 ms, under -race).
func TestPusher_PerKeyRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const every = 200 * time.Millisecond
		var (
			mu     sync.Mutex
			starts = map[string][]time.Duration{}
			total  int
		)
		var begin time.Time
		all := make(chan struct{})
		s, _ := setupInBubble(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id := r.Header.Get("Hourglass-Task-Id")
			mu.Lock()
			starts[id[:1]] = append(starts[id[:1]], time.Since(begin))
			if total++; total == 6 {
				close(all)
			}
			mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		}), task.Push{}, pusher.Options{Concurrency: 8})
		ctx := context.Background()
		if err := s.PauseQueue(ctx, "q", task.PauseIndefinitely); err != nil {
			t.Fatal(err)
		}
		if _, err := s.SetPolicy(ctx, "q", task.Policy{PerKey: &task.PerKey{Rate: &task.Rate{Limit: 1, Per: every}}}); err != nil {
			t.Fatal(err)
		}
		var rs []task.PutRequest
		for i := range 3 {
			rs = append(rs, task.PutRequest{ID: fmt.Sprintf("A%d", i), Key: "A"}, task.PutRequest{ID: fmt.Sprintf("B%d", i), Key: "B"})
		}
		for i, r := range s.PutBatch(ctx, "q", rs) {
			if r.Err != nil {
				t.Fatalf("put %s: %v", rs[i].ID, r.Err)
			}
		}
		time.Sleep(time.Second) // the pusher has read the queue
		mu.Lock()
		begin = time.Now()
		mu.Unlock()
		if err := s.PauseQueue(ctx, "q", 0); err != nil {
			t.Fatal(err)
		}
		select {
		case <-all:
		case <-time.After(time.Minute):
			t.Fatalf("%d of 6 pushed in a minute", total)
		}
		mu.Lock()
		defer mu.Unlock()
		for key, ts := range starts {
			t.Logf("pushes of %s at %v", key, ts)
			want := []time.Duration{0, every, 2 * every}
			if len(ts) != len(want) {
				t.Fatalf("%d pushes of key %s, want %d", len(ts), key, len(want))
			}
			for i := range ts {
				// The wheels under a reserve tick every few milliseconds.
				if ts[i] < want[i] || ts[i] > want[i]+20*time.Millisecond {
					t.Errorf("push %d of key %s at %v, want %v (a rate of 1 a %v)", i, key, ts[i], want[i], every)
				}
			}
		}
	})
}
