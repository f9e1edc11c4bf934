package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/broker"
	"github.com/hourglass-go/hourglass/client"
	"github.com/hourglass-go/hourglass/httpapi"
	"github.com/hourglass-go/hourglass/internal/testserver"
	"github.com/hourglass-go/hourglass/store/pebblestore"
	"github.com/prometheus/client_golang/prometheus"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// serve starts the real handler over a broker on a Pebble store in dir
// (internal/testserver) and returns its URL and a function that stops it
// all.
func serve(dir string, cfg broker.Config, token string) (url string, stop func(), err error) {
	s, err := testserver.Start(testserver.Options{
		Dir:    dir,
		Pebble: pebblestore.Options{CacheSize: 1 << 20, MemTableSize: 1 << 20},
		Broker: cfg,
		API:    httpapi.Options{Token: token, MaxPayload: cfg.MaxPayload},
	})
	if err != nil {
		return "", nil, err
	}
	return s.URL, s.Close, nil
}

// newClient serves a fresh broker and returns a client of it.
func newClient(t *testing.T, cfg broker.Config, token string) *client.Client {
	t.Helper()
	url, stop, err := serve(t.TempDir(), cfg, token)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	c, err := client.New(url, client.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestClient walks through every call over a real server.
func TestClient(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, broker.Config{}, "tok")
	const id = "order?42#%x" // needs escaping in a path
	t1, created, err := c.Put(ctx, "orders", api.PutRequest{ID: id, Payload: json.RawMessage(`{"n":42}`), Priority: new(uint32(3)), TTR: new(api.Duration(time.Minute))})
	if err != nil || !created || t1.ID != id || t1.Priority != 3 || t1.State != api.StateReady {
		t.Fatalf("Put: %+v, %v, %v", t1, created, err)
	}
	t2, created, err := c.Put(ctx, "orders", api.PutRequest{ID: id})
	if err != nil || created || t2.JobID != t1.JobID {
		t.Fatalf("second Put: %+v, %v, %v", t2, created, err)
	}
	if got, err := c.Get(ctx, "orders", id); err != nil || string(got.Payload) != `{"n":42}` {
		t.Fatalf("Get: %+v, %v", got, err)
	}
	results, err := c.PutBatch(ctx, "orders", []api.PutRequest{{ID: "b1", Delay: new(api.Duration(time.Hour))}, {ID: "bad id"}})
	if err != nil || len(results) != 2 || results[0].Task == nil || results[0].Task.State != api.StateDelayed || results[1].Error == "" {
		t.Fatalf("PutBatch: %+v, %v", results, err)
	}

	tasks, err := c.Reserve(ctx, "orders", 10, 0)
	if err != nil || len(tasks) != 1 || tasks[0].ID != id || tasks[0].Lease == "" {
		t.Fatalf("Reserve: %+v, %v", tasks, err)
	}
	lease := tasks[0].Lease
	if tt, err := c.Touch(ctx, "orders", id, lease); err != nil || tt.Lease == "" {
		t.Fatalf("Touch: %+v, %v", tt, err)
	} else {
		lease = tt.Lease
	}
	if _, err := c.Nack(ctx, "orders", id, lease, 0, ""); err != nil {
		t.Fatalf("Nack: %v", err)
	}
	tasks, err = c.Reserve(ctx, "orders", 0, time.Second)
	if err != nil || len(tasks) != 1 || tasks[0].Attempts != 2 {
		t.Fatalf("Reserve after nack: %+v, %v", tasks, err)
	}
	if err := c.Ack(ctx, "orders", id, tasks[0].Lease); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	if f, err := c.Get(ctx, "orders", id); err != nil || f.State != api.StateFinished || f.Outcome != api.FinishedAcked || f.Finished == nil {
		t.Fatalf("Get after ack: %+v, %v, want its finished record, acked", f, err)
	}
	if err := c.Kick(ctx, "orders", "b1"); !errors.Is(err, client.ErrConflict) {
		t.Errorf("Kick of a delayed task: %v, want ErrConflict", err)
	}
	qs, err := c.Queues(ctx)
	if err != nil || len(qs) != 1 || qs[0] != (api.Queue{Name: "orders", Delayed: 1}) {
		t.Errorf("Queues: %+v, %v", qs, err)
	}
	if err := c.Delete(ctx, "orders", "b1"); err != nil {
		t.Errorf("Delete: %v", err)
	}

	s, err := c.SetSchedule(ctx, "tick", api.ScheduleRequest{Cron: "@every 1h", Queue: "orders"})
	if err != nil || s.Next.IsZero() {
		t.Fatalf("SetSchedule: %+v, %v", s, err)
	}
	if ss, err := c.Schedules(ctx); err != nil || len(ss) != 1 || ss[0].Name != "tick" {
		t.Errorf("Schedules: %+v, %v", ss, err)
	}
	if err := c.DeleteSchedule(ctx, "tick"); err != nil {
		t.Errorf("DeleteSchedule: %v", err)
	}
	if err := c.DeleteSchedule(ctx, "tick"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("second DeleteSchedule: %v", err)
	}
	if err := c.Ready(ctx); err != nil {
		t.Errorf("Ready: %v", err)
	}
}

// TestErrors checks that each error status matches its sentinel and
// carries the server's message.
func TestErrors(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, broker.Config{MaxPayload: 10}, "tok")
	if _, _, err := c.Put(ctx, "q", api.PutRequest{ID: "x"}); err != nil {
		t.Fatal(err)
	}
	tooBig := json.RawMessage(`"` + strings.Repeat("x", 20) + `"`)
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"bad queue", func() error { _, _, err := c.Put(ctx, "no good", api.PutRequest{}); return err }(), client.ErrInvalid},
		{"payload too large", func() error { _, _, err := c.Put(ctx, "q", api.PutRequest{Payload: tooBig}); return err }(), client.ErrTooLarge},
		{"missing", func() error { _, err := c.Get(ctx, "q", "nope"); return err }(), client.ErrNotFound},
		{"stale lease", c.Ack(ctx, "q", "x", "stale"), client.ErrConflict},
		{"missing lease", c.Ack(ctx, "q", "x", ""), client.ErrInvalid},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.want)
		}
		var e *client.Error
		if !errors.As(tc.err, &e) || !strings.HasPrefix(e.Message, "hourglass: ") || e.Status < 400 {
			t.Errorf("%s: %#v, want an *Error with the server's message", tc.name, tc.err)
		}
		for _, other := range []error{client.ErrInvalid, client.ErrNotFound, client.ErrConflict, client.ErrTooLarge, client.ErrUnauthorized, client.ErrForbidden, client.ErrUnavailable} {
			if other != tc.want && errors.Is(tc.err, other) {
				t.Errorf("%s: %v also matches %v", tc.name, tc.err, other)
			}
		}
	}

	noToken, _ := client.New(c.URL(), client.Options{})
	if _, err := noToken.Queues(ctx); !errors.Is(err, client.ErrUnauthorized) {
		t.Errorf("without token: %v, want ErrUnauthorized", err)
	}
}

