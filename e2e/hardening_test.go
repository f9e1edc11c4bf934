package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/api"
)

// The transport against hostile clients and browsers (issue 27): bodies
// that trickle, connections that got 401, and requests a browser sends
// from another site or after a DNS rebinding.

// send sends one request with the headers given (name, value, ...) on a
// connection of its own and returns the answer. A "Host" header replaces
// the request's Host.
func (s *server) send(method, path, body string, header ...string) answer {
	s.t.Helper()
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	a, err := s.exchange(hc, method, path, body, func(req *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			if header[i] == "Host" {
				req.Host = header[i+1]
				continue
			}
			req.Header.Set(header[i], header[i+1])
		}
	})
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	return a
}

// wantError fails the test unless a is status with a JSON error
// {"error":"hourglass: ..."} containing substr.
func wantError(t *testing.T, what string, a answer, status int, substr string) {
	t.Helper()
	var e api.Error
	if a.status != status || json.Unmarshal(a.body, &e) != nil || !strings.HasPrefix(e.Error, "hourglass: ") || !strings.Contains(e.Error, substr) {
		t.Errorf("%s: %s, want %d and a JSON error with %q", what, a, status, substr)
	}
}

// queueLen returns how many tasks queue holds, in any state.
func queueLen(t *testing.T, s *server, queue string) int {
	t.Helper()
	qs, err := s.client().Queues(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		if q.Name == queue {
			return q.Delayed + q.Ready + q.Reserved + q.Dead
		}
	}
	return 0
}

// TestHTTP_SlowBodies opens 200 connections that each send a put's
// headers and then its body one byte every 300 ms. Each must be closed
// within --body-timeout (answered 408), while /healthz keeps answering
// and a long-poll reserve that waits longer than --body-timeout gets its
// whole wait.
func TestHTTP_SlowBodies(t *testing.T) { engines(t, testHTTP_SlowBodies) }

func testHTTP_SlowBodies(t *testing.T) {
	const (
		conns   = 200
		timeout = 2 * time.Second
		slack   = 5 * time.Second // a loaded machine
	)
	s := startServer(t, withFlags("--body-timeout", timeout.String()))
	ctx, stop := context.WithCancel(context.Background())
	defer stop()

	// The long poll, sent first: waits 4 s for a task that never comes.
	type polled struct {
		a    answer
		took time.Duration
	}
	poll := make(chan polled, 1)
	go func() {
		start := time.Now()
		a, err := s.try("POST", "/v1/queues/slow-poll/reserve", `{"wait":"4s"}`, "")
		if err != nil {
			a = answer{status: -1, body: []byte(err.Error())}
		}
		poll <- polled{a, time.Since(start)}
	}()

	var readers, tricklers sync.WaitGroup
	closedAt := make([]time.Duration, conns)
	statuses := make([]string, conns)
	start := time.Now()
	for i := range conns {
		nc, err := net.DialTimeout("tcp", s.addr, 5*time.Second)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		defer nc.Close()
		fmt.Fprintf(nc, "POST /v1/queues/slow/tasks HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", s.addr)
		readers.Add(1)
		tricklers.Add(1)
		go func() { // trickle until the server closes, or the test ends
			defer tricklers.Done()
			tick := time.NewTicker(300 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				nc.SetWriteDeadline(time.Now().Add(time.Second))
				if _, err := nc.Write([]byte(" ")); err != nil {
					return
				}
			}
		}()
		go func() { // wait for the server's answer and its close
			defer readers.Done()
			nc.SetReadDeadline(start.Add(timeout + slack))
			r := bufio.NewReader(nc)
			if line, err := r.ReadString('\n'); err == nil {
				statuses[i] = strings.TrimSpace(line)
			}
			_, err := io.Copy(io.Discard, r)
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				return // still open: closedAt stays 0
			}
			closedAt[i] = time.Since(start)
		}()
	}

	// /healthz, on connections of its own, all the while.
	// A probe waits up to slack for its answer: a server starved by the
	// slow bodies never answers, while a loaded machine (CI runs every
	// package at once on two cores) may take seconds.
	var healthy, unhealthy atomic.Int32
	var failures []string
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: slack}
	for time.Since(start) < timeout+time.Second {
		sent := time.Now()
		resp, err := hc.Get(s.url() + "/healthz")
		switch {
		case err != nil:
			unhealthy.Add(1)
			failures = append(failures, fmt.Sprintf("after %v: %v", time.Since(sent), err))
		case resp.StatusCode != http.StatusOK:
			unhealthy.Add(1)
			failures = append(failures, fmt.Sprintf("after %v: %s", time.Since(sent), resp.Status))
		default:
			healthy.Add(1)
		}
		if err == nil {
			resp.Body.Close()
		}
		time.Sleep(100 * time.Millisecond)
	}
	readers.Wait() // by start + timeout + slack
	stop()
	tricklers.Wait()

	open := 0
	for i, at := range closedAt {
		switch {
		case at == 0:
			open++
		case at < timeout-100*time.Millisecond:
			t.Errorf("connection %d closed after %v, before --body-timeout %v", i, at, timeout)
		}
		if statuses[i] != "" && !strings.Contains(statuses[i], "408") {
			t.Errorf("connection %d answered %q, want 408", i, statuses[i])
		}
	}
	if open > 0 {
		t.Errorf("%d of %d connections trickling a body still open %v after they began, with --body-timeout %v", open, conns, timeout+slack, timeout)
	}
	if unhealthy.Load() > 0 {
		t.Errorf("/healthz failed %d times of %d during the slow bodies: %s", unhealthy.Load(), healthy.Load()+unhealthy.Load(), strings.Join(failures, "; "))
	}
	p := <-poll
	if p.a.status != http.StatusOK || p.took < 4*time.Second || !strings.Contains(string(p.a.body), `"tasks":[]`) {
		t.Errorf("reserve waiting 4s: %s after %v, want 200 and no tasks after 4s", p.a, p.took)
	}
	if n := queueLen(t, s, "slow"); n != 0 {
		t.Errorf("queue slow holds %d tasks, want none", n)
	}
}

