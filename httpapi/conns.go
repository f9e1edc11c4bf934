package httpapi

import (
	"container/list"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Connections a client holds (issue 39): the listener bounds the open
// connections below the process's file descriptors, and what it cannot
// let a client do is lock the others out by holding connections that do
// nothing. http.Server closes a keep-alive connection after IdleTimeout
// (2 minutes in serve) and one that sends no request after
// ReadHeaderTimeout (10 s); until then, 4,096 connections that each sent
// a /healthz (no token needed) and stayed open filled --max-conns and
// every new connection was closed at once. So, at the limit, a new
// connection takes the place of the one that has waited longest without
// a request (a keep-alive connection between requests, or one that has
// sent nothing yet): that one is closed, as IdleTimeout would close it,
// and the new one is served. Only when every connection is serving a
// request (a long-poll reserve counts) is a new one refused. A client
// whose idle connection is closed this way opens another on its next
// call, as after IdleTimeout.
//
// The listener learns which connections are idle from http.Server's
// ConnState hook: set the server's ConnState to the listener's.

// LimitListener returns a listener that keeps at most n connections
// accepted from l open at once, and its ConnState method, to be set as
// the http.Server's ConnState. A connection accepted at the limit closes
// the open connection idle the longest, or, when none is idle, is itself
// closed at once. Closes and refusals are logged at most once a second,
// with their counts.
func LimitListener(l net.Listener, n int, log *slog.Logger) *LimitedListener {
	return &LimitedListener{Listener: l, max: n, log: log}
}

// LimitedListener is [LimitListener]'s. Accept is called by one
// goroutine (http.Server.Serve's); ConnState and the connections' Close
// by any. Accept and ConnState take O(1).
type LimitedListener struct {
	net.Listener
	max int
	log *slog.Logger

	mu sync.Mutex
	// open counts the connections accepted and not closed. Guarded by
	// mu.
	open int
	// idle holds the open connections waiting for a request (states New
	// and Idle), longest waiting first. Guarded by mu.
	idle list.List
	// closed and refused count, since logged (at logged), the idle
	// connections closed to make room and the new ones refused. Guarded
	// by mu.
	closed, refused int
	logged          time.Time
}

// Accept returns the next connection, making room for it at the limit
// by closing the connection idle the longest; it closes the new one
// when every open connection is serving a request.
func (l *LimitedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if lc := l.admit(c); lc != nil {
			return lc, nil
		}
	}
}

// admit counts c in, closing idle connections while the limit is
// reached, and returns it; or closes it and returns nil when no open
// connection is idle.
func (l *LimitedListener) admit(c net.Conn) *limitConn {
	for {
		l.mu.Lock()
		if l.open < l.max {
			l.open++
			l.mu.Unlock()
			return &limitConn{Conn: c, l: l}
		}
		e := l.idle.Front()
		if e == nil {
			l.refused++
			l.logLimit()
			l.mu.Unlock()
			c.Close()
			return nil
		}
		oldest := e.Value.(*limitConn)
		l.closed++
		l.logLimit()
		l.mu.Unlock()
		// Close uncounts it (and takes it out of idle): the loop then
		// finds a place, unless a request came on it meanwhile.
		oldest.Close()
	}
}

// logLimit logs the closes and refusals counted, at most once a second.
// Called with mu held.
func (l *LimitedListener) logLimit() {
	now := time.Now()
	if now.Sub(l.logged) < time.Second {
		return
	}
	if l.refused > 0 {
		l.log.Warn("hourglass: HTTP connections refused: at the limit, every connection serving a request", "max_conns", l.max, "refused", l.refused)
	}
	if l.closed > 0 {
		l.log.Info("hourglass: HTTP connections at the limit: idle ones closed for new ones", "max_conns", l.max, "closed", l.closed)
	}
	l.logged, l.refused, l.closed = now, 0, 0
}

// ConnState is the http.Server's ConnState hook: it keeps the
// connections waiting for a request (StateNew, StateIdle) in the order
// they began to wait. Connections not from l are ignored.
func (l *LimitedListener) ConnState(c net.Conn, state http.ConnState) {
	lc, ok := c.(*limitConn)
	if !ok || lc.l != l {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if lc.gone {
		return
	}
	if lc.elem != nil {
		l.idle.Remove(lc.elem)
		lc.elem = nil
	}
	if state == http.StateNew || state == http.StateIdle {
		lc.elem = l.idle.PushBack(lc)
	}
}

// limitConn is an accepted connection, counted until it is closed.
type limitConn struct {
	net.Conn
	l *LimitedListener
	// elem is c's place in l.idle, nil while it serves a request; gone is
	// set once it is closed. Guarded by l.mu.
	elem *list.Element
	gone bool
}

// Close closes the connection and uncounts it, once.
func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.l.mu.Lock()
	if !c.gone {
		c.gone = true
		c.l.open--
		if c.elem != nil {
			c.l.idle.Remove(c.elem)
			c.elem = nil
		}
	}
	c.l.mu.Unlock()
	return err
}
