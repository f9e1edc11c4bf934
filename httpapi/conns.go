package httpapi

import (
	"container/list"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
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
// request (a long-poll reserve counts; but see below for answers left
// unread) is a new one refused. A client
// whose idle connection is closed this way opens another on its next
// call, as after IdleTimeout.
//
// The listener learns which connections are idle from http.Server's
// ConnState hook: set the server's ConnState to the listener's.
//
// A client can also hold a connection by not reading its answers: it
// sends requests (pipelined, no token needed for /healthz or the
// dashboard's files) until the server's write blocks, and the
// connection stays busy for as long as it likes, since http.Server has
// no write timeout in serve (one would cut long-poll reserves short).
// So the connection bounds each write instead: every writeChunk of an
// answer must be taken by the client within writeTimeout, or the
// connection is closed; and at the limit, when no connection is idle, a
// new one closes the connection whose write has waited longest, if that
// is writeStall or more.

// Bounds of the writes to a client (see above).
const (
	// writeChunk is the most written to a connection in one call, each
	// under its own deadline: a slow client takes a large answer in
	// pieces, each in time.
	writeChunk = 64 << 10
	// writeTimeout bounds the time a client may take to accept a chunk:
	// 64 KiB a minute is far below any real link.
	writeTimeout = time.Minute
	// writeStall is how long a write must have waited before, at the
	// limit, its connection may be closed for a new one.
	writeStall = 5 * time.Second
)

// LimitListener returns a listener that keeps at most n connections
// accepted from l open at once, and its ConnState method, to be set as
// the http.Server's ConnState. A connection accepted at the limit closes
// the open connection idle the longest, or, when none is idle, the one
// whose write to its client has waited longest if that is writeStall or
// more; else it is itself closed at once. Closes and refusals are logged
// at most once a second, with their counts.
func LimitListener(l net.Listener, n int, log *slog.Logger) *LimitedListener {
	return &LimitedListener{Listener: l, max: n, log: log, writeTimeout: writeTimeout, writeStall: writeStall}
}

// LimitedListener is [LimitListener]'s. Accept is called by one
// goroutine (http.Server.Serve's); ConnState and the connections' Close
// by any. ConnState takes O(1), and so does Accept but at the limit
// with no connection idle: O(open connections) then.
type LimitedListener struct {
	net.Listener
	max int
	log *slog.Logger
	// writeTimeout and writeStall are the constants', but in tests.
	writeTimeout, writeStall time.Duration

	mu sync.Mutex
	// open counts the connections accepted and not closed. Guarded by
	// mu.
	open int
	// idle holds the open connections waiting for a request (states New
	// and Idle), longest waiting first; all holds every open connection.
	// Guarded by mu.
	idle, all list.List
	// closed and refused count, since logged (at logged), the idle
	// connections closed to make room and the new ones refused. Guarded
	// by mu.
	closed, refused int
	logged          time.Time
}

// Accept returns the next connection, making room for it at the limit
// by closing the connection idle the longest, or stalled the longest in
// a write; it closes the new one when there is neither.
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

// admit counts c in, closing idle or stalled connections while the
// limit is reached, and returns it; or closes it and returns nil when
// no open connection is either. It takes O(1), and O(open connections)
// at the limit with none idle.
func (l *LimitedListener) admit(c net.Conn) *limitConn {
	for {
		l.mu.Lock()
		if l.open < l.max {
			l.open++
			lc := &limitConn{Conn: c, l: l}
			lc.allElem = l.all.PushBack(lc)
			l.mu.Unlock()
			return lc
		}
		victim := l.idleOrStalled()
		if victim == nil {
			l.refused++
			l.logLimit()
			l.mu.Unlock()
			c.Close()
			return nil
		}
		l.closed++
		l.logLimit()
		l.mu.Unlock()
		// Close uncounts it (and takes it out of idle and all): the loop
		// then finds a place.
		victim.Close()
	}
}

// idleOrStalled returns the open connection idle the longest, or else
// the one whose write has waited longest if for writeStall or more, or
// nil. Called with mu held.
func (l *LimitedListener) idleOrStalled() *limitConn {
	if e := l.idle.Front(); e != nil {
		return e.Value.(*limitConn)
	}
	var stalled *limitConn
	since := time.Now().Add(-l.writeStall).UnixNano()
	for e := l.all.Front(); e != nil; e = e.Next() {
		c := e.Value.(*limitConn)
		if t := c.writing.Load(); t != 0 && t <= since {
			stalled, since = c, t
		}
	}
	return stalled
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
		l.log.Info("hourglass: HTTP connections at the limit: idle or stalled ones closed for new ones", "max_conns", l.max, "closed", l.closed)
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
	// writing is when the write under way began (UnixNano), 0 between
	// writes.
	writing atomic.Int64
	// elem is c's place in l.idle, nil while it serves a request;
	// allElem its place in l.all; gone is set once it is closed. Guarded
	// by l.mu.
	elem, allElem *list.Element
	gone          bool
}

// Write writes p in chunks of writeChunk, each of which the client must
// take within writeTimeout.
func (c *limitConn) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		now := time.Now()
		c.Conn.SetWriteDeadline(now.Add(c.l.writeTimeout))
		c.writing.Store(now.UnixNano())
		n, err := c.Conn.Write(p[:min(len(p), writeChunk)])
		c.writing.Store(0)
		written += n
		p = p[n:]
		if err != nil {
			return written, err
		}
	}
	return written, nil
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
		c.l.all.Remove(c.allElem)
	}
	c.l.mu.Unlock()
	return err
}
