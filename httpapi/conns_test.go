package httpapi_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/httpapi"
)

// limitedServer serves h on loopback through a LimitListener of n
// connections, with header and idle timeouts far longer than any test,
// so that only the listener closes connections. It returns the address.
func limitedServer(t *testing.T, n int, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ll := httpapi.LimitListener(ln, n, quiet)
	hs := &http.Server{Handler: h, ConnState: ll.ConnState, ReadHeaderTimeout: time.Hour, IdleTimeout: time.Hour}
	done := make(chan struct{})
	go func() {
		defer close(done)
		hs.Serve(ll)
	}()
	t.Cleanup(func() {
		hs.Close()
		<-done
	})
	return ln.Addr().String()
}

// rawConn is one client connection sending requests by hand.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	r  *bufio.Reader
}

// dial opens a connection to addr, closed at the test's end.
func dial(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc, r: bufio.NewReader(nc)}
}

// get sends GET path and returns the answer's status, or the error that
// ended the wait for it (bounded by a generous 10 s: a loaded machine).
func (c *rawConn) get(path string) (int, error) {
	c.nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(c.nc, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, c.nc.RemoteAddr()); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// closed reports whether the server has closed c, waiting up to 10 s
// for it.
func (c *rawConn) closed() bool {
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := c.r.ReadByte()
	ne, ok := err.(net.Error)
	return err != nil && !(ok && ne.Timeout())
}

// okHandler answers 200 to everything.
var okHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})

// TestLimitListener_IdleMakeRoom checks that keep-alive connections
// left idle at the limit do not lock a new client out: the new
// connection is served, and the one idle the longest is closed for it.
func TestLimitListener_IdleMakeRoom(t *testing.T) {
	t.Parallel()
	const n = 16
	addr := limitedServer(t, n, okHandler)
	held := make([]*rawConn, n)
	for i := range held {
		held[i] = dial(t, addr)
		if code, err := held[i].get("/healthz"); code != 200 {
			t.Fatalf("idle connection %d: %d %v", i, code, err)
		}
	}
	for round := range 3 {
		c := dial(t, addr)
		if code, err := c.get("/healthz"); code != 200 {
			t.Fatalf("new connection %d at the limit: %d %v, want 200", round, code, err)
		}
		if !held[round].closed() {
			t.Fatalf("the connection idle the longest (%d) is still open", round)
		}
	}
	// The others stay open and served.
	if code, err := held[n-1].get("/healthz"); code != 200 {
		t.Errorf("the connection idle the shortest: %d %v, want 200", code, err)
	}
}

// TestLimitListener_SilentMakeRoom checks the same of connections that
// opened and sent nothing (held until ReadHeaderTimeout otherwise).
func TestLimitListener_SilentMakeRoom(t *testing.T) {
	t.Parallel()
	const n = 16
	addr := limitedServer(t, n, okHandler)
	held := make([]*rawConn, n)
	for i := range held {
		held[i] = dial(t, addr)
	}
	c := dial(t, addr)
	if code, err := c.get("/healthz"); code != 200 {
		t.Fatalf("new connection at the limit: %d %v, want 200", code, err)
	}
	if !held[0].closed() {
		t.Fatalf("the silent connection open the longest is still open")
	}
	if code, err := held[n-1].get("/healthz"); code != 200 {
		t.Errorf("the newest silent connection: %d %v, want 200", code, err)
	}
}

// TestLimitListener_ActiveKept checks that connections serving a request
// are never closed for a new one: at the limit with every connection
// busy, the new connection is closed at once; once they are done and
// idle, a new one is served.
func TestLimitListener_ActiveKept(t *testing.T) {
	t.Parallel()
	const n = 8
	entered, unblock := make(chan struct{}, n), make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(unblock) }) }
	t.Cleanup(release)
	addr := limitedServer(t, n, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			entered <- struct{}{}
			<-unblock
		}
	}))
	held := make([]*rawConn, n)
	answers := make(chan error, n)
	for i := range held {
		held[i] = dial(t, addr)
		go func() {
			code, err := held[i].get("/block")
			if err == nil && code != 200 {
				err = fmt.Errorf("status %d", code)
			}
			answers <- err
		}()
	}
	for range n {
		select {
		case <-entered:
		case <-time.After(10 * time.Second):
			t.Fatal("the blocking requests did not all arrive")
		}
	}
	if c := dial(t, addr); !c.closed() {
		t.Fatal("a new connection with every connection busy was not closed")
	}
	release()
	for range n {
		if err := <-answers; err != nil {
			t.Errorf("a busy connection: %v", err)
		}
	}
	// The server marks a connection idle just after sending its answer:
	// a new connection may come a moment before.
	var code int
	var err error
	for try := 0; try < 100 && code != 200; try++ {
		if try > 0 {
			time.Sleep(10 * time.Millisecond)
		}
		code, err = dial(t, addr).get("/healthz")
	}
	if code != 200 {
		t.Errorf("new connection once the others are idle: %d %v, want 200", code, err)
	}
}

// TestLimitListener_UnauthorizedBodies checks that a client without the
// token cannot hold connections busy with bodies it never finishes, on
// the routes open without it (/healthz): the server answers without
// reading the body and closes the connection, so that they do not stay
// busy for the body timeout and keep new connections out.
func TestLimitListener_UnauthorizedBodies(t *testing.T) {
	t.Parallel()
	const n = 8
	s, _ := newServer(t, httpapi.Options{Token: "s3cret", BodyTimeout: time.Hour})
	addr := limitedServer(t, n, s)
	for i := range n {
		c := dial(t, addr)
		fmt.Fprintf(c.nc, "GET /healthz HTTP/1.1\r\nHost: %s\r\nContent-Length: 100000\r\n\r\nx", addr)
		c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(c.r, nil)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		resp.Body.Close()
	}
	if code, err := dial(t, addr).get("/healthz"); code != 200 {
		t.Errorf("new connection: %d %v, want 200", code, err)
	}
}
