package worker_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/worker"
)

// BenchmarkWorker_Work measures a task worked end to end by a worker of
// Concurrency 64 whose handler returns at once, through the real handler
// over a broker on a memory store on a loopback port: reserve, handler,
// batched ack. allocs/op is the whole process's per task, the server's
// included, as in benchmarks/river, where the node and the worker share
// a process; the tasks (200-byte payloads) are put with the timer
// stopped.
func BenchmarkWorker_Work(b *testing.B) {
	url, stop, err := serve()
	if err != nil {
		b.Fatal(err)
	}
	defer stop()
	c := clientOf(b, url)
	batch := make([]api.PutRequest, 1000)
	for i := range batch {
		batch[i].Payload = json.RawMessage(`"` + strings.Repeat("x", 198) + `"`)
	}
	ctx := context.Background()
	for k := 0; k < b.N; k += len(batch) {
		if _, err := c.PutBatch(ctx, "q", batch[:min(len(batch), b.N-k)]); err != nil {
			b.Fatal(err)
		}
	}
	var done atomic.Int64
	all := make(chan struct{})
	w := worker.New(c, worker.Options{Concurrency: 64, Logger: quiet})
	w.Handle("q", func(context.Context, *worker.Task) error {
		if done.Add(1) == int64(b.N) {
			close(all)
		}
		return nil
	})
	wctx, cancel := context.WithCancel(ctx)
	ran := make(chan error, 1)
	b.ReportAllocs()
	b.ResetTimer()
	go func() { ran <- w.Run(wctx) }()
	select {
	case <-all:
	case <-time.After(5 * time.Minute):
		b.Fatalf("%d of %d tasks worked", done.Load(), b.N)
	}
	b.StopTimer()
	cancel()
	if err := <-ran; err != nil {
		b.Fatal(err)
	}
}
