package worker_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/client"
	"github.com/hourglass-go/hourglass/httpapi"
	"github.com/hourglass-go/hourglass/internal/testserver"
	"github.com/hourglass-go/hourglass/worker"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// serve starts the real handler over a broker on a memory store and
// returns its URL and a function that stops it all.
func serve() (url string, stop func(), err error) {
	return serveOn(nil, nil)
}

// serveOn is serve with the handler wrapped by wrap (if not nil) and
// served on l (nil: a new listener on a loopback port).
func serveOn(l net.Listener, wrap func(http.Handler) http.Handler) (url string, stop func(), err error) {
	return serveWith(l, wrap, httpapi.Options{})
}

// serveWith is serveOn with the handler's options opts
// (internal/testserver).
func serveWith(l net.Listener, wrap func(http.Handler) http.Handler, opts httpapi.Options) (url string, stop func(), err error) {
	s, err := testserver.Start(testserver.Options{API: opts, Wrap: wrap, Listener: l})
	if err != nil {
		return "", nil, err
	}
	return s.URL, s.Close, nil
}

// newClient serves a fresh broker and returns a client of it with its
// own transport, whose idle connections the test closes at its end.
func newClient(t *testing.T) *client.Client {
	t.Helper()
	url, stop, err := serve()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return clientOf(t, url)
}

// clientOf returns a client of the server at url with its own
// transport, whose idle connections the test closes at its end.
func clientOf(t testing.TB, url string) *client.Client {
	t.Helper()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	c, err := client.New(url, client.Options{HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// start runs w until the returned function is called, which stops it,
// checks that Run returned nil in time and that no goroutine of the
// package is left.
func start(t *testing.T, w *worker.Worker) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	return func() {
		t.Helper()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("Run did not return")
		}
		noLeaks(t)
	}
}

// noLeaks fails t when a goroutine running the package's code is left,
// after giving goroutines that are ending a moment to end.
func noLeaks(t *testing.T) {
	t.Helper()
	var stacks string
	for range 100 {
		buf := make([]byte, 1<<20)
		stacks = string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(stacks, "hourglass/worker.") {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("goroutines of package worker outlive Run:\n%s", stacks)
}

// put puts n tasks into queue with ids prefix0, prefix1, ... and returns
// their ids.
func put(t *testing.T, c *client.Client, queue, prefix string, n int, r api.PutRequest) []string {
	t.Helper()
	ids := make([]string, 0, n)
	for len(ids) < n {
		batch := make([]api.PutRequest, min(n-len(ids), api.MaxBatch))
		for i := range batch {
			batch[i] = r
			batch[i].ID = prefix + strconv.Itoa(len(ids)+i)
		}
		results, err := c.PutBatch(context.Background(), queue, batch)
		if err != nil {
			t.Fatal(err)
		}
		for _, res := range results {
			if res.Error != "" {
				t.Fatal(res.Error)
			}
			ids = append(ids, res.Task.ID)
		}
	}
	return ids
}

// eventually calls f every 10 ms until it returns true, failing t after
// 30 s: a bound only a failure reaches, far above what a loaded machine
// needs.
func eventually(t *testing.T, what string, f func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !f(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
