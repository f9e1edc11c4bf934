package broker_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/broker"
	"github.com/hourglass-go/hourglass/store/memstore"
	"github.com/hourglass-go/hourglass/task"
)

// BenchmarkBroker_Put measures the broker's own cost per put (memstore:
// no disk), from parallel goroutines, delayed an hour.
func BenchmarkBroker_Put(b *testing.B) {
	br, err := broker.Open(memstore.New(), broker.Config{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	payload := make([]byte, 200)
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, _, err := br.Put(ctx, "q", task.PutRequest{Payload: payload, Delay: time.Hour}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkBroker_PutBatch measures puts in batches of 100.
func BenchmarkBroker_PutBatch(b *testing.B) {
	br, err := broker.Open(memstore.New(), broker.Config{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	rs := make([]task.PutRequest, 100)
	for i := range rs {
		rs[i] = task.PutRequest{Payload: make([]byte, 200), Delay: time.Hour}
	}
	b.ResetTimer()
	for b.Loop() {
		for _, r := range br.PutBatch(ctx, "q", rs) {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
	}
	b.ReportMetric(float64(b.N*len(rs))/b.Elapsed().Seconds(), "tasks/s")
}

// BenchmarkBroker_PutReserveAck measures one task's whole life.
func BenchmarkBroker_PutReserveAck(b *testing.B) {
	br, err := broker.Open(memstore.New(), broker.Config{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	i := 0
	for b.Loop() {
		i++
		id := fmt.Sprint(i)
		if _, _, err := br.Put(ctx, "q", task.PutRequest{ID: id}); err != nil {
			b.Fatal(err)
		}
		ts, err := br.Reserve(ctx, "q", 1, 0)
		if err != nil || len(ts) != 1 {
			b.Fatal(ts, err)
		}
		if err := br.Ack(ctx, "q", id, ts[0].Lease); err != nil {
			b.Fatal(err)
		}
	}
}
