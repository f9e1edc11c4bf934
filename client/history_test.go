package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/client"
)

// TestHistoryCalls checks the requests of Attempts and History (paths
// escaped, the query only with what was given) and the decoding of their
// answers, against a canned server.
func TestHistoryCalls(t *testing.T) {
	var got string
	answers := map[string]string{
		"/v1/queues/mail/tasks/a%2Fb/attempts": `{"attempts":[{"attempt":1,"started":"2026-03-01T12:00:00Z","ended":"2026-03-01T12:00:02.5Z","outcome":"nacked","error":"boom","duration":"2.5s"},{"attempt":2,"started":"2026-03-01T12:01:00Z","duration":"1s"}]}`,
		"/v1/queues/mail/history":              `{"tasks":[{"id":"x","job_id":7,"outcome":"dead","finished":"2026-03-01T12:00:00Z","attempts":3,"last_error":"boom"}],"next":7}`,
	}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.URL.RequestURI()
		body, ok := answers[r.URL.EscapedPath()]
		if !ok {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(404)
			w.Write([]byte(`{"error":"hourglass: task not found"}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(body))
	}))
	defer hs.Close()
	c, err := client.New(hs.URL, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	as, err := c.Attempts(ctx, "mail", "a/b")
	if err != nil || len(as) != 2 {
		t.Fatalf("Attempts: %+v, %v", as, err)
	}
	if a := as[0]; a.Attempt != 1 || a.Outcome != api.AttemptNacked || a.Error != "boom" || a.Ended == nil || a.Duration.D() != 2500*time.Millisecond {
		t.Errorf("first attempt: %+v", a)
	}
	if a := as[1]; a.Ended != nil || a.Outcome != "" || a.Duration.D() != time.Second {
		t.Errorf("running attempt: %+v", a)
	}
	if _, err := c.Attempts(ctx, "mail", "gone"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("Attempts of an unknown task: %v, want ErrNotFound", err)
	}

	for _, c2 := range []struct {
		outcome     string
		after       uint64
		limit       int
		wantRequest string
	}{
		{"", 0, 0, "/v1/queues/mail/history"},
		{api.FinishedDead, 0, 0, "/v1/queues/mail/history?outcome=dead"},
		{api.FinishedAcked, 41, 5, "/v1/queues/mail/history?after=41&limit=5&outcome=acked"},
	} {
		fs, next, err := c.History(ctx, "mail", c2.outcome, c2.after, c2.limit)
		if err != nil || len(fs) != 1 || next != 7 {
			t.Fatalf("History: %+v, %d, %v", fs, next, err)
		}
		if got != c2.wantRequest {
			t.Errorf("History(%q, %d, %d) asked %s, want %s", c2.outcome, c2.after, c2.limit, got, c2.wantRequest)
		}
		if f := fs[0]; f.ID != "x" || f.JobID != 7 || f.Outcome != api.FinishedDead || f.Attempts != 3 || f.LastError != "boom" || f.Finished.IsZero() {
			t.Errorf("History's task: %+v", f)
		}
	}
}
