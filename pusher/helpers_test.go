package pusher_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/broker"
	"github.com/hourglass-go/hourglass/internal/pipenet"
	"github.com/hourglass-go/hourglass/pusher"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/store/memstore"
	"github.com/hourglass-go/hourglass/task"
)

// openBroker opens a broker on a memory store, closed when the test
// ends, after the cleanups registered later (a pusher's Stop).
func openBroker(t testing.TB) *broker.Broker {
	t.Helper()
	b, err := broker.Open(memstore.New(), broker.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// recorder returns a receiver that answers 204 to every push and hands
// each request, and its body, to got and bodies (room for one each).
func recorder() (h http.Handler, got <-chan *http.Request, bodies <-chan []byte) {
	reqs, bs := make(chan *http.Request, 1), make(chan []byte, 1)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		reqs <- r
		bs <- b
		w.WriteHeader(http.StatusNoContent)
	}), reqs, bs
}

// setupInBubble is setup for a test in a synctest bubble: the receiver,
// h, is a real http.Server over in-memory connections, so that the
// pushes' times are the bubble's virtual ones, exact whatever the
// machine's load. Call it inside synctest.Test.
func setupInBubble(t *testing.T, h http.Handler, end task.Push, opts pusher.Options) (*withPush, *pusher.Pusher) {
	t.Helper()
	b := openBroker(t)
	l := pipenet.Listen()
	srv := &http.Server{Handler: h, ErrorLog: nil}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(l)
	}()
	if end.URL == "" {
		end.URL = "http://receiver.test/hook"
	}
	s := &withPush{Service: service.New(b), ends: map[string]*task.Push{"q": &end}}
	opts.Logger = quiet
	opts.Refresh = 50 * time.Millisecond
	p := pusher.New(s, opts)
	pusher.DialWith(p, l.Dial)
	p.Start()
	t.Cleanup(func() {
		if err := p.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
		srv.Close()
		<-served
	})
	return s, p
}
