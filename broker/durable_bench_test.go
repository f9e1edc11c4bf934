package broker_test

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/broker"
	"github.com/hourglass-go/hourglass/store"
	"github.com/hourglass-go/hourglass/store/pebblestore"
	"github.com/hourglass-go/hourglass/task"
)

// commitOnly hides a store's Apply, so that the broker commits one group
// at a time.
type commitOnly struct{ store.Store }

// BenchmarkBroker_PutDurable measures single durable puts from 64
// goroutines on Pebble, with the commits pipelined (the default over
// pebblestore) and one at a time.
func BenchmarkBroker_PutDurable(b *testing.B) {
	for _, mode := range []string{"pipelined", "serial"} {
		b.Run(mode, func(b *testing.B) {
			pst, err := pebblestore.Open(b.TempDir(), pebblestore.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer pst.Close()
			var st store.Store = pst
			if mode == "serial" {
				st = commitOnly{pst}
			}
			br, err := broker.Open(st, broker.Config{Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			defer br.Close()
			payload := make([]byte, 200)
			defer reportCPU(b)()
			b.SetParallelism(32) // 64 goroutines on 2 CPUs
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, _, err := svc(br).Put(ctx, "q", task.PutRequest{Payload: payload, Delay: time.Hour}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "puts/s")
		})
	}
}

// BenchmarkBroker_ReserveAckDurable measures reserve+ack round trips from
// 64 goroutines on a full ready queue on Pebble.
func BenchmarkBroker_ReserveAckDurable(b *testing.B) {
	_, br := durable(b, b.TempDir())
	fill(b, br, 200_000, 0)
	b.ResetTimer()
	defer reportCPU(b)()
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if !reserveAck(b, br) {
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "trips/s")
}

// BenchmarkBroker_Recover measures Open over a Pebble store holding n
// delayed tasks with 200-byte payloads (the restart of `hourglass serve`
// without Pebble's own open): the store is filled once, then each
// iteration opens a broker over it and closes it.
func BenchmarkBroker_Recover(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			pst, br := durable(b, b.TempDir())
			fill(b, br, n, time.Hour)
			br.Close()
			b.ResetTimer()
			for b.Loop() {
				br, err := broker.Open(pst, broker.Config{Logger: quiet})
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				br.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/task")
		})
	}
}

// fill puts n tasks with 200-byte payloads into queue "q" of br by
// batches of 1000, due delay from now (0: ready), one millisecond apart
// within a batch.
func fill(b *testing.B, br *broker.Broker, n int, delay time.Duration) {
	rs := make([]task.PutRequest, 1000)
	for i := range rs {
		rs[i] = task.PutRequest{Payload: make([]byte, 200)}
		if delay > 0 {
			rs[i].Delay = delay + time.Duration(i)*time.Millisecond
		}
	}
	for range n / len(rs) {
		for _, r := range br.PutBatch(ctx, "q", rs) {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
	}
}

// durable opens a broker over a Pebble store in dir; both are closed when
// the benchmark ends (closing a closed broker does nothing).
func durable(b *testing.B, dir string) (*pebblestore.Store, *broker.Broker) {
	pst, err := pebblestore.Open(dir, pebblestore.Options{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	br, err := broker.Open(pst, broker.Config{Logger: quiet})
	if err != nil {
		pst.Close()
		b.Fatal(err)
	}
	b.Cleanup(func() {
		br.Close()
		pst.Close()
	})
	return pst, br
}

// BenchmarkBroker_WorkedDurable measures worked tasks on Pebble, as a
// queue with workers keeping up sees them: 64 goroutines each put a
// 200-byte task ready, reserve a task and ack it, over a queue holding
// 10,000 ready tasks beforehand (so that a reserve mostly takes a task
// put a moment earlier by another goroutine, its group committed).
func BenchmarkBroker_WorkedDurable(b *testing.B) {
	_, br := durable(b, b.TempDir())
	fill(b, br, 10_000, 0)
	payload := make([]byte, 200)
	b.ResetTimer()
	defer reportCPU(b)()
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, _, err := svc(br).Put(ctx, "q", task.PutRequest{Payload: payload}); err != nil {
				b.Error(err)
				return
			}
			if !reserveAck(b, br) {
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
}

// reportCPU returns a function that reports the process's CPU time (user
// and system) since reportCPU was called, per iteration, as cpu-ns/op: on
// a machine of few cores throughput follows CPU time, which this shows
// apart from the waits.
func reportCPU(b *testing.B) func() {
	start := cpuTime()
	return func() {
		b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
	}
}

// cpuTime returns the process's CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reserveAck reserves one task of queue q and acks it, and reports
// whether both went well (a failure is reported to b).
func reserveAck(b *testing.B, br *broker.Broker) bool {
	ts, err := svc(br).Reserve(ctx, "q", 1, 0)
	if err != nil || len(ts) != 1 {
		b.Error(fmt.Sprint(ts, err))
		return false
	}
	if err := svc(br).Ack(ctx, "q", ts[0].ID, ts[0].Lease); err != nil {
		b.Error(err)
		return false
	}
	return true
}

// BenchmarkBroker_PutBatchDurable measures batched durable puts on Pebble:
// 4 goroutines putting 1,000 tasks a call (HTTP's batch put), delayed an
// hour, 200-byte payloads. An op is one task.
func BenchmarkBroker_PutBatchDurable(b *testing.B) {
	_, br := durable(b, b.TempDir())
	const batch = 1000
	rs := make([]task.PutRequest, batch)
	for i := range rs {
		rs[i] = task.PutRequest{Payload: make([]byte, 200), Delay: time.Hour}
	}
	b.ResetTimer()
	defer reportCPU(b)()
	b.SetParallelism(2) // 4 goroutines on 2 CPUs
	b.RunParallel(func(pb *testing.PB) {
		for {
			n := 0
			for n < batch && pb.Next() {
				n++
			}
			if n == 0 {
				return
			}
			for _, r := range br.PutBatch(ctx, "q", rs[:n]) {
				if r.Err != nil {
					b.Error(r.Err)
					return
				}
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
}
