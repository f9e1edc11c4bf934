package broker_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hourglass-go/hourglass/broker"
	"github.com/hourglass-go/hourglass/store/pebblestore"
	"github.com/hourglass-go/hourglass/task"
)

// BenchmarkBroker_WorkedBacklog measures tasks worked from a backlog on
// Pebble the way package worker works them over HTTP: 300,000 ready
// 200-byte tasks are put, and the broker is opened again over the store
// (so that it keeps no record in memory, as after a restart, or for
// tasks put beyond the budget of kept records); then two reservers each
// take 30 tasks at a time and ack them in one AckMany, as an acks
// request does, before they reserve again. The fill, and Pebble's compactions of it, are not timed; cpu-ns/op is the process's CPU time per
// task worked.
func BenchmarkBroker_WorkedBacklog(b *testing.B) {
	const backlog = 300_000
	if b.N > backlog {
		b.Skipf("%d tasks, more than the backlog of %d", b.N, backlog)
	}
	dir := b.TempDir()
	pst, br := durable(b, dir)
	fill(b, br, backlog, 0)
	br.Close()
	pst.Close()
	pst, err := pebblestore.Open(dir, pebblestore.Options{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	if br, err = broker.Open(pst, broker.Config{Logger: quiet}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		br.Close()
		pst.Close()
	})
	atRest(b, pst)
	var left atomic.Int64
	left.Store(int64(b.N))
	b.ResetTimer()
	defer reportCPU(b)()
	var reservers sync.WaitGroup
	for range 2 {
		reservers.Go(func() {
			for left.Load() > 0 {
				ts, err := svc(br).Reserve(ctx, "q", 30, time.Second)
				if err != nil {
					b.Error(err)
					return
				}
				left.Add(-int64(len(ts)))
				acks := make([]task.Ack, len(ts))
				for i, t := range ts {
					acks[i] = task.Ack{Queue: "q", ID: t.ID, Lease: t.Lease}
				}
				errs, err := br.AckMany(ctx, acks)
				if err == nil {
					err = errors.Join(errs...)
				}
				if err != nil {
					b.Error(err)
				}
			}
		})
	}
	reservers.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
}

// atRest waits until st has compacted nothing for a second (at most a
// minute), so that a benchmark does not count the compactions of its
// fill.
func atRest(b *testing.B, st *pebblestore.Store) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(st.Collector())
	compacted := func() float64 {
		mfs, err := reg.Gather()
		if err != nil {
			b.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "hourglass_store_compacted_bytes_total" {
				return mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		b.Fatal("no hourglass_store_compacted_bytes_total")
		return 0
	}
	last := compacted()
	for end := time.Now().Add(time.Minute); time.Now().Before(end); {
		time.Sleep(time.Second)
		now := compacted()
		if now == last {
			return
		}
		last = now
	}
}
