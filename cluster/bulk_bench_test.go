package cluster_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/internal/pgtest"
	"github.com/hourglass-go/hourglass/service"
)

// BenchmarkList_Filtered measures a page of FindTasks (limit 100) on a
// cluster node with a selective filter, an id prefix that one task in
// 1,000 has, from a random cursor in a queue of n tasks whose due times
// are scattered across their job ids (due order is not insert order):
// each page reads at most service.FindScan rows, so ns/op stays flat as
// n grows. The
// tasks are written by one INSERT … SELECT (not timed) rather than put,
// then vacuumed and analyzed. n is 1,000,000, or $HOURGLASS_BENCH_FIND_N
// (10,000,000 by hand: see the commit).
func BenchmarkList_Filtered(b *testing.B) {
	const dueBase = int64(1_800_000_000) * 1e9 // 2027, in Unix ns
	n := 1_000_000
	if v := os.Getenv("HOURGLASS_BENCH_FIND_N"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	b.Run(fmt.Sprintf("tasks=%d", n), func(b *testing.B) {
		srv := pgtest.Start(b)
		url := srv.CreateDatabase(b)
		node := startNode(b, url, "a")
		ctx := context.Background()
		_, err := node.pool.Exec(ctx, `INSERT INTO hourglass_tasks (job_id, partition, queue, id, state, priority,
				due, fire_at, created, ttr, attempts, max_attempts, lease, lease_until, timeouts, releases, buries,
				kicks, payload)
			SELECT g, g % $2, 'q', CASE WHEN g % 1000 = 0 THEN 'hit-' ELSE 't-' END || g, 1, 1024,
				$3::bigint + (g * 7919 % $1::bigint) * 1000, NULL, 1, 60000000000, 0, 0, '', 0, 0, 0, 0, 0, '\x00'::bytea
			FROM generate_series(1, $1::bigint) g`, n, node.Partitions(), dueBase)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := node.pool.Exec(ctx, `VACUUM ANALYZE hourglass_tasks`); err != nil {
			b.Fatal(err)
		}
		f := service.Filter{IDPrefix: "hit-"}
		found := 0
		var took []time.Duration
		b.ResetTimer()
		for b.Loop() {
			start := time.Now()
			page, _, err := node.FindTasks(ctx, "q", f, service.Cursor{Due: dueBase + rand.Int64N(int64(n))*1000, Job: 1}, 100)
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
	})
}
