package pusher_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/push"
	"github.com/hourglass-go/hourglass/pusher"
	"github.com/hourglass-go/hourglass/task"
)

// TestPusher_Rotation signs each push under the secret and the next one
// while a key is rotated: a receiver holding either accepts it.
func TestPusher_Rotation(t *testing.T) {
	const secret, next = "s3cret", "whsec_c2Vjb25kIGtleQ=="
	h, got, bodies := recorder()
	s, _ := setup(t, h, task.Push{Secret: secret, NextSecret: next}, pusher.Options{})
	if _, _, err := s.Put(context.Background(), "q", task.PutRequest{ID: "a", Payload: []byte(`{"n":1}`)}); err != nil {
		t.Fatal(err)
	}
	r, body := <-got, <-bodies
	if sigs := strings.Fields(r.Header.Get("webhook-signature")); len(sigs) != 2 {
		t.Errorf("webhook-signature %q, want two signatures", r.Header.Get("webhook-signature"))
	}
	for _, sec := range []string{secret, next} {
		if err := push.Verify(r, body, time.Now(), sec); err != nil {
			t.Errorf("Verify under %q: %v", sec, err)
		}
	}
	if err := push.Verify(r, body, time.Now(), "other"); err == nil {
		t.Error("Verify under another secret passed")
	}
}

// TestPusher_BadSecret fails, unsent, the attempts of a queue whose
// stored secret cannot sign (a whsec_ secret that is not base64, stored
// before service.CheckPush refused it), saying why, rather than push
// them unsigned.
func TestPusher_BadSecret(t *testing.T) {
	var calls atomic.Int32
	s, _ := setup(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}), task.Push{Secret: "whsec_e2e"}, pusher.Options{})
	if _, _, err := s.Put(context.Background(), "q", task.PutRequest{ID: "a", MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the failed attempt", func() bool { a, _ := s.Get("q", "a"); return a.State == task.Dead })
	if a, _ := s.Get("q", "a"); !strings.Contains(a.LastError, "secret is not valid") {
		t.Errorf("last error %q, want it to name the secret", a.LastError)
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("the receiver got %d pushes, want none", n)
	}
}