// TestHTTP_UnauthorizedClosed checks that a connection answered 401 is
// closed at once, its body unread.
func TestHTTP_UnauthorizedClosed(t *testing.T) { engines(t, testHTTP_UnauthorizedClosed) }

func testHTTP_UnauthorizedClosed(t *testing.T) {
	s := startServer(t, withToken("sesame"))
	nc, err := net.DialTimeout("tcp", s.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	fmt.Fprintf(nc, "POST /v1/queues/q/tasks HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", s.addr)
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusUnauthorized || err != nil {
		t.Fatalf("no token: %d %s %v, want 401", resp.StatusCode, body, err)
	}
	_, err = io.Copy(io.Discard, nc)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the connection answered 401 is still open after %v", time.Since(start))
	}
}

// TestHTTP_CrossSite sends what a page of another site can make a browser
// send to a server on loopback without a token: a fetch with text/plain,
// a form post, a fetch marked cross-site, and a GET after a DNS
// rebinding. Each is refused with 403 and changes nothing; curl, the Go
// client, the dashboard and an origin given to --allow-origin keep
// working.
func TestHTTP_CrossSite(t *testing.T) { engines(t, testHTTP_CrossSite) }

func testHTTP_CrossSite(t *testing.T) {
	s := startServer(t, withFlags("--allow-origin", "http://localhost:3000,http://app.localhost:8080"))
	put := "/v1/queues/cross/tasks"
	evil := "https://evil.example"

	wantError(t, "fetch with text/plain from another origin",
		s.send("POST", put, `{"payload":1}`, "Content-Type", "text/plain", "Origin", evil), 403, "cross-origin")
	wantError(t, "form post from another origin",
		s.send("POST", put, `payload=1`, "Content-Type", "application/x-www-form-urlencoded", "Origin", evil), 403, "cross-origin")
	wantError(t, "fetch marked cross-site",
		s.send("POST", put, `{"payload":1}`, "Content-Type", "text/plain", "Origin", evil, "Sec-Fetch-Site", "cross-site"), 403, "cross-origin")
	wantError(t, "reserve from another origin",
		s.send("POST", "/v1/queues/cross/reserve", `{}`, "Content-Type", "text/plain", "Origin", evil, "Sec-Fetch-Site", "cross-site"), 403, "cross-origin")
	wantError(t, "delete from another origin",
		s.send("DELETE", "/v1/queues/cross/tasks/x", "", "Origin", evil, "Sec-Fetch-Site", "cross-site"), 403, "cross-origin")
	port := s.addr[strings.LastIndex(s.addr, ":"):]
	wantError(t, "GET after a DNS rebinding",
		s.send("GET", "/v1/queues", "", "Host", "rebind.evil.example"+port), 403, "Host")
	wantError(t, "the dashboard after a DNS rebinding",
		s.send("GET", "/", "", "Host", "rebind.evil.example"+port), 403, "Host")
	wantError(t, "metrics after a DNS rebinding",
		s.send("GET", "/metrics", "", "Host", "rebind.evil.example"+port), 403, "Host")
	wantError(t, "put after a DNS rebinding",
		s.send("POST", put, `{"payload":1}`, "Host", "rebind.evil.example"+port, "Content-Type", "text/plain", "Origin", "http://rebind.evil.example"+port), 403, "Host")
	if n := queueLen(t, s, "cross"); n != 0 {
		t.Fatalf("the refused requests put %d tasks", n)
	}

	// What keeps working: curl -d (no Origin), the Go client, the
	// dashboard's own calls (same origin), loopback names, and the
	// origins allowed.
	for _, tc := range []struct {
		what   string
		header []string
	}{
		{"curl -d", []string{"Content-Type", "application/x-www-form-urlencoded"}},
		{"same origin", []string{"Origin", s.url(), "Sec-Fetch-Site", "same-origin"}},
		{"same origin, old browser", []string{"Origin", s.url()}},
		{"Host localhost", []string{"Host", "localhost" + port}},
		{"Host [::1]", []string{"Host", "[::1]" + port}},
		{"allowed origin", []string{"Origin", "http://localhost:3000", "Sec-Fetch-Site", "cross-site"}},
		{"second allowed origin", []string{"Origin", "http://app.localhost:8080", "Sec-Fetch-Site", "same-site"}},
	} {
		if a := s.send("POST", put, `{"payload":"ok"}`, tc.header...); a.status != http.StatusCreated {
			t.Errorf("%s: %s, want 201", tc.what, a)
		}
	}
	if _, _, err := s.client().Put(context.Background(), "cross", api.PutRequest{Payload: json.RawMessage(`"client"`)}); err != nil {
		t.Errorf("Go client: %v", err)
	}
	for _, path := range []string{"/", "/healthz", "/metrics", "/v1/queues"} {
		if a := s.send("GET", path, "", "Sec-Fetch-Site", "same-origin"); a.status != http.StatusOK {
			t.Errorf("GET %s: %s, want 200", path, a)
		}
	}
	// A GET from another site passes (a page cannot read the answer
	// without CORS headers, which the server never sends).
	if a := s.send("GET", "/v1/queues", "", "Origin", evil, "Sec-Fetch-Site", "cross-site"); a.status != http.StatusOK || a.header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("cross-site GET: %s, CORS %q: want 200 without CORS headers", a, a.header.Get("Access-Control-Allow-Origin"))
	}
	if n := queueLen(t, s, "cross"); n != 8 {
		t.Errorf("queue cross holds %d tasks, want 8", n)
	}
}

