package pusher_test

import (
	"context"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/broker"
	"github.com/hourglass-go/hourglass/pusher"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/store/memstore"
	"github.com/hourglass-go/hourglass/task"
)

// pipeListener is a net.Listener of in-memory connections (net.Pipe):
// an HTTP server on it runs in a synctest bubble, where a socket's
// goroutines would never be durably blocked.
type pipeListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return &net.UnixAddr{Name: "pipe", Net: "pipe"} }

// dial is a DialContext that connects to l, whatever the address.
func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	a, z := net.Pipe()
	select {
	case l.conns <- z:
		return a, nil
	case <-l.closed:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// setupInBubble is setup for a test in a synctest bubble: the receiver,
// h, is a real http.Server over in-memory connections, so that the
// pushes' times are the bubble's virtual ones, exact whatever the
// machine's load. Call it inside synctest.Test.
func setupInBubble(t *testing.T, h http.Handler, end task.Push, opts pusher.Options) (*withPush, *pusher.Pusher) {
	t.Helper()
	b, err := broker.Open(memstore.New(), broker.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	l := newPipeListener()
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
	pusher.DialWith(p, l.dial)
	p.Start()
	t.Cleanup(func() {
		if err := p.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
		srv.Close()
		<-served
		b.Close()
	})
	return s, p
}
