package cluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/internal/pgtest"
	"github.com/hourglass-go/hourglass/task"
)

// TestFlush_PlannedOnce: the owner's flush statement is planned once per
// node, before its first timer is due, however busy the node's pool. A
// node's flushes land on its own connection (pool_conn.go), warmed when
// the node holds its partitions; flushed through the pool, each landed on
// whichever connection was idle, and its first run on each connection (a
// parse, a generic plan, the catalog entries of eight tables: 4-28 ms
// against 0.6 ms warm) set the flush's p99 on the light load of issue 40.
// Here the pool's idle connections are taken away for a moment before
// each flush, as requests would hold them: through the pool the flush was
// planned at each new connection (3 times in 5 flushes), and not before
// the first timer; on its own connection, once in all, before it.
func TestFlush_PlannedOnce(t *testing.T) {
	srv := pgtest.Start(t, pgtest.Set("max_connections", "400"),
		pgtest.Set("shared_preload_libraries", "pg_stat_statements"),
		pgtest.Set("pg_stat_statements.track_planning", "on"))
	url := srv.CreateDatabase(t)
	execSQL(t, url, "CREATE EXTENSION pg_stat_statements")
	n := startNode(t, url, "a")
	ctx := context.Background()
	stats := func() (calls, plans int) {
		t.Helper()
		r := query(t, url, `SELECT coalesce(sum(calls), 0) || ' ' || coalesce(sum(plans), 0) FROM pg_stat_statements
			WHERE query LIKE 'WITH fence AS MATERIALIZED%'`)
		if len(r) != 1 {
			t.Fatalf("pg_stat_statements: %v", r)
		}
		if _, err := fmt.Sscan(r[0], &calls, &plans); err != nil {
			t.Fatalf("pg_stat_statements: %q: %v", r[0], err)
		}
		return calls, plans
	}
	eventually(t, 10*time.Second, "the flush statement run (warmed) before any timer is due", func() bool {
		calls, _ := stats()
		return calls > 0
	})
	n.hooks.Flushing(func() {
		held := n.pool.AcquireAllIdle(ctx)
		time.AfterFunc(50*time.Millisecond, func() {
			for _, c := range held {
				c.Release()
			}
		})
	})
	const tasks = 5
	for i := range tasks {
		if r := n.PutBatch(ctx, "q", []task.PutRequest{{Delay: 50 * time.Millisecond}}); r[0].Err != nil {
			t.Fatal(r[0].Err)
		}
		ts, err := n.ReserveQueues(ctx, []string{"q"}, 1, 5*time.Second)
		if err != nil || len(ts) != 1 {
			t.Fatalf("task %d: reserved %d, %v; want it", i, len(ts), err)
		}
	}
	calls, plans := stats()
	if calls < tasks+1 {
		t.Errorf("the flush statement ran %d times, want at least %d (a warm-up and a flush a task)", calls, tasks+1)
	}
	if plans != 1 {
		t.Errorf("the flush statement was planned %d times in %d runs, want once", plans, calls)
	}
}
