package e2e_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// connsSlack bounds what "promptly" means in these tests, on a loaded
// machine: the refusals they guard against took 2 minutes (the idle
// timeout) or 10 s (the body budget's wait, which it must stay under).
const connsSlack = 8 * time.Second

// putOnNewConn puts one task into queue over a connection of its own,
// with token, and returns the status (or -1 and the error) and the time
// it took.
func putOnNewConn(s *server, queue, token string) (int, time.Duration, error) {
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: connsSlack}
	req, _ := http.NewRequest("POST", s.url()+"/v1/queues/"+queue+"/tasks", strings.NewReader(`{"payload":"hello"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	start := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		return -1, time.Since(start), err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, time.Since(start), nil
}

// TestMetricsWithoutToken checks --metrics-without-token: /metrics
// answers without the token (for a scraper that cannot send one), while
// /v1 still needs it. TestAuth checks that /metrics needs the token by
// default.
func TestMetricsWithoutToken(t *testing.T) { engines(t, testMetricsWithoutToken) }

func testMetricsWithoutToken(t *testing.T) {
	t.Parallel()
	s := startServer(t, withToken("s3cret"), withFlags("--metrics-without-token"))
	if a := s.callAuth("GET", "/metrics", "", ""); a.status != 200 || !strings.Contains(string(a.body), "hourglass_") {
		t.Errorf("GET /metrics without the token: %v, want 200", short(a))
	}
	if a := s.callAuth("GET", "/v1/queues", "", ""); a.status != 401 {
		t.Errorf("GET /v1/queues without the token: %v, want 401", short(a))
	}
}

// TestDataInUse checks that a second server on a data directory in use
// exits at once with status 1, naming the directory and the process that
// holds it, without ever listening, and leaves the first one serving.
// Only the embedded store has a data directory.
func TestDataInUse(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	_, stderr, code := runBounded(t, 30*time.Second, nil, "serve", "--data", s.data, "--http", "127.0.0.1:0")
	want := fmt.Sprintf("hourglass: data directory %s is in use by another hourglass (pid %d)", s.data, s.proc.cmd.Process.Pid)
	if code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("second serve on %s: exit %d, stderr:\n%s\nwant exit 1 and %q", s.data, code, stderr, want)
	}
	if strings.Contains(stderr, "listening") {
		t.Errorf("second serve listened before failing:\n%s", stderr)
	}
	if a := s.call("GET", "/readyz", ""); a.status != 200 {
		t.Errorf("first server after the second failed: /readyz %v", short(a))
	}
}

// TestHTTP_IdleConnsAtLimit checks issue 39's lock-out: clients that
// fill --max-conns with keep-alive connections left idle after a GET
// /healthz (no token needed) do not keep an authorized put out; it is
// answered 201 at once on a new connection, round after round, the
// connections idle the longest making room.
func TestHTTP_IdleConnsAtLimit(t *testing.T) { engines(t, testHTTP_IdleConnsAtLimit) }

func testHTTP_IdleConnsAtLimit(t *testing.T) {
	t.Parallel()
	const maxConns = 64
	s := startServer(t, withToken("s3cret"), withFlags("--max-conns", fmt.Sprint(maxConns)))
	s.transport.CloseIdleConnections()
	for i := range maxConns {
		nc, err := net.DialTimeout("tcp", s.addr, connsSlack)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(connsSlack))
		fmt.Fprintf(nc, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", s.addr)
		resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("connection %d: GET /healthz: %v %v", i, resp, err)
		}
		resp.Body.Close()
	}
	for round := range 5 {
		code, took, err := putOnNewConn(s, "conns", "s3cret")
		if code != http.StatusCreated {
			t.Fatalf("put %d with %d idle connections open (--max-conns %d): %d %v after %v, want 201", round, maxConns, maxConns, code, err, took)
		}
	}
}

// TestHTTP_StalledBodies checks issue 39's starved budget: two
// connections that declared 64 MB batch bodies (the whole 128 MiB budget
// of bodies in flight) and sent nothing do not keep other clients' puts
// waiting: they answer 201 within a couple of seconds, not 503 after the
// budget's 10 s wait.
func TestHTTP_StalledBodies(t *testing.T) { engines(t, testHTTP_StalledBodies) }

func testHTTP_StalledBodies(t *testing.T) {
	t.Parallel()
	s := startServer(t, withToken("s3cret"))
	for i := range 2 {
		nc, err := net.DialTimeout("tcp", s.addr, connsSlack)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		defer nc.Close()
		// With Expect: 100-continue the server says when its handler
		// begins to read the body: once the body has been admitted.
		fmt.Fprintf(nc, "POST /v1/queues/stalled/tasks:batch HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer s3cret\r\nContent-Type: application/json\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", s.addr, 64<<20)
		nc.SetReadDeadline(time.Now().Add(connsSlack))
		if line, err := bufio.NewReader(nc).ReadString('\n'); err != nil || !strings.HasPrefix(line, "HTTP/1.1 100") {
			t.Fatalf("connection %d: %q %v, want 100 Continue", i, line, err)
		}
	}
	for round := range 3 {
		code, took, err := putOnNewConn(s, "beside", "s3cret")
		if code != http.StatusCreated || took > connsSlack {
			t.Errorf("put %d beside two stalled 64 MB bodies: %d %v after %v, want 201 within %v", round, code, err, took, connsSlack)
		}
	}
}
