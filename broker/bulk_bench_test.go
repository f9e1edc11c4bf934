package broker_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// BenchmarkList_Filtered measures a page of FindTasks (limit 100) with a
// selective filter, an id prefix that one task in 1,000 has, from a
// random cursor in a queue of n tasks on Pebble, reopened so that no
// record is in memory. The tasks are due at random in the hour to come,
// so that the due order is not the order of their records in the store:
// each page walks at most service.FindScan tasks in memory and reads
// their records, one point read each, so ns/op stays flat as n grows. n is 100,000 and 1,000,000, or
// $HOURGLASS_BENCH_FIND_N alone (10,000,000 by hand: see the commit).
func BenchmarkList_Filtered(b *testing.B) {
	sizes := []int{100_000, 1_000_000}
	if v := os.Getenv("HOURGLASS_BENCH_FIND_N"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatal(err)
		}
		sizes = []int{n}
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("tasks=%d", n), func(b *testing.B) { benchFind(b, n) })
	}
}

func benchFind(b *testing.B, n int) {
	dir := b.TempDir()
	pst, br := durable(b, dir)
	rs := make([]task.PutRequest, task.MaxBatch)
	for i := 0; i < n; i += len(rs) {
		for j := range rs {
			id := fmt.Sprintf("t-%09d", i+j)
			if (i+j)%1000 == 999 {
				id = fmt.Sprintf("hit-%09d", i+j)
			}
			rs[j] = task.PutRequest{ID: id, Payload: make([]byte, 100), Delay: time.Duration(rand.Int64N(int64(time.Hour)))}
		}
		for _, r := range br.PutBatch(ctx, "q", rs) {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
	}
	base := time.Now().UnixNano()
	br.Close()
	pst.Close()
	pst, br = durable(b, dir)
	atRest(b, pst)
	f := service.Filter{IDPrefix: "hit-"}
	found := 0
	var took []time.Duration
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		page, _, err := br.FindTasks(ctx, "q", f, service.Cursor{Due: base + rand.Int64N(int64(time.Hour)), Job: 1}, 100)
		if err != nil {
			b.Fatal(err)
		}
		found += len(page)
		took = append(took, time.Since(start))
	}
	b.ReportMetric(float64(found)/float64(b.N), "tasks/page")
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms/page")
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/page")
}
