package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/broker"
	"github.com/hourglass-go/hourglass/client"
)

// Example puts a task due in 50 ms, waits for it as a worker would, and
// acknowledges it.
func Example() {
	dir, err := os.MkdirTemp("", "hourglass-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	server, stop, err := serve(dir, broker.Config{}, "secret")
	if err != nil {
		log.Fatal(err)
	}
	defer stop()

	ctx := context.Background()
	c, err := client.New(server, client.Options{Token: "secret"})
	if err != nil {
		log.Fatal(err)
	}
	_, created, err := c.Put(ctx, "emails", api.PutRequest{
		ID:      "welcome-42",
		Payload: json.RawMessage(`{"to":"ada@example.com"}`),
		Delay:   new(api.Duration(50 * time.Millisecond)),
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("created:", created)

	tasks, err := c.Reserve(ctx, "emails", 10, 5*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range tasks {
		fmt.Printf("%s %s attempt %d\n", t.ID, t.Payload, t.Attempts)
		if err := c.Ack(ctx, t.Queue, t.ID, t.Lease); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// created: true
	// welcome-42 {"to":"ada@example.com"} attempt 1
}