// TestUnavailable checks ErrUnavailable against a server still
// recovering, and an error answer that is not the API's.
func TestUnavailable(t *testing.T) {
	ctx := context.Background()
	s := httpapi.New(httpapi.Options{Gatherer: prometheus.NewRegistry()})
	hs := httptest.NewServer(s)
	defer hs.Close()
	c, _ := client.New(hs.URL, client.Options{})
	if err := c.Ready(ctx); !errors.Is(err, client.ErrUnavailable) || !strings.Contains(err.Error(), "recovering") {
		t.Errorf("Ready while recovering: %v", err)
	}
	if _, _, err := c.Put(ctx, "q", api.PutRequest{}); !errors.Is(err, client.ErrUnavailable) {
		t.Errorf("Put while recovering: %v", err)
	}

	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "<html>bad gateway</html>", http.StatusBadGateway)
	}))
	defer proxy.Close()
	c, _ = client.New(proxy.URL+"/prefix/", client.Options{})
	_, err := c.Queues(ctx)
	var e *client.Error
	if !errors.As(err, &e) || e.Status != 502 || !strings.Contains(e.Message, "HTTP 502") || !strings.Contains(e.Message, "bad gateway") {
		t.Errorf("502 from a proxy: %#v", err)
	}
}

// TestReserveCancel checks that cancelling the context ends a long poll.
func TestReserveCancel(t *testing.T) {
	c := newClient(t, broker.Config{}, "")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Reserve(ctx, "q", 1, time.Minute)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Reserve: %v, want the context's error", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("cancelled Reserve took %v", took)
	}
}

// TestNew checks the server URLs New accepts.
func TestNew(t *testing.T) {
	for _, u := range []string{"http://127.0.0.1:7070", "https://example.com/hourglass/", "http://[::1]:7070"} {
		if _, err := client.New(u, client.Options{}); err != nil {
			t.Errorf("New(%q): %v", u, err)
		}
	}
	for _, u := range []string{"", "127.0.0.1:7070", "ftp://x", "http://", "http://h/?q=1", "http://u:p@h", "http://h/#f", "http://%zz", "http://127.0.0.1:99999", "http://h:0", "http://h:x"} {
		if _, err := client.New(u, client.Options{}); err == nil || !strings.HasPrefix(err.Error(), "hourglass: ") {
			t.Errorf("New(%q): %v, want an error", u, err)
		}
	}
}
