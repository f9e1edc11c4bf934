package pusher_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hourglass-go/hourglass/push"
	"github.com/hourglass-go/hourglass/pusher"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// withPush is a service whose Queues reports the push endpoints given,
// whatever its engine stores: the pusher's tests do not depend on an
// engine keeping task.Policy.Push (the e2e tests check that they do).
type withPush struct {
	service.Service
	mu   sync.Mutex
	ends map[string]*task.Push
}

func (w *withPush) Queues(ctx context.Context) ([]task.QueueStats, error) {
	qs, err := w.Service.Queues(ctx)
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range qs {
		qs[i].Policy.Push = w.ends[qs[i].Name]
	}
	return qs, err
}

// setup returns a broker on a memory store, with queue "q" pushing to
// h's server under end (its URL filled in), and a started pusher of it.
func setup(t *testing.T, h http.Handler, end task.Push, opts pusher.Options) (*withPush, *pusher.Pusher) {
	t.Helper()
	b := openBroker(t)
	srv := httptest.NewServer(h)
	if end.URL == "" {
		end.URL = srv.URL + "/hook"
	}
	s := &withPush{Service: service.New(b), ends: map[string]*task.Push{"q": &end}}
	opts.Logger = quiet
	opts.Refresh = 50 * time.Millisecond
	p := pusher.New(s, opts)
	p.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := p.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
		srv.Close()
	})
	return s, p
}

// waitFor polls cond until it holds or 30 s pass: a bound only a
// failure reaches, far above what a loaded machine needs.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestPusher_Acked pushes a task with its body and headers, signed, and
// acks it on a 204.
func TestPusher_Acked(t *testing.T) {
	h, got, bodies := recorder()
	s, _ := setup(t, h, task.Push{Headers: map[string]string{"X-Env": "prod"}, Secret: "s3cret"}, pusher.Options{})
	ctx := context.Background()
	due := time.Now().Add(100 * time.Millisecond)
	put, _, err := s.Put(ctx, "q", task.PutRequest{ID: "a", Payload: []byte(`{"n": 1}`), At: due})
	if err != nil {
		t.Fatal(err)
	}
	r, body := <-got, <-bodies
	if now := time.Now(); now.Before(due) {
		t.Errorf("pushed %v early", due.Sub(now))
	}
	if string(body) != `{"n": 1}` {
		t.Errorf("body %q", body)
	}
	for k, v := range map[string]string{
		"Content-Type": "application/json", "Hourglass-Queue": "q", "Hourglass-Task-Id": "a",
		"Hourglass-Attempt": "1", "X-Env": "prod",
	} {
		if r.Header.Get(k) != v {
			t.Errorf("%s: %q, want %q", k, r.Header.Get(k), v)
		}
	}
	if d, err := time.Parse(time.RFC3339Nano, r.Header.Get("Hourglass-Due")); err != nil || !d.Equal(due.Truncate(0).UTC()) && d.Sub(due).Abs() > time.Millisecond {
		t.Errorf("Hourglass-Due %q, want %v", r.Header.Get("Hourglass-Due"), due)
	}
	if err := push.Verify(r, body, time.Now(), "s3cret"); err != nil {
		t.Errorf("Verify: %v", err)
	}
	if id, want := r.Header.Get("webhook-id"), fmt.Sprintf("msg_%d_%d", put.JobID, put.Created.UnixNano()); id != want {
		t.Errorf("webhook-id %q, want %q", id, want)
	}
	waitFor(t, "the ack", func() bool { _, err := s.Get("q", "a"); return err != nil })
}

// TestPusher_Failed nacks a task answered 500 with the start of the body
// as its last error, and one answered 503 with Retry-After with its
// delay.
func TestPusher_Failed(t *testing.T) {
	var mu sync.Mutex
	status := map[string]int{"fail": 500, "later": 503}
	s, _ := setup(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		code := status[r.Header.Get("Hourglass-Task-Id")]
		mu.Unlock()
		if code == 503 {
			w.Header().Set("Retry-After", "3600")
		}
		w.WriteHeader(code)
		io.WriteString(w, strings.Repeat("é", 150))
	}), task.Push{}, pusher.Options{})
	ctx := context.Background()
	if _, _, err := s.Put(ctx, "q", task.PutRequest{ID: "fail", MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Put(ctx, "q", task.PutRequest{ID: "later", MaxAttempts: 2}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the nacks", func() bool {
		a, _ := s.Get("q", "fail")
		b, _ := s.Get("q", "later")
		return a.State == task.Dead && b.State == task.Delayed
	})
	a, _ := s.Get("q", "fail")
	if want := "push: HTTP 500: " + strings.Repeat("é", 100); a.LastError != want {
		t.Errorf("last error %q, want %q", a.LastError, want)
	}
	b, _ := s.Get("q", "later")
	if d := time.Until(b.Due); d < 3590*time.Second || !strings.HasPrefix(b.LastError, "push: HTTP 503: ") {
		t.Errorf("after 503 with Retry-After: due in %v, last error %q", d, b.LastError)
	}
}

