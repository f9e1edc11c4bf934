package worker_test

import (
	"context"
	"errors"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/client"
	"github.com/hourglass-go/hourglass/httpapi"
	"github.com/hourglass-go/hourglass/internal/blackhole"
	"github.com/hourglass-go/hourglass/internal/logbuf"
	"github.com/hourglass-go/hourglass/worker"
)

// runUntil runs w and returns Run's error, failing t when Run has not
// returned after limit (and then ending ctx, so that Run ends before the
// next test).
func runUntil(t *testing.T, ctx context.Context, w *worker.Worker, limit time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		cancel()
		<-done
		t.Fatalf("Run has not returned after %s", limit)
		return nil
	}
}

// TestWorker_Blackhole runs a worker against a server that accepts
// connections and never answers: its reserve gives up at the client's
// deadline (the reserve's wait of 5 s plus Options.Timeout), not before,
// and is retried on a new connection after a back-off, the failure
// logged; Run returns at once when its context ends, during the next
// reserve.
func TestWorker_Blackhole(t *testing.T) {
	const timeout = 500 * time.Millisecond
	const deadline = 5*time.Second + timeout // the worker's reserve wait, plus the timeout
	hole := blackhole.Start(t)
	addr, accepted := hole.Addr(), hole.Accepted()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c, err := client.New("http://"+addr, client.Options{Timeout: timeout, HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	var logs logbuf.Buffer
	w := worker.New(c, worker.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	w.Handle("q", func(ctx context.Context, tk *worker.Task) error { return nil })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	began := time.Now()
	go func() { done <- w.Run(ctx) }()

	// Generous bounds past the deadline: the machine may be loaded.
	next := func(what string) time.Time {
		t.Helper()
		select {
		case at := <-accepted:
			return at
		case err := <-done:
			t.Fatalf("Run returned %v, waiting for %s", err, what)
		case <-time.After(deadline + 15*time.Second):
			t.Fatalf("no %s within %s", what, deadline+15*time.Second)
		}
		return time.Time{}
	}
	first := next("first reserve")
	second := next("second reserve (the first never ended?)")
	// The first reserve began after Run did, and no sooner than the
	// server saw it: measured from Run's start, the retry cannot come
	// before the deadline however slowly the first connection was
	// accepted (from the first accept it could, by that delay).
	if gap := second.Sub(began); gap < deadline {
		t.Errorf("the reserve was retried %s after Run began, before its deadline %s", gap, deadline)
	}
	out := logs.String()
	if !strings.Contains(out, "reserve failing, retrying") || !strings.Contains(out, "no answer within "+deadline.String()) || !strings.Contains(out, "failures=1") {
		t.Errorf("log:\n%s\nwant the reserve's failure at its deadline", out)
	}

	// The second reserve is on its way: ending ctx ends Run at once.
	stopped := time.Now()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return within 5 s of its context's end")
	}
	t.Logf("reserves %s apart; Run returned %s after its context's end", second.Sub(first), time.Since(stopped))
	noLeaks(t)
}

// dropper is a TCP proxy on loopback to a target address that can stop
// forwarding without closing anything: from then on the bytes of every
// connection open, and of every one it accepts, are read and discarded,
// as a network partition or a firewall that drops everything makes them
// vanish. Once it forwards again, new connections go through; those that
// lost bytes stay dead.
type dropper struct {
	l      net.Listener
	target string
	drop   atomic.Bool
	wg     sync.WaitGroup

	mu    sync.Mutex
	conns []net.Conn // both ends of every connection; guarded by mu
}

// newDropper starts a proxy to target, which stops at the test's end.
func newDropper(t *testing.T, target string) *dropper {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &dropper{l: l, target: target}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		l.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *dropper) accept() {
	for {
		in, err := p.l.Accept()
		if err != nil {
			return
		}
		out, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		var dead atomic.Bool
		p.wg.Go(func() { p.pipe(out, in, &dead) })
		p.wg.Go(func() { p.pipe(in, out, &dead) })
	}
}

// pipe copies from src to dst until either fails, discarding what it
// reads from the moment the proxy drops, once dead is set, for good.
func (p *dropper) pipe(dst, src net.Conn, dead *atomic.Bool) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if p.drop.Load() {
			dead.Store(true)
		}
		if n > 0 && !dead.Load() {
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// TestWorker_Partition runs a worker through a proxy that, once it has
// worked a task, stops forwarding without closing the connections: a
// network partition. The tasks put meanwhile are worked once the proxy
// forwards again, when the reserve stalled on its dead connection has
// reached its deadline and been retried on a new one; each task once.
// The stalled reserve reached the server before the partition, so it
// takes the tasks, and its answer is lost: they come back when their
// lease of 1 s runs out, before the retry.
func TestWorker_Partition(t *testing.T) {
	const timeout = 500 * time.Millisecond
	url, stop, err := serve()
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	direct := clientOf(t, url)
	p := newDropper(t, strings.TrimPrefix(url, "http://"))
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c, err := client.New("http://"+p.l.Addr().String(), client.Options{Timeout: timeout, HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]int{} // guarded by mu
	worked := make(chan string, 16)
	w := worker.New(c, worker.Options{Concurrency: 4, Logger: quiet})
	w.Handle("q", func(ctx context.Context, tk *worker.Task) error {
		mu.Lock()
		seen[tk.ID]++
		mu.Unlock()
		worked <- tk.ID
		return nil
	})
	stopWorker := sync.OnceFunc(start(t, w))
	defer stopWorker()
	wait := func(what string, limit time.Duration) {
		t.Helper()
		select {
		case <-worked:
		case <-time.After(limit):
			t.Fatalf("%s not worked within %s", what, limit)
		}
	}
	put(t, direct, "q", "before", 1, api.PutRequest{})
	wait("the task before the partition", 15*time.Second)

	time.Sleep(300 * time.Millisecond) // the next reserve reaches the server
	p.drop.Store(true)
	cut := time.Now()
	ids := put(t, direct, "q", "during", 3, api.PutRequest{TTR: new(api.Duration(time.Second))})
	time.Sleep(time.Second) // the worker's reserve is waiting on a dead connection
	p.drop.Store(false)
	// The reserve's deadline (its wait of 5 s plus the timeout) and a
	// back-off, with a generous margin for a loaded machine.
	for range ids {
		wait("a task put during the partition", 5*time.Second+timeout+20*time.Second)
	}
	t.Logf("the tasks put during the partition were worked %s after it began", time.Since(cut))
	stopWorker()
	mu.Lock()
	defer mu.Unlock()
	for _, id := range append(ids, "before0") {
		if seen[id] != 1 {
			t.Errorf("task %s worked %d times, want once", id, seen[id])
		}
	}
}

// TestWorker_Permanent runs a worker against servers that refuse its
// calls in ways no retry cures: Run returns an error that says why, with
// one prefix, and that errors.Is matches against the client's sentinel,
// instead of retrying forever.
func TestWorker_Permanent(t *testing.T) {
	for _, tc := range []struct {
		name string
		// client returns the client of the worker.
		client func(t *testing.T) *client.Client
		want   error  // matched by errors.Is, unless nil
		says   string // in the error's text
	}{
		{"wrong token", func(t *testing.T) *client.Client {
			return withToken(t, serveT(t, nil, httpapi.Options{Token: "tok"}), "wrong")
		}, client.ErrUnauthorized, "reserve 401: wrong bearer token"},
		{"loopback server under another name", func(t *testing.T) *client.Client {
			addr := strings.TrimPrefix(serveT(t, nil, httpapi.Options{LoopbackHost: true}), "http://")
			tr := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, addr)
			}}
			t.Cleanup(tr.CloseIdleConnections)
			c, err := client.New("http://hourglass.example", client.Options{HTTPClient: &http.Client{Transport: tr}})
			if err != nil {
				t.Fatal(err)
			}
			return c
		}, client.ErrForbidden, "reserve 403: Host is not a loopback name"},
		{"untrusted certificate", func(t *testing.T) *client.Client {
			hs := httptest.NewUnstartedServer(http.NotFoundHandler())
			hs.Config.ErrorLog = log.New(io.Discard, "", 0) // its side of the refused handshakes
			hs.StartTLS()
			t.Cleanup(hs.Close)
			return clientOf(t, hs.URL)
		}, nil, "reserve failed for good: POST /v1/reserve: Post"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := worker.New(tc.client(t), worker.Options{Logger: quiet})
			w.Handle("q", func(ctx context.Context, tk *worker.Task) error { return nil })
			err := runUntil(t, context.Background(), w, 20*time.Second)
			if err == nil || tc.want != nil && !errors.Is(err, tc.want) || !client.IsPermanent(err) {
				t.Fatalf("Run: %v, want a permanent error matching %v", err, tc.want)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "hourglass: worker stopped: ") || strings.Count(msg, "hourglass:") != 1 || !strings.Contains(msg, tc.says) {
				t.Errorf("Run: %q, want one prefix and %q", msg, tc.says)
			}
			noLeaks(t)
		})
	}
}

