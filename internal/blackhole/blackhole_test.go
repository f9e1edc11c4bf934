package blackhole_test

import (
	"net"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/internal/blackhole"
)

// TestServer: a connection is accepted, its accept time told, and
// nothing comes back: a read ends only at its deadline.
func TestServer(t *testing.T) {
	s := blackhole.Start(t)
	c, err := net.DialTimeout("tcp", s.Addr(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case <-s.Accepted():
	case <-time.After(10 * time.Second):
		t.Fatal("no accept told within 10 s")
	}
	if n := s.Count(); n != 1 {
		t.Errorf("Count() = %d, want 1", n)
	}
	c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil || !err.(net.Error).Timeout() {
		t.Errorf("read = %d, %v; want nothing until the deadline", n, err)
	}
}
