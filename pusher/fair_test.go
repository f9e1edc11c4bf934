package pusher_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/pusher"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// TestPusher_HangingEndpoint: a push queue whose endpoint accepts and
// never answers holds at most its share of the slots (half of them
// alone), and a second push queue, with a healthy endpoint, gets all its
// tasks pushed beside it long before the hanging pushes time out.
func TestPusher_HangingEndpoint(t *testing.T) {
	b := openBroker(t)
	release := make(chan struct{})
	var mu sync.Mutex
	hanging, most := 0, 0
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hanging++
		most = max(most, hanging)
		mu.Unlock()
		select {
		case <-release:
		case <-r.Context().Done():
		}
		mu.Lock()
		hanging--
		mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer hang.Close()
	got := make(chan string, 100)
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Hourglass-Task-Id")
		w.WriteHeader(http.StatusNoContent)
	}))
	defer ok.Close()
	s := &withPush{Service: service.New(b), ends: map[string]*task.Push{
		"hang": {URL: hang.URL, Timeout: 10 * time.Minute},
		"ok":   {URL: ok.URL},
	}}
	p := pusher.New(s, pusher.Options{Logger: quiet, Refresh: 50 * time.Millisecond})
	p.Start()
	defer func() {
		close(release)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	}()
	ctx := context.Background()
	var rs []task.PutRequest
	for i := range 200 {
		rs = append(rs, task.PutRequest{ID: fmt.Sprint("h", i), Payload: []byte("1")})
	}
	for _, r := range s.PutBatch(ctx, "hang", rs) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	// The hanging queue takes most of its share (a queue near its share
	// waits until a quarter of it is free), then no more.
	const share = pusher.DefaultConcurrency / 2
	waitFor(t, "the hanging endpoint to hold most of its share", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return hanging >= share*3/4
	})
	time.Sleep(100 * time.Millisecond)
	for i := range 20 {
		if _, _, err := s.Put(ctx, "ok", task.PutRequest{ID: fmt.Sprint("k", i), Payload: []byte("1")}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.After(time.Minute) // the hanging pushes time out after 10
	for n := 0; n < 20; n++ {
		select {
		case <-got:
		case <-deadline:
			t.Fatalf("%d of 20 tasks of the healthy queue pushed beside a hanging endpoint in a minute", n)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if most > share {
		t.Errorf("the hanging endpoint held %d pushes at once, more than its share %d", most, share)
	}
}