// TestWorker_TokenRevoked works a task while the server starts refusing
// one of the calls about it with a 401 (a token rotated under the
// worker): the ack, the nack, or the touch of a handler that runs past
// half its ttr. Run ends with that error once the handler is done
// rather than working on, and the call's failure is logged.
func TestWorker_TokenRevoked(t *testing.T) {
	for _, tc := range []struct {
		call string // the call refused, the end of its path
		ttr  time.Duration
		h    worker.Handler
	}{
		{"ack", time.Minute, func(ctx context.Context, tk *worker.Task) error { return nil }},
		{"nack", time.Minute, func(ctx context.Context, tk *worker.Task) error { return errors.New("failed") }},
		{"touch", time.Second, func(ctx context.Context, tk *worker.Task) error {
			select {
			case <-ctx.Done():
				if !errors.Is(context.Cause(ctx), worker.ErrLeaseLost) {
					t.Errorf("handler cancelled with %v, want ErrLeaseLost", context.Cause(ctx))
				}
			case <-time.After(10 * time.Second):
				t.Error("handler not cancelled")
			}
			return ctx.Err()
		}},
	} {
		t.Run(tc.call, func(t *testing.T) {
			url := serveT(t, func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if strings.HasSuffix(r.URL.Path, "/"+tc.call) || r.URL.Path == "/v1/"+tc.call+"s" {
						w.Header().Set("Content-Type", "application/json")
						w.WriteHeader(http.StatusUnauthorized)
						w.Write([]byte(`{"error":"hourglass: wrong bearer token"}`))
						return
					}
					h.ServeHTTP(w, r)
				})
			}, httpapi.Options{})
			c := clientOf(t, url)
			put(t, c, "q", "t", 1, api.PutRequest{TTR: new(api.Duration(tc.ttr))})
			var logs logbuf.Buffer
			w := worker.New(c, worker.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			var calls atomic.Int64
			w.Handle("q", func(ctx context.Context, tk *worker.Task) error {
				calls.Add(1)
				return tc.h(ctx, tk)
			})
			err := runUntil(t, context.Background(), w, 20*time.Second)
			if !errors.Is(err, client.ErrUnauthorized) || !strings.Contains(err.Error(), tc.call+" 401") {
				t.Fatalf("Run: %v, want the %s's 401", err, tc.call)
			}
			if n := calls.Load(); n != 1 {
				t.Errorf("%d handler calls, want 1", n)
			}
			if out := logs.String(); !strings.Contains(out, tc.call+" failed for good; stopping") {
				t.Errorf("log:\n%s\nwant the %s's failure", out, tc.call)
			}
			noLeaks(t)
		})
	}
}

// serveT is serveWith for t, which stops the server at its end.
func serveT(t *testing.T, wrap func(http.Handler) http.Handler, opts httpapi.Options) string {
	t.Helper()
	url, stop, err := serveWith(nil, wrap, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return url
}

// withToken returns a client of url that sends token, with its own
// transport.
func withToken(t *testing.T, url, token string) *client.Client {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c, err := client.New(url, client.Options{Token: token, HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
