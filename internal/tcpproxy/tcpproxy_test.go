package tcpproxy_test

import (
	"bufio"
	"errors"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/internal/tcpproxy"
)

// echo starts a line echo server on loopback, closed when t ends.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					c.Write([]byte(line))
				}
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// roundTrip sends a line on c and reads the echo within wait.
func roundTrip(c net.Conn, wait time.Duration) error {
	c.SetDeadline(time.Now().Add(wait))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err == nil && line != "ping\n" {
		return errors.New("echo " + line)
	}
	return err
}

// TestProxy: Pass forwards; Blackhole keeps the connections open and
// answers nothing; Pass again resets the blackholed connections and
// forwards new ones; Cut resets open and new connections.
func TestProxy(t *testing.T) {
	p, err := tcpproxy.Start(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	const wait = 5 * time.Second // a bound, on a loaded machine
	const silence = 200 * time.Millisecond

	old := dial()
	if err := roundTrip(old, wait); err != nil {
		t.Fatalf("pass: %v", err)
	}

	p.Set(tcpproxy.Blackhole)
	if err := roundTrip(old, silence); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("blackhole, open connection: %v, want a timeout", err)
	}
	fresh := dial()
	if err := roundTrip(fresh, silence); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("blackhole, new connection: %v, want a timeout", err)
	}

	p.Set(tcpproxy.Pass)
	if err := roundTrip(old, wait); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("pass after blackhole, blackholed connection: %v, want a reset", err)
	}
	c := dial()
	if err := roundTrip(c, wait); err != nil {
		t.Fatalf("pass after blackhole, new connection: %v", err)
	}

	p.Set(tcpproxy.Cut)
	if err := roundTrip(c, wait); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("cut, open connection: %v, want a reset", err)
	}
	// A new connection is reset as soon as accepted: the dial or the
	// round trip fails.
	if nc, err := net.Dial("tcp", p.Addr()); err == nil {
		defer nc.Close()
		if err := roundTrip(nc, wait); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("cut, new connection: %v, want a reset", err)
		}
	}

	p.Set(tcpproxy.Pass)
	if err := roundTrip(dial(), wait); err != nil {
		t.Fatalf("pass after cut: %v", err)
	}
}

// TestProxy_Mute: Mute forwards the client's bytes and drops the
// server's answers, on open and new connections; Pass again resets the
// muted connections.
func TestProxy_Mute(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	heard := make(chan string, 16)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					heard <- line
					c.Write([]byte(line))
				}
			})
		}
	})
	defer func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}()
	p, err := tcpproxy.Start(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const wait = 5 * time.Second // a bound, on a loaded machine
	const silence = 200 * time.Millisecond
	old, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if err := roundTrip(old, wait); err != nil {
		t.Fatalf("pass: %v", err)
	}
	<-heard
	p.Set(tcpproxy.Mute)
	fresh, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	for name, c := range map[string]net.Conn{"open": old, "new": fresh} {
		if err := roundTrip(c, silence); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("mute, %s connection: %v, want a timeout", name, err)
		}
		select {
		case <-heard:
		case <-time.After(wait):
			t.Fatalf("mute, %s connection: the server did not get the client's bytes", name)
		}
	}
	p.Set(tcpproxy.Pass)
	if err := roundTrip(old, wait); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("pass after mute, muted connection: %v, want a reset", err)
	}
}
