package push_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/hourglass-go/hourglass/push"
)

// A receiver of a push queue: it reads the body whole, checks the
// signature before anything else, answers 401 to a forged or replayed
// request (a failed attempt to the server, retried), and 2xx once the
// task is done (acknowledged). A task may come more than once, with the
// same webhook-id; Hourglass-Queue and Hourglass-Task-Id name it.
func Example() {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "cannot read the body", http.StatusBadRequest)
			return
		}
		if err := push.Verify(r, body, time.Now(), secret); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		fmt.Printf("task %s of %s, attempt %s, message %s: %s\n", r.Header.Get("Hourglass-Task-Id"),
			r.Header.Get("Hourglass-Queue"), r.Header.Get("Hourglass-Attempt"), r.Header.Get("webhook-id"), body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()

	// What the server sends (package pusher), a forgery, a replay and a
	// push replayed under another task's webhook-id.
	const body = `{"to":"a@b.c"}`
	send := func(id, signedID, secret string, at time.Time) {
		req, _ := http.NewRequest("POST", receiver.URL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Hourglass-Queue", "email")
		req.Header.Set("Hourglass-Task-Id", "welcome-42")
		req.Header.Set("Hourglass-Attempt", "1")
		if err := push.SetHeaders(req.Header, signedID, at, []byte(body), secret); err != nil {
			fmt.Println(err)
			return
		}
		req.Header.Set("webhook-id", id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Println(resp.Status)
	}
	send("msg_1234_1", "msg_1234_1", secret, time.Now())
	send("msg_1234_1", "msg_1234_1", "guess", time.Now())
	send("msg_1234_1", "msg_1234_1", secret, time.Now().Add(-time.Hour))
	send("msg_1235_1", "msg_1234_1", secret, time.Now())
	// Output:
	// task welcome-42 of email, attempt 1, message msg_1234_1: {"to":"a@b.c"}
	// 204 No Content
	// 401 Unauthorized
	// 401 Unauthorized
	// 401 Unauthorized
}