// TestPusher_Stop releases the task of a push under way when Stop's
// context ends, without spending its attempt, and leaves no goroutine.
func TestPusher_Stop(t *testing.T) {
	entered := make(chan struct{}, 1)
	unblock := make(chan struct{})
	defer close(unblock)
	s, p := setup(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		select {
		case <-unblock:
		case <-r.Context().Done():
		}
	}), task.Push{}, pusher.Options{})
	ctx := context.Background()
	if _, _, err := s.Put(ctx, "q", task.PutRequest{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	<-entered
	sctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := p.Stop(sctx); err == nil {
		t.Errorf("Stop with a push under way past its context: nil error")
	}
	tk, err := s.Get("q", "a")
	if err != nil || tk.State != task.Ready || tk.LastError != "" {
		t.Errorf("after Stop: %+v, %v; want ready again, no error", tk, err)
	}
}

// TestPusher_Timeout fails a push not answered within its timeout. It
// runs in virtual time: the timeout is exact, whatever the machine's
// load.
func TestPusher_Timeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := setupInBubble(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
		}), task.Push{Timeout: 50 * time.Millisecond}, pusher.Options{})
		if _, _, err := s.Put(context.Background(), "q", task.PutRequest{ID: "a", MaxAttempts: 1}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the failure", func() bool { a, _ := s.Get("q", "a"); return a.State == task.Dead })
		if a, _ := s.Get("q", "a"); a.LastError != "push: timeout after 50ms" {
			t.Errorf("last error %q", a.LastError)
		}
	})
}

// TestPusher_TouchesLease keeps the lease of a task whose ttr is shorter
// than its push's timeout: a push longer than the ttr is not made twice,
// and its task is acked. It runs in virtual time: on the wall clock a
// touch late by more than half the ttr, on a loaded machine, would lose
// the lease for no fault of the pusher.
func TestPusher_TouchesLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		calls := 0
		s, _ := setupInBubble(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			calls++
			mu.Unlock()
			time.Sleep(2500 * time.Millisecond)
		}), task.Push{Timeout: 5 * time.Second}, pusher.Options{})
		if _, _, err := s.Put(context.Background(), "q", task.PutRequest{ID: "a", TTR: time.Second}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the ack", func() bool { _, err := s.Get("q", "a"); return err != nil })
		time.Sleep(2 * time.Second) // a second push, after a lost lease, would come now
		mu.Lock()
		defer mu.Unlock()
		if calls != 1 {
			t.Errorf("%d pushes of a task whose ttr its push outlasted, want 1", calls)
		}
	})
}

// TestPusher_NoGoroutineLeft: once Stop returns, no goroutine of the
// pusher runs.
func TestPusher_NoGoroutineLeft(t *testing.T) {
	s, p := setup(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), task.Push{}, pusher.Options{})
	for i := range 20 {
		if _, _, err := s.Put(context.Background(), "q", task.PutRequest{ID: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A goroutine that has called wg.Done may still be on its way out
	// (seen in a CI run: "runnable" at push's closing brace): look again
	// for up to 10 s (a loaded machine) before calling it left behind.
	buf := make([]byte, 1<<20)
	var stacks string
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		stacks = string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(stacks, "pusher.(*Pusher)") || time.Now().After(end) {
			break
		}
	}
	if strings.Contains(stacks, "pusher.(*Pusher)") {
		t.Errorf("goroutines of the pusher left after Stop:\n%s", stacks)
	}
}

// notifying is a service whose policies change elsewhere: it tells the
// functions registered through NotifyPolicies when the test says so.
type notifying struct {
	*withPush
	mu sync.Mutex
	fs []func(string) // guarded by mu
}

func (n *notifying) NotifyPolicies(f func(string)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.fs = append(n.fs, f)
}

// changed makes queue a push queue to end and tells the registered.
func (n *notifying) changed(queue string, end *task.Push) {
	n.withPush.mu.Lock()
	n.ends[queue] = end
	n.withPush.mu.Unlock()
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, f := range n.fs {
		f(queue)
	}
}

// TestPusher_PolicyNotifier: on an engine that tells of policies changed
// elsewhere (service.PolicyNotifier), a queue made a push queue there is
// pushed at once, not at the pusher's next refresh (an hour here).
func TestPusher_PolicyNotifier(t *testing.T) {
	b := openBroker(t)
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Hourglass-Task-Id")
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	s := &notifying{withPush: &withPush{Service: service.New(b), ends: map[string]*task.Push{}}}
	p := pusher.New(s, pusher.Options{Logger: quiet, Refresh: time.Hour})
	p.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		p.Stop(ctx)
	})
	ctx := context.Background()
	if _, _, err := service.New(b).Put(ctx, "q", task.PutRequest{ID: "a", Payload: []byte(`1`)}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the pusher has read the queues: none is a push queue
	select {
	case id := <-got:
		t.Fatalf("pushed %s before q was a push queue", id)
	default:
	}
	s.changed("q", &task.Push{URL: srv.URL + "/hook"})
	select {
	case id := <-got:
		if id != "a" {
			t.Errorf("pushed %q, want a", id)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a queue made a push queue elsewhere was not pushed within 30 s of the notification (the refresh is an hour)")
	}
}

// TestPusher_Trace pushes a task put with a trace context with its
// traceparent and tracestate headers, over an endpoint's header of the
// same name, and its retry after a 503 with the same.
func TestPusher_Trace(t *testing.T) {
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	const state = "rojo=00f067aa0ba902b7"
	got := make(chan http.Header, 2)
	var n int
	var mu sync.Mutex
	s, _ := setup(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		mu.Lock()
		defer mu.Unlock()
		if n++; n == 1 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}), task.Push{Headers: map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"}}, pusher.Options{})
	if _, _, err := s.Put(context.Background(), "q", task.PutRequest{ID: "a", Trace: task.Trace{Parent: parent, State: state}}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		h := <-got
		if h.Get("traceparent") != parent || h.Get("tracestate") != state || len(h.Values("traceparent")) != 1 {
			t.Errorf("push %d: traceparent %q, tracestate %q; want %q, %q", i+1, h.Values("traceparent"), h.Get("tracestate"), parent, state)
		}
		if a := h.Get("Hourglass-Attempt"); a != strconv.Itoa(i+1) {
			t.Errorf("push %d: attempt %s", i+1, a)
		}
	}
	waitFor(t, "the ack", func() bool { _, err := s.Get("q", "a"); return err != nil })
}
