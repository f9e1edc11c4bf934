package bench

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestRawConn posts over one kept-alive connection to a net/http server
// and reads answers with a body, without one (204) and with an error
// status, then checks that a cancelled context cuts a long request short
// and that the next post dials again.
func TestRawConn(t *testing.T) {
	var conns atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("POST /echo", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write(append([]byte(`{"got":`), append(b, '}')...))
	})
	mux.HandleFunc("POST /empty", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /conflict", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":"hourglass: stale lease"}`, http.StatusConflict)
	})
	mux.HandleFunc("POST /slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()

	rc := newRawConn(strings.TrimPrefix(srv.URL, "http://"))
	defer rc.close()
	ctx := context.Background()
	for i := range 3 {
		got, err := rc.post(ctx, "/echo", []byte(`{"n":1}`), http.StatusOK)
		if err != nil || string(got) != `{"got":{"n":1}}` {
			t.Fatalf("post %d: %q, %v", i, got, err)
		}
		if got, err := rc.post(ctx, "/empty", nil, http.StatusNoContent); err != nil || len(got) != 0 {
			t.Fatalf("post %d to /empty: %q, %v", i, got, err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections for 6 requests, want 1 (keep-alive)", n)
	}
	if _, err := rc.post(ctx, "/conflict", []byte(`{}`), http.StatusNoContent); err == nil || !strings.Contains(err.Error(), "409") || !strings.Contains(err.Error(), "stale lease") {
		t.Errorf("post to /conflict: %v, want the status and the body", err)
	}

	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := rc.post(cctx, "/slow", nil, http.StatusOK); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("post to /slow: %v, want the context's deadline", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the cancelled post took %v", d)
	}
	if got, err := rc.post(ctx, "/echo", []byte(`2`), http.StatusOK); err != nil || string(got) != `{"got":2}` {
		t.Fatalf("post after the cancelled one: %q, %v", got, err)
	}
	if n := conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2 (one more after the cancelled post)", n)
	}
}
