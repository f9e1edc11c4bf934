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
	"testing/synctest"
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
		return readyResults(len(rs))
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

// TestBodyMemory_Stalled checks that bodies declared and not sent hold
// the budget only until they stall: two batches that declared the whole
// budget and sent nothing leave room within 2*bodyStall (1 s) for a put,
// rather than answering it 503 after BodyWait; once they resume, they
// take what arrives and are served.
func TestBodyMemory_Stalled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const batch = 64 << 10
		s, f := newServer(t, httpapi.Options{MaxPayload: 1 << 10, MaxBatchBody: batch, MaxBodyMemory: 2 * batch, BodyWait: 10 * time.Second})
		f.put = func(string, task.PutRequest) (task.Task, bool, error) { return task.Task{State: task.Ready}, true, nil }
		f.putBatch = func(_ string, rs []task.PutRequest) []task.PutResult { return readyResults(len(rs)) }
		body := `{"tasks":[{"payload":"` + strings.Repeat("x", batch-100) + `"}]}`
		type stalled struct {
			pw   *io.PipeWriter
			w    *httptest.ResponseRecorder
			done chan struct{}
		}
		var held []stalled
		for range 2 {
			pr, pw := io.Pipe()
			r := httptest.NewRequest("POST", "/v1/queues/q/tasks:batch", pr)
			r.ContentLength = int64(len(body))
			st := stalled{pw, httptest.NewRecorder(), make(chan struct{})}
			go func() {
				defer close(st.done)
				s.ServeHTTP(st.w, r)
			}()
			held = append(held, st)
		}
		synctest.Wait() // both admitted, waiting for their bodies

		start := time.Now()
		w := do(s, "POST", "/v1/queues/q/tasks", `{"payload":"`+strings.Repeat("y", 900)+`"}`)
		if w.Code/100 != 2 || time.Since(start) > 2*time.Second {
			t.Errorf("put beside two stalled batches: %d %s after %v, want 2xx within 2 s", w.Code, w.Body, time.Since(start))
		}

		// The stalled batches resume, one after the other, and are served
		// from what the budget has.
		for i, st := range held {
			go func() {
				io.WriteString(st.pw, body)
				st.pw.Close()
			}()
			<-st.done
			if st.w.Code != 200 {
				t.Errorf("batch %d, resumed: %d %s", i, st.w.Code, st.w.Body)
			}
		}
	})
}

// TestBodyMemory_StalledThenShort checks a stalled body that resumes
// while the budget is taken: it waits up to BodyWait for room for what
// arrives, then answers 503 with Retry-After and closes its connection.
func TestBodyMemory_StalledThenShort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const batch = 64 << 10
		s, f := newServer(t, httpapi.Options{MaxPayload: 1 << 10, MaxBatchBody: batch, MaxBodyMemory: 2 * batch, BodyWait: 10 * time.Second})
		unblock := make(chan struct{})
		f.putBatch = func(_ string, rs []task.PutRequest) []task.PutResult {
			<-unblock
			return readyResults(len(rs))
		}
		body := `{"tasks":[{"payload":"` + strings.Repeat("x", batch-100) + `"}]}`

		pr, pw := io.Pipe()
		r := httptest.NewRequest("POST", "/v1/queues/q/tasks:batch", pr)
		r.ContentLength = int64(len(body))
		stalled, stalledDone := httptest.NewRecorder(), make(chan struct{})
		go func() {
			defer close(stalledDone)
			s.ServeHTTP(stalled, r)
		}()
		time.Sleep(3 * time.Second) // it stalls, giving its weight back

		// Two whole batches take the budget while their puts block.
		served := make(chan int, 2)
		for range 2 {
			go func() { served <- do(s, "POST", "/v1/queues/q/tasks:batch", body).Code }()
		}
		synctest.Wait()

		go func() {
			io.WriteString(pw, body)
			pw.Close()
		}()
		start := time.Now()
		select {
		case <-stalledDone:
		case <-time.After(time.Minute):
			t.Errorf("stalled batch resumed with the budget taken: not answered in a minute (served over the budget?)")
		}
		close(unblock)
		<-stalledDone
		pr.Close() // the rest of its body is left unread
		if stalled.Code != 503 || stalled.Header().Get("Retry-After") == "" || stalled.Header().Get("Connection") != "close" || time.Since(start) != 10*time.Second {
			t.Errorf("stalled batch resumed with the budget taken: %d %v %s after %v; want 503 with Retry-After, closing, after BodyWait", stalled.Code, stalled.Header(), stalled.Body, time.Since(start))
		}
		for range 2 {
			if code := <-served; code != 200 {
				t.Errorf("whole batch: %d", code)
			}
		}
	})
}

// readyResults returns n results of a batch, each a ready task put: an
// answer the API's document allows (the zero task's state is no state).
func readyResults(n int) []task.PutResult {
	out := make([]task.PutResult, n)
	for i := range out {
		out[i] = task.PutResult{Task: task.Task{State: task.Ready}, Created: true}
	}
	return out
}
