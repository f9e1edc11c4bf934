package pebblestore_test

import (
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/hourglass-go/hourglass/store"
	"github.com/hourglass-go/hourglass/store/pebblestore"
)

// benchTask is a task with a 200-byte payload, as the benchmarks put.
func benchTask(job uint64) store.Task {
	p := make([]byte, 200)
	for i := range p {
		p[i] = byte(job) + byte(i)
	}
	return store.Task{
		JobID: job, Queue: fmt.Sprintf("queue-%d", job%8), ID: fmt.Sprintf("task-%d", job),
		State: store.Waiting, Priority: 1024, Due: 1_800_000_000_000_000_000 + int64(job), Created: 1_700_000_000_000_000_000,
		TTR: 60e9, Payload: p,
	}
}

// BenchmarkStore_Commit commits batches of puts, each Commit one fsync,
// from one goroutine ("batch=1", "batch=100") and from many at once
// ("batch=1/parallel": b.RunParallel with 16 goroutines a CPU), where
// Pebble's commit pipeline lets one WAL fsync cover many Commits. It
// reports the time per task and the WAL fsyncs per Commit.
func BenchmarkStore_Commit(b *testing.B) {
	for _, c := range []struct {
		name     string
		size     int
		parallel bool
	}{
		{"batch=1", 1, false},
		{"batch=100", 100, false},
		{"batch=1/parallel", 1, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			st := open(b, filepath.Join(b.TempDir(), "db"))
			defer st.Close()
			var next atomic.Uint64
			commit := func() error {
				var batch store.Batch
				for range c.size {
					batch.Put(benchTask(next.Add(1)))
				}
				return st.Commit(&batch)
			}
			syncs := st.WALSyncs()
			b.ResetTimer()
			if c.parallel {
				b.SetParallelism(16)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := commit(); err != nil {
							b.Error(err)
							return
						}
					}
				})
			} else {
				for b.Loop() {
					if err := commit(); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*c.size), "ns/task")
			b.ReportMetric(float64(st.WALSyncs()-syncs)/float64(b.N), "fsyncs/commit")
		})
	}
}

// BenchmarkStore_Recover reads every task of a reopened store of 100,000
// tasks (200-byte payloads, which Recover must not read) with Recover,
// and reports the time per task; "open" is the time of Open itself.
func BenchmarkStore_Recover(b *testing.B) {
	const n = 100_000
	dir := filepath.Join(b.TempDir(), "db")
	st := open(b, dir)
	for first := uint64(1); first <= n; first += 1000 {
		var batch store.Batch
		for job := first; job < first+1000; job++ {
			batch.Put(benchTask(job))
		}
		if err := st.Commit(&batch); err != nil {
			b.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}
	// fn=count does nothing but count; fn=map also fills a map of 16-byte
	// values by job id, as the broker does, to show how much of fn's work
	// the scan hides.
	for _, fill := range []bool{false, true} {
		name := fmt.Sprintf("tasks=%d/fn=count", n)
		if fill {
			name = fmt.Sprintf("tasks=%d/fn=map", n)
		}
		b.Run(name, func(b *testing.B) {
			st := open(b, dir) // replays the WAL and flushes it to tables
			defer st.Close()
			type slot struct {
				due  int64
				prio uint32
				qs   uint32
			}
			for b.Loop() {
				count := 0
				var m map[uint64]slot
				if fill {
					m = make(map[uint64]slot)
				}
				err := st.Recover(func(t store.Task) error {
					if t.Payload != nil {
						return fmt.Errorf("task %d with a payload", t.JobID)
					}
					if fill {
						m[t.JobID] = slot{t.Due, t.Priority, uint32(t.State)}
					}
					count++
					return nil
				})
				if err != nil || count != n {
					b.Fatalf("Recover: %d tasks, %v", count, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/task")
		})
	}
	b.Run(fmt.Sprintf("open/tasks=%d", n), func(b *testing.B) {
		for b.Loop() {
			st, err := pebblestore.Open(dir, pebblestore.Options{Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			st.Close()
			b.StartTimer()
		}
	})
}
