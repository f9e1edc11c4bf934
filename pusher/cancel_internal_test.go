package pusher

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/broker"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/store/memstore"
	"github.com/hourglass-go/hourglass/task"
)

// TestPush_CancelledBeforeItBegan: a task cancelled between its reserve
// and its push, before the push watches its lease, is not pushed: the
// service's memory of leases ended tells the push.
func TestPush_CancelledBeforeItBegan(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	b, err := broker.Open(memstore.New(), broker.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	s := service.New(b)
	var got atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got.Add(1) }))
	defer srv.Close()
	p := New(s, Options{Logger: quiet})
	p.Start()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		p.Stop(ctx)
	}()
	ctx := context.Background()
	if _, _, err := s.Put(ctx, "q", task.PutRequest{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	ts, err := s.Reserve(ctx, "q", 1, 0)
	if err != nil || len(ts) != 1 {
		t.Fatalf("reserve: %d tasks, %v", len(ts), err)
	}
	if err := s.Cancel(ctx, "q", "a"); err != nil {
		t.Fatal(err)
	}
	p.push(ts[0], task.Push{URL: srv.URL})
	if n := got.Load(); n != 0 {
		t.Fatalf("the cancelled task was pushed %d times", n)
	}
}
