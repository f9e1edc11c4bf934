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
// task is done (acknowledged). Hourglass-Queue and Hourglass-Task-Id
// identify the task; a task may come more than once.
func Example() {
	const secret = "whsec_test"
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "cannot read the body", http.StatusBadRequest)
			return
		}
		if err := push.Verify(secret, r, body, time.Now()); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		fmt.Printf("task %s of %s, attempt %s: %s\n",
			r.Header.Get("Hourglass-Task-Id"), r.Header.Get("Hourglass-Queue"), r.Header.Get("Hourglass-Attempt"), body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()

	// What the server sends (package pusher), and a forgery.
	send := func(signature string) {
		body := `{"to":"a@b.c"}`
		req, _ := http.NewRequest("POST", receiver.URL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Hourglass-Queue", "email")
		req.Header.Set("Hourglass-Task-Id", "welcome-42")
		req.Header.Set("Hourglass-Attempt", "1")
		req.Header.Set("Hourglass-Signature", signature)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Println(resp.Status)
	}
	send(push.Sign(secret, []byte(`{"to":"a@b.c"}`), time.Now()))
	send(push.Sign("guess", []byte(`{"to":"a@b.c"}`), time.Now()))
	send(push.Sign(secret, []byte(`{"to":"a@b.c"}`), time.Now().Add(-time.Hour)))
	// Output:
	// task welcome-42 of email, attempt 1: {"to":"a@b.c"}
	// 204 No Content
	// 401 Unauthorized
	// 401 Unauthorized
}
