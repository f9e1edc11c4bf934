// Package pipenet is a [net.Listener] of in-memory connections
// ([net.Pipe]) for tests: a server on it, and the clients that [Listener.Dial]
// it, run in a testing/synctest bubble, where a socket's goroutines
// would never be durably blocked and virtual time would not advance.
// The connections are real net.Conns, so the server is the real one
// (an http.Server, the beanstalk server), not a fake.
package pipenet

import (
	"context"
	"net"
	"sync"
)

// Listener is a net.Listener whose connections come from [Listener.Dial].
// Make one with [Listen]. It is safe for concurrent use.
type Listener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

// Listen returns a listener with no connection yet.
func Listen() *Listener {
	return &Listener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

// Accept waits for a Dial, and returns its server side; after Close it
// returns net.ErrClosed.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

// Close stops the listener; the connections open stay open. It may be
// called more than once.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

// Addr returns a placeholder address, "pipe".
func (l *Listener) Addr() net.Addr { return &net.UnixAddr{Name: "pipe", Net: "pipe"} }

// Dial connects to the listener, whatever network and address say (it
// fits http.Transport.DialContext), once an Accept takes the connection,
// and returns the client side.
func (l *Listener) Dial(ctx context.Context, _, _ string) (net.Conn, error) {
	a, z := net.Pipe()
	select {
	case l.conns <- z:
		return a, nil
	case <-l.closed:
		a.Close()
		z.Close()
		return nil, net.ErrClosed
	case <-ctx.Done():
		a.Close()
		z.Close()
		return nil, ctx.Err()
	}
}
