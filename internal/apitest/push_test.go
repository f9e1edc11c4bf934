package apitest_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/broker"
	"github.com/hourglass-go/hourglass/internal/apitest"
	"github.com/hourglass-go/hourglass/pusher"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/store/memstore"
	htask "github.com/hourglass-go/hourglass/task"
)

// TestDocument_Push runs a pusher over the embedded engine and checks the
// requests its endpoint receives against the document's webhooks.push:
// one signed under a secret and a next secret being rotated in, one
// unsigned. A request without a header the document requires is
// reported.
func TestDocument_Push(t *testing.T) {
	t.Setenv(apitest.ReportEnv, "")
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	b, err := broker.Open(memstore.New(), broker.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	s := service.New(b)
	type pushed struct {
		r    *http.Request
		body []byte
	}
	got := make(chan pushed, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- pushed{r, body}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	ctx := context.Background()
	ends := map[string]htask.Push{
		"signed":   {URL: srv.URL + "/hook", Secret: "s3cret", NextSecret: "whsec_c2Vjb25kIGtleQ==", Headers: map[string]string{"X-Env": "test"}},
		"unsigned": {URL: srv.URL + "/hook"},
	}
	for q, end := range ends {
		if _, err := s.SetPolicy(ctx, q, htask.Policy{Push: &end}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Put(ctx, q, htask.PutRequest{ID: "a:b~c", Payload: []byte(`{"n":1}`)}); err != nil {
			t.Fatal(err)
		}
	}
	p := pusher.New(s, pusher.Options{Logger: quiet, Refresh: 50 * time.Millisecond})
	p.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		p.Stop(ctx)
	})
	v := apitest.New(t)
	for range ends {
		select {
		case g := <-got:
			v.CheckPush(g.r, g.body)
			if g.r.Header.Get("Hourglass-Queue") == "signed" && len(strings.Fields(g.r.Header.Get("webhook-signature"))) != 2 {
				t.Errorf("webhook-signature %q, want two signatures", g.r.Header.Get("webhook-signature"))
			}
			g.r.Header.Del("Hourglass-Queue")
			f := &failures{TB: t}
			apitest.New(f).CheckPush(g.r, g.body)
			if got := strings.Join(f.errs, "\n"); !strings.Contains(got, "Hourglass-Queue") {
				t.Errorf("a push without Hourglass-Queue: reported %q, want it named", got)
			}
		case <-time.After(time.Minute):
			t.Fatal("no push within a minute")
		}
	}
}
