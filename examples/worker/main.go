// Command worker works the tasks of hourglass queues with package
// worker: it prints each task's payload, treats a payload of
// {"fail": "..."} as a failure to retry, {"fatal": "..."} as one to bury
// and {"sleep": "2s"} as work that takes that long, and stops gracefully
// on SIGINT or SIGTERM: it takes no new tasks, lets running handlers
// finish (up to -shutdown-timeout), releases the tasks of those that do
// not, and sends its pending acks.
//
//	go run ./examples/worker [-server http://127.0.0.1:7070] [-token T] [-queue emails,sms] [-concurrency 16]
//
// The token may come from $HOURGLASS_TOKEN instead of -token. Try it
// beside a server, with a retry policy on the queue (without one, a
// failed task is ready again at once, and a task that always fails
// loops):
//
//	hourglass serve &
//	hourglass policy emails --set '{"retry":{"initial":"1s","max":"1m","multiplier":2},"max_attempts":5}'
//	hourglass put emails '{"to":"ada@example.com"}'
//	hourglass put emails '{"fail":"mail host down"}'
//	go run ./examples/worker -queue emails
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/hourglass-go/hourglass/client"
	"github.com/hourglass-go/hourglass/worker"
)

func main() {
	server := flag.String("server", "http://127.0.0.1:7070", "URL of the hourglass server")
	token := flag.String("token", os.Getenv("HOURGLASS_TOKEN"), "bearer token (default $HOURGLASS_TOKEN)")
	queues := flag.String("queue", "default", "queues to work, separated by commas")
	concurrency := flag.Int("concurrency", 4, "handlers at once")
	shutdown := flag.Duration("shutdown-timeout", 30*time.Second, "how long running handlers may finish once a signal came")
	flag.Parse()
	if *concurrency < 1 || *shutdown <= 0 || *queues == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "worker: need -concurrency >= 1, -shutdown-timeout > 0, a -queue and no arguments")
		flag.Usage()
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(*server, *token, strings.Split(*queues, ","), *concurrency, *shutdown, log); err != nil {
		log.Error("worker stopped", "error", err)
		os.Exit(1)
	}
}

// run works queues until SIGINT or SIGTERM.
func run(server, token string, queues []string, concurrency int, shutdown time.Duration, log *slog.Logger) error {
	c, err := client.New(server, client.Options{Token: token})
	if err != nil {
		return err
	}
	w := worker.New(c, worker.Options{Concurrency: concurrency, ShutdownTimeout: shutdown, Logger: log})
	for _, q := range queues {
		w.Handle(strings.TrimSpace(q), handle(log))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log.Info("working", "server", server, "queues", queues, "concurrency", concurrency)
	if err := w.Run(ctx); err != nil {
		return err
	}
	log.Info("stopped")
	return nil
}

// job is what the example's payloads may ask for.
type job struct {
	Fail  string `json:"fail"`
	Fatal string `json:"fatal"`
	Sleep string `json:"sleep"`
}

// handle returns the handler of every queue: it logs the task and does
// what its payload asks.
func handle(log *slog.Logger) worker.Handler {
	return func(ctx context.Context, t *worker.Task) error {
		log.Info("task", "queue", t.Queue, "id", t.ID, "attempt", t.Attempts, "payload", string(t.Payload), "last_error", t.LastError)
		var j job
		if len(t.Payload) > 0 && t.Payload[0] == '{' {
			if err := json.Unmarshal(t.Payload, &j); err != nil {
				return worker.Fail(fmt.Errorf("payload: %w", err))
			}
		}
		if j.Sleep != "" {
			d, err := time.ParseDuration(j.Sleep)
			if err != nil {
				return worker.Fail(fmt.Errorf("payload: sleep: %w", err))
			}
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}
		switch {
		case j.Fatal != "":
			return worker.Fail(errors.New(j.Fatal))
		case j.Fail != "":
			return errors.New(j.Fail)
		}
		return nil
	}
}