// TestHTTP_BadOrigin checks that serve refuses an --allow-origin that is
// not an origin.
func TestHTTP_BadOrigin(t *testing.T) {
	_, stderr, code := runBounded(t, 10*time.Second, nil, "serve", "--http", "127.0.0.1:0", "--allow-origin", "localhost:3000")
	if code != 2 || strings.Count(stderr, "hourglass: ") != 1 || !strings.Contains(stderr, "allow-origin") || !strings.Contains(stderr, "http://localhost:3000") {
		t.Errorf("exit %d, stderr %q: want 2 and one error naming --allow-origin", code, stderr)
	}
}

// TestBeanstalk_HalfSentPuts opens 200 beanstalkd connections that each
// declare a body of 1 MiB (the default --max-payload) and send one byte
// of it. The server's heap, read from /metrics, must follow the bytes
// received, not the 200 MiB declared.
func TestBeanstalk_HalfSentPuts(t *testing.T) { engines(t, testBeanstalk_HalfSentPuts) }

func testBeanstalk_HalfSentPuts(t *testing.T) {
	const (
		conns     = 200
		declared  = 1 << 20
		heapBound = 64 << 20 // the buffers of a first chunk and the connections come to a few MiB
	)
	baddr := freeAddr(t)
	s := startServer(t, withFlags("--beanstalk", baddr))
	stats := dialBeanstalk(t, baddr)
	before := heapInUse(t, s)
	for range conns {
		c := dialBeanstalk(t, baddr)
		c.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if _, err := fmt.Fprintf(c.c, "put 0 0 1 %d\r\nx", declared); err != nil {
			t.Fatal(err)
		}
	}
	// The server counts a put once it has read its line, before its body.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, yaml := stats.cmd("stats", nil)
		if strings.Contains(string(yaml), fmt.Sprintf("\ncmd-put: %d\n", conns)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not read the %d put lines:\n%s", conns, yaml)
		}
	}
	grew := heapInUse(t, s) - before
	t.Logf("%d half-sent puts of %d bytes: the server's heap grew by %.1f MiB", conns, declared, float64(grew)/(1<<20))
	if grew > heapBound {
		t.Errorf("%d half-sent puts of %d bytes grew the server's heap by %d MiB, over %d MiB", conns, declared, grew>>20, heapBound>>20)
	}
}

// heapInUse reads go_memstats_heap_inuse_bytes from the server's
// /metrics.
func heapInUse(t *testing.T, s *server) int64 {
	t.Helper()
	a := s.call("GET", "/metrics", "")
	for _, line := range strings.Split(string(a.body), "\n") {
		if v, ok := strings.CutPrefix(line, "go_memstats_heap_inuse_bytes "); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err == nil {
				return int64(f)
			}
		}
	}
	t.Fatalf("no go_memstats_heap_inuse_bytes in /metrics: %s", a)
	return 0
}
