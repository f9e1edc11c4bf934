package pebblestore_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/hourglass-go/hourglass/store"
	"github.com/hourglass-go/hourglass/task"
)

// BenchmarkStore_PruneHistory measures PruneHistory in batches of 1000
// (the broker's) over a history of acked tasks, each one attempt and one
// Finished record, written by batches of 100 as a steady load writes
// them: the time and allocation per record pruned, which is the cost of
// the pruning that a history of retention R adds to every task, after R.
// Each round writes 1000 records and prunes the 1000 oldest, so that the
// store holds a steady window (window=N records) and its tombstones, as
// a server at its plateau does.
func BenchmarkStore_PruneHistory(b *testing.B) {
	for _, window := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("window=%d", window), func(b *testing.B) {
			st := open(b, filepath.Join(b.TempDir(), "db"))
			defer st.Close()
			var seq uint64
			write := func(n int) {
				for n > 0 {
					var batch store.Batch
					for range min(n, 100) {
						seq++
						batch.PutAttempt(store.Attempt{JobID: seq, N: 1, Started: int64(seq), Ended: int64(seq) + 1, Outcome: task.AttemptAcked})
						batch.PutFinished(store.Finished{Seq: seq, JobID: seq, Queue: "bench", ID: fmt.Sprintf("task-%d", seq), Outcome: task.FinishedAcked, Finished: int64(seq) + 1, Attempts: 1})
						n--
					}
					if err := st.Commit(&batch); err != nil {
						b.Fatal(err)
					}
				}
			}
			write(window)
			b.ReportAllocs()
			b.ResetTimer()
			pruned := 0
			for b.Loop() {
				b.StopTimer()
				write(1000)
				b.StartTimer()
				n, err := st.PruneHistory(int64(seq-uint64(window))+2, 1000)
				if err != nil {
					b.Fatal(err)
				}
				pruned += n
			}
			b.StopTimer()
			if pruned < b.N*1000 {
				b.Fatalf("pruned %d records in %d rounds, want %d", pruned, b.N, b.N*1000)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(pruned), "ns/record")
		})
	}
}
