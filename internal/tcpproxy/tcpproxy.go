// Package tcpproxy is a TCP proxy on the loopback interface for tests
// that cut a process off from another one, a cluster node from its
// PostgreSQL, the way networks fail:
//
//   - [Pass] forwards every byte both ways.
//   - [Cut] resets every connection, open or new (a peer that went away,
//     or a firewall that rejects): the client learns at once.
//   - [Blackhole] forwards nothing and tells nothing: the connections
//     stay open, what the client sends is read and dropped, and no
//     answer comes (a partition that drops packets, the common one in a
//     cloud). Only the client's own deadlines end its waits.
//   - [Mute] forwards what the client sends and drops what the server
//     answers: the server does the work, the client never hears of it
//     (an answer lost on its way back).
//
// Connections that were blackholed or muted are reset when the link passes again:
// bytes were dropped, so their streams cannot be resumed. A real network
// would resume them or time them out; either way the client must open
// new ones.
package tcpproxy

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Mode is what the proxy does with the link.
type Mode int

// The modes of the link.
const (
	Pass Mode = iota
	Cut
	Blackhole
	Mute
)

// dialTimeout bounds the proxy's connection to its target.
const dialTimeout = 5 * time.Second

// Proxy forwards connections accepted on Addr to its target in the mode
// set. It is safe for concurrent use by multiple goroutines.
type Proxy struct {
	target string
	ln     net.Listener
	wg     sync.WaitGroup
	// accepted counts the connections accepted.
	accepted atomic.Int64

	mu sync.Mutex
	// mode is the link's. Guarded by mu.
	mode Mode
	// conns are the connections open. Guarded by mu.
	conns map[*link]bool
	// closed by Close. Guarded by mu.
	closed bool
}

// link is one client's connection and, unless it was accepted while the
// link was blackholed, its connection to the target.
type link struct {
	client, server net.Conn // server nil when never connected
	// holed: the link was blackholed; its bytes are dropped. muted: the
	// link was muted; the server's bytes are dropped. Guarded by the
	// proxy's mu.
	holed, muted bool
}

// Start listens on 127.0.0.1 on a free port and forwards what it accepts
// to target (HOST:PORT), in Pass mode.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: target, ln: ln, conns: make(map[*link]bool)}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Accepted returns how many connections the proxy accepted, in any mode.
func (p *Proxy) Accepted() int64 { return p.accepted.Load() }

// Addr returns the address the proxy listens on, HOST:PORT.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Set changes the link's mode: to Cut, it resets every connection; to
// Blackhole, it stops forwarding on every connection; to Mute, it stops
// forwarding the server's bytes on every connection; to Pass, it resets
// the connections that were blackholed or muted. It returns once that is done
// (bytes already read may still be delivered).
func (p *Proxy) Set(m Mode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = m
	for l := range p.conns {
		switch {
		case m == Cut, m == Pass && (l.holed || l.muted):
			l.reset()
		case m == Blackhole:
			l.holed = true
		case m == Mute:
			l.muted = true
		}
	}
}

// Close stops listening, resets every connection and waits for the
// proxy's goroutines to exit.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for l := range p.conns {
		l.reset()
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

// reset closes both of l's connections with a reset (no linger).
func (l *link) reset() {
	for _, c := range []net.Conn{l.client, l.server} {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		if c != nil {
			c.Close()
		}
	}
}

// accept is the listener's goroutine.
func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.accepted.Add(1)
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve runs one client's connection until either side closes it.
func (p *Proxy) serve(c net.Conn) {
	defer p.wg.Done()
	l := &link{client: c}
	p.mu.Lock()
	mode, closed := p.mode, p.closed
	l.holed, l.muted = mode == Blackhole, mode == Mute
	p.mu.Unlock()
	if closed || mode == Cut {
		l.reset()
		return
	}
	if mode == Pass || mode == Mute {
		s, err := net.DialTimeout("tcp", p.target, dialTimeout)
		if err != nil {
			l.reset()
			return
		}
		l.server = s
	}
	// The mode may have changed while the proxy dialed.
	p.mu.Lock()
	switch {
	case p.closed, p.mode == Cut, (p.mode == Pass || p.mode == Mute) && l.server == nil:
		p.mu.Unlock()
		l.reset()
		return
	case p.mode == Blackhole:
		l.holed = true
	case p.mode == Mute:
		l.muted = true
	}
	p.conns[l] = true
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.conns, l)
		p.mu.Unlock()
		l.reset()
	}()
	if l.server == nil {
		io.Copy(io.Discard, c) // blackholed from the start: until reset
		return
	}
	done := make(chan struct{}, 2)
	go func() { p.copy(l, l.server, l.client); done <- struct{}{} }()
	go func() { p.copy(l, l.client, l.server); done <- struct{}{} }()
	<-done
	// One side ended: end the other.
	l.reset()
	<-done
}

// copy forwards from src to dst what it reads while l passes, and drops
// it once l was blackholed (or muted, src being the server), until src
// fails.
func (p *Proxy) copy(l *link, dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		k, err := src.Read(buf)
		if k > 0 {
			p.mu.Lock()
			holed := l.holed || l.muted && src == l.server
			p.mu.Unlock()
			if !holed {
				if _, werr := dst.Write(buf[:k]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}
