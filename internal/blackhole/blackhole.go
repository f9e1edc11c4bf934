// Package blackhole is a TCP server on loopback for tests of clients'
// deadlines: it accepts connections and then neither reads nor answers,
// as a server gone without a word behind a firewall that drops
// everything looks to a client whose connection is open. Only the
// client's own deadlines end its waits.
package blackhole

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// acceptedKept is how many accept times [Server.Accepted] keeps.
const acceptedKept = 16

// Server is a black hole listening on 127.0.0.1. Make one with [Start].
type Server struct {
	addr     string
	accepted chan time.Time
	count    atomic.Int64 // connections accepted
}

// Start listens on 127.0.0.1 on a free port until the test ends, when
// the listener and every connection it accepted close and its goroutine
// has ended.
func Start(t testing.TB) *Server {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{addr: l.Addr().String(), accepted: make(chan time.Time, acceptedKept)}
	var mu sync.Mutex
	var conns []net.Conn // guarded by mu
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s.count.Add(1)
			select {
			case s.accepted <- time.Now():
			default:
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return s
}

// Addr returns the address it listens on, HOST:PORT.
func (s *Server) Addr() string { return s.addr }

// Accepted gets the time of each connection accepted, the first 16 that
// no one took yet.
func (s *Server) Accepted() <-chan time.Time { return s.accepted }

// Count returns how many connections it has accepted. It is safe for
// concurrent use.
func (s *Server) Count() int { return int(s.count.Load()) }
