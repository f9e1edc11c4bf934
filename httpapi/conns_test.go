package httpapi_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/httpapi"
)

// limitedServer serves h on loopback through a LimitListener of n
// connections, with header and idle timeouts far longer than any test,
// so that only the listener closes connections. It returns the address.
// writeLimits, if given, are the listener's write timeout and stall
// (httpapi.SetWriteLimits).
func limitedServer(t *testing.T, n int, h http.Handler, writeLimits ...time.Duration) string {
	t.Helper()
	addr, _ := limitedServerIdle(t, n, h, writeLimits...)
	return addr
}

// limitedServerIdle is limitedServer, and also returns how many times a
// connection has gone idle: the listener learns it from ConnState after
// the answer is written, so a test that needs an order of idleness waits
// for it.
func limitedServerIdle(t *testing.T, n int, h http.Handler, writeLimits ...time.Duration) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ll := httpapi.LimitListener(ln, n, quiet)
	if len(writeLimits) == 2 {
		httpapi.SetWriteLimits(ll, writeLimits[0], writeLimits[1])
	}
	idle := new(atomic.Int64)
	state := func(c net.Conn, st http.ConnState) {
		ll.ConnState(c, st)
		if st == http.StateIdle {
			idle.Add(1)
		}
	}
	hs := &http.Server{Handler: h, ConnState: state, ReadHeaderTimeout: time.Hour, IdleTimeout: time.Hour}
	done := make(chan struct{})
	go func() {
		defer close(done)
		hs.Serve(ll)
	}()
	t.Cleanup(func() {
		hs.Close()
		<-done
	})
	return ln.Addr().String(), idle
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
	addr, idle := limitedServerIdle(t, n, okHandler)
	held := make([]*rawConn, n)
	for i := range held {
		held[i] = dial(t, addr)
		if code, err := held[i].get("/healthz"); code != 200 {
			t.Fatalf("idle connection %d: %d %v", i, code, err)
		}
		// The listener orders idle connections by when ConnState said
		// so, which may come after the answer reached the client.
		for deadline := time.Now().Add(10 * time.Second); idle.Load() < int64(i+1); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("connection %d never reported idle", i)
			}
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

// bigHandler answers /big with 1 MiB, anything else with nothing.
var bigHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/big" {
		w.Write(make([]byte, 1<<20))
	}
})

// unread sends 64 pipelined GET /big on c and reads the first line of
// the first answer (so the server is writing answers, no longer waiting
// for a request), and no more: the server's writes soon wait on the
// client.
func (c *rawConn) unread() {
	c.t.Helper()
	c.nc.SetDeadline(time.Now().Add(10 * time.Second))
	req := fmt.Sprintf("GET /big HTTP/1.1\r\nHost: %s\r\n\r\n", c.nc.RemoteAddr())
	for range 64 {
		if _, err := io.WriteString(c.nc, req); err != nil {
			c.t.Fatalf("pipelining: %v", err)
		}
	}
	if line, err := c.r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") {
		c.t.Fatalf("first answer: %q %v", line, err)
	}
}

// servedWithin dials addr until a connection is served, for up to d.
func servedWithin(t *testing.T, addr string, d time.Duration) (int, error) {
	deadline := time.Now().Add(d)
	for {
		code, err := dial(t, addr).get("/healthz")
		if code == 200 || time.Now().After(deadline) {
			return code, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestLimitListener_UnreadAnswersMakeRoom checks that clients that
// send requests and read no answer do not lock a new client out: at
// the limit, with no connection idle, the one whose write has waited
// longest is closed for the new one once it has waited writeStall.
func TestLimitListener_UnreadAnswersMakeRoom(t *testing.T) {
	t.Parallel()
	const n = 4
	addr := limitedServer(t, n, bigHandler, time.Hour, 200*time.Millisecond)
	for range n {
		dial(t, addr).unread()
	}
	// Let the answers fill the sockets' buffers: a connection between
	// two answers is idle for a moment, and would be closed as such.
	time.Sleep(500 * time.Millisecond)
	if code, err := servedWithin(t, addr, 10*time.Second); code != 200 {
		t.Errorf("new connection beside %d that read no answer: %d %v, want 200", n, code, err)
	}
}

// TestLimitListener_WriteTimeout checks that a client that reads no
// answer has its connection closed once a write has waited the write
// timeout, below the limit as well.
func TestLimitListener_WriteTimeout(t *testing.T) {
	t.Parallel()
	addr := limitedServer(t, 1, bigHandler, 300*time.Millisecond, time.Hour)
	c := dial(t, addr)
	c.unread()
	if code, err := servedWithin(t, addr, 10*time.Second); code != 200 {
		t.Errorf("new connection after the write timeout: %d %v, want 200", code, err)
	}
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := io.Copy(io.Discard, c.nc) // EOF, or reset: closed with requests unread
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Errorf("the connection that read nothing: %v, want it closed", err)
	}
}
