package httpapi_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/httpapi"
	"github.com/hourglass-go/hourglass/task"
)

// rawRequest sends a request's head over a new connection to srv, with
// the first sent bytes of its body, and returns the connection and a
// reader of its answers.
func rawRequest(t *testing.T, srv *httptest.Server, method, path string, length int, sent, header string) (net.Conn, *bufio.Reader) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", srv.Listener.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	fmt.Fprintf(nc, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n%s",
		method, path, srv.Listener.Addr(), length, header, sent)
	return nc, bufio.NewReader(nc)
}

// readAnswer reads one answer within d.
func readAnswer(t *testing.T, nc net.Conn, r *bufio.Reader, d time.Duration) *http.Response {
	t.Helper()
	nc.SetReadDeadline(time.Now().Add(d))
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatalf("no answer within %v: %v", d, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body = io.NopCloser(strings.NewReader(string(body)))
	return resp
}

// closedWithin reports whether the server closes nc within d.
func closedWithin(nc net.Conn, r *bufio.Reader, d time.Duration) bool {
	nc.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, r)
	ne, ok := err.(net.Error)
	return !(ok && ne.Timeout())
}

// TestBodyMemory_Busy checks the budget of body bytes in flight: a batch
// that finds it taken waits Options.BodyWait and is answered 503 with
// Retry-After, unread, reaching nothing; one that waits while the budget
// is given back is served.
func TestBodyMemory_Busy(t *testing.T) {
	t.Parallel()
	s, f := newServer(t, httpapi.Options{MaxPayload: 1 << 10, MaxBatchBody: 64 << 10, MaxBodyMemory: 100 << 10, BodyWait: 500 * time.Millisecond})
	called, unblock := make(chan struct{}, 4), make(chan struct{})
	f.putBatch = func(queue string, rs []task.PutRequest) []task.PutResult {
		called <- struct{}{}
		<-unblock
		return make([]task.PutResult, len(rs))
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	var once sync.Once
	release := func() { once.Do(func() { close(unblock) }) }
	t.Cleanup(release) // before srv.Close, which waits for the handlers
	body := `{"tasks":[{"payload":"` + strings.Repeat("x", 60000) + `"}]}`
	batch := func() (net.Conn, *bufio.Reader) {
		return rawRequest(t, srv, "POST", "/v1/queues/q/tasks:batch", len(body), body, "")
	}

	ac, ar := batch() // takes 60,000 of the 100 KiB while its PutBatch blocks
	select {
	case <-called:
	case <-time.After(5 * time.Second):
		t.Fatal("the first batch did not reach the broker")
	}
	bc, br := batch()
	start := time.Now()
	resp := readAnswer(t, bc, br, 5*time.Second)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("second batch: %d, Retry-After %q, want 503 and 1", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if waited := time.Since(start); waited < 400*time.Millisecond {
		t.Errorf("answered 503 after %v, before the wait of 500ms", waited)
	}
	if !closedWithin(bc, br, 5*time.Second) {
		t.Error("the connection of the batch answered 503 stays open")
	}

	// A third waits; the first ends within its wait, and it is served.
	cc, cr := batch()
	time.Sleep(100 * time.Millisecond)
	release()
	if resp := readAnswer(t, ac, ar, 5*time.Second); resp.StatusCode != http.StatusOK {
		t.Fatalf("first batch: %d", resp.StatusCode)
	}
	if resp := readAnswer(t, cc, cr, 5*time.Second); resp.StatusCode != http.StatusOK {
		t.Fatalf("third batch: %d", resp.StatusCode)
	}
	if n := len(called); n != 1 { // the third's; the second's never came
		t.Errorf("%d more batches reached the broker, want 1", n)
	}
}

// TestBodyTimeout checks that a body that stops arriving is answered 408
// and its connection closed within Options.BodyTimeout, and that the
// bound ends with the body: a long-poll reserve waits its whole wait.
func TestBodyTimeout(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	s, f := newServer(t, httpapi.Options{BodyTimeout: timeout})
	f.reserve = func(ctx context.Context, queue string, max int, wait time.Duration) ([]task.Task, error) {
		select {
		case <-time.After(wait):
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)

	nc, r := rawRequest(t, srv, "POST", "/v1/queues/q/tasks", 100, `{"pay`, "")
	start := time.Now()
	resp := readAnswer(t, nc, r, 5*time.Second)
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("slow body: %d, want 408", resp.StatusCode)
	}
	if !closedWithin(nc, r, 2*time.Second) {
		t.Error("the connection of the slow body stays open")
	}
	if took := time.Since(start); took < timeout || took > timeout+2*time.Second {
		t.Errorf("closed after %v, want about %v", took, timeout)
	}

	wait := `{"wait":"1s"}`
	nc, r = rawRequest(t, srv, "POST", "/v1/queues/q/reserve", len(wait), wait, "")
	start = time.Now()
	resp = readAnswer(t, nc, r, 5*time.Second)
	got, _ := io.ReadAll(resp.Body)
	if took := time.Since(start); resp.StatusCode != http.StatusOK || took < time.Second || !strings.Contains(string(got), `"tasks":[]`) {
		t.Fatalf("reserve waiting 1s: %d %s after %v, want 200 and no tasks after 1s", resp.StatusCode, got, took)
	}
}

// TestUnauthorizedCloses checks that a request without the token is
// answered 401 and its connection closed, its body unread.
func TestUnauthorizedCloses(t *testing.T) {
	t.Parallel()
	s, _ := newServer(t, httpapi.Options{Token: "tok", BodyTimeout: time.Minute})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	nc, r := rawRequest(t, srv, "POST", "/v1/queues/q/tasks", 1000, `{"pay`, "")
	if resp := readAnswer(t, nc, r, 5*time.Second); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: %d, want 401", resp.StatusCode)
	}
	if !closedWithin(nc, r, 3*time.Second) {
		t.Error("the connection answered 401 stays open")
	}
}
