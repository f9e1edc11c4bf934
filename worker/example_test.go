package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"strconv"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/client"
	"github.com/hourglass-go/hourglass/worker"
)

// Example works the tasks of a queue: one is done at the first attempt,
// one fails once and is retried 100 ms later, and the worker stops once
// both are done.
func Example() {
	server, stop, err := serve() // an hourglass server in this process
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	c, err := client.New(server, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	for _, to := range []string{"ada@example.com", "grace@example.com"} {
		payload, _ := json.Marshal(map[string]string{"to": to})
		if _, _, err := c.Put(ctx, "emails", api.PutRequest{Payload: payload}); err != nil {
			log.Fatal(err)
		}
	}

	sent := 0
	w := worker.New(c, worker.Options{Concurrency: 1, Logger: quiet})
	w.Handle("emails", func(ctx context.Context, t *worker.Task) error {
		var email struct{ To string }
		if err := json.Unmarshal(t.Payload, &email); err != nil {
			return worker.Fail(err) // no retry can help
		}
		if email.To == "grace@example.com" && t.Attempts == 1 {
			fmt.Println("greylisted:", email.To)
			return worker.RetryAfter(100*time.Millisecond, errors.New("greylisted"))
		}
		fmt.Println("sent to", email.To, "at attempt", t.Attempts)
		if sent++; sent == 2 {
			cancel()
		}
		return nil
	})
	if err := w.Run(ctx); err != nil { // until both are sent
		log.Fatal(err)
	}
	fmt.Println("stopped")
	// Output:
	// sent to ada@example.com at attempt 1
	// greylisted: grace@example.com
	// sent to grace@example.com at attempt 2
	// stopped
}

// ExampleFail buries the tasks whose payload no retry can make sense of,
// and retries the others when the queue's retry policy says.
func ExampleFail() {
	var c *client.Client // client.New(...)
	w := worker.New(c, worker.Options{Concurrency: 8})
	w.Handle("invoices", func(ctx context.Context, t *worker.Task) error {
		var invoice struct{ Customer string }
		if err := json.Unmarshal(t.Payload, &invoice); err != nil {
			return fmt.Errorf("invoice %s: %w", t.ID, worker.Fail(err)) // dead at once
		}
		return nil // acked
	})
}

// ExampleRetryAfter retries a webhook when its receiver says it may.
func ExampleRetryAfter() {
	var c *client.Client // client.New(...)
	w := worker.New(c, worker.Options{Concurrency: 8})
	w.Handle("webhooks", func(ctx context.Context, t *worker.Task) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://example.com/hook", bytes.NewReader(t.Payload))
		if err != nil {
			return worker.Fail(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err // retried as the queue's retry policy says
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			s, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
			return worker.RetryAfter(time.Duration(s)*time.Second, errors.New(resp.Status))
		}
		return nil
	})
}
