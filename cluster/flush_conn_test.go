package cluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/cluster"
	"github.com/hourglass-go/hourglass/internal/pgtest"
	"github.com/hourglass-go/hourglass/task"
)

// plansCounted starts a server (with opts besides) whose
// pg_stat_statements counts plans, and returns the URL of a database of
// it with the extension created. No autovacuum: an autoanalyze during a
// test would have the statements planned once more, rightly.
func plansCounted(t *testing.T, opts ...pgtest.Option) string {
	t.Helper()
	srv := pgtest.Start(t, append([]pgtest.Option{pgtest.Set("shared_preload_libraries", "pg_stat_statements"),
		pgtest.Set("pg_stat_statements.track_planning", "on"),
		pgtest.Set("autovacuum", "off")}, opts...)...)
	url := srv.CreateDatabase(t)
	execSQL(t, url, "CREATE EXTENSION pg_stat_statements")
	return url
}

// TestFlush_PlannedOnce: the owner's flush statement is prepared and run
// once on each of the node's own connections (a lane each, flushLanes)
// before its first timer is due, and planned for good once a lane, just
// ahead of its first flush there (over the tables as they are then; see
// TestFlush_PlannedAhead), however busy the node's pool. Flushed through the pool, each flush landed on
// whichever connection was idle, and its first run on each connection (a
// parse, a generic plan, the catalog entries of eight tables: 4-28 ms
// against 0.6 ms warm) set the flush's p99 on the light load of issue 40.
// Here the pool's idle connections are taken away for a moment before
// each flush, as requests would hold them: through the pool the flush was
// planned at each new connection (3 times in 5 flushes), and not prepared
// before the first timer. And the node starts on empty tables, then
// 20,000 tasks are put an hour ahead before the first flush: a plan built
// at the start (a warm-up that ran the statement) read the whole table at
// every flush, thousands of buffers (and ran a nested loop of the due
// rows against the table's: seconds a flush of 500 jobs at 35k tasks).
func TestFlush_PlannedOnce(t *testing.T) {
	url := plansCounted(t, pgtest.Set("max_connections", "400"))
	n := startNode(t, url, "a")
	ctx := context.Background()
	stats := func() (calls, plans, buffers int) {
		t.Helper()
		r := query(t, url, `SELECT coalesce(sum(calls), 0) || ' ' || coalesce(sum(plans), 0) || ' ' ||
			coalesce(sum(shared_blks_hit + shared_blks_read), 0) FROM pg_stat_statements
			WHERE query LIKE 'WITH fence AS MATERIALIZED%'`)
		if len(r) != 1 {
			t.Fatalf("pg_stat_statements: %v", r)
		}
		if _, err := fmt.Sscan(r[0], &calls, &plans, &buffers); err != nil {
			t.Fatalf("pg_stat_statements: %q: %v", r[0], err)
		}
		return calls, plans, buffers
	}
	// The flusher's connection has parsed the statement (its last one).
	eventually(t, 10*time.Second, "the flush statement prepared before any timer is due", func() bool {
		return query(t, url, `SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'WITH fence AS MATERIALIZED%'`)[0] == fmt.Sprint(cluster.FlushLanes)
	})
	// 20,000 tasks of 1.5 kB, an hour ahead: about 4,000 pages, which a
	// flush planned over empty tables reads whole.
	payload := make([]byte, 1500)
	for i := range payload {
		payload[i] = byte('a' + i*7%26)
	}
	for range 200 {
		reqs := make([]task.PutRequest, 100)
		for i := range reqs {
			reqs[i] = task.PutRequest{Delay: time.Hour, Payload: payload}
		}
		for _, r := range n.PutBatch(ctx, "q", reqs) {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
	}
	n.hooks.Flushing(func() {
		held := n.pool.AcquireAllIdle(ctx)
		time.AfterFunc(50*time.Millisecond, func() {
			for _, c := range held {
				c.Release()
			}
		})
	})
	const tasks = 8
	for i := range tasks {
		if r := n.PutBatch(ctx, "q", []task.PutRequest{{Delay: 50 * time.Millisecond}}); r[0].Err != nil {
			t.Fatal(r[0].Err)
		}
		ts, err := n.ReserveQueues(ctx, []string{"q"}, 1, 5*time.Second)
		if err != nil || len(ts) != 1 {
			t.Fatalf("task %d: reserved %d, %v; want it", i, len(ts), err)
		}
	}
	calls, plans, buffers := stats()
	if calls < tasks+cluster.FlushLanes {
		t.Errorf("the flush statement ran %d times, want at least %d (the warm-ups, a flush a task)", calls, tasks+cluster.FlushLanes)
	}
	// Each of the two flush statements twice a lane: the warm-up's plan,
	// thrown away, and the run ahead of the lane's first flush (plan.go);
	// twice more for a lane whose connection is opened again on a loaded
	// machine (CI once saw a warm-up and a flush more than the lanes' in
	// 12 runs). Through the pool it was planned at each new connection,
	// and so at most flushes.
	if plans < 2*cluster.FlushLanes+1 || plans > 4*cluster.FlushLanes+4 {
		t.Errorf("the flush statements were planned %d times in %d runs on %d lanes, want twice a lane for the warm-ups and twice a lane ahead of its first flush",
			plans, calls, cluster.FlushLanes)
	}
	if calls > 0 && buffers/calls > 1000 {
		t.Errorf("a flush touched %d buffers on average with 20k tasks pending, want a few hundred at most (its plan reads by job id)", buffers/calls)
	} else if calls > 0 {
		t.Logf("%d flushes, %d buffers each on average", calls, buffers/calls)
	}
}

// TestFlush_PlannedAhead: a lane's flush statements are planned ahead of
// its first flush, a moment before the first timer armed (plan.go), so
// that the first tasks due on a node just started do not wait for the
// plan, and over the tables as they are then. Counted by
// pg_stat_statements: the warm-up plans each statement once a lane (and
// throws the plan away), the run ahead once more, and the flush that
// delivers the task plans nothing. Without it the flush planned there:
// on a loaded machine 5-9 ms more for the first tasks of each lane.
func TestFlush_PlannedAhead(t *testing.T) {
	url := plansCounted(t)
	n := startNode(t, url, "a")
	ctx := context.Background()
	const flushes = `query LIKE 'WITH fence AS MATERIALIZED%'`
	lanes := func() string {
		return query(t, url, `SELECT string_agg(pid::text, ' ' ORDER BY pid) FROM pg_stat_activity WHERE `+flushes)[0]
	}
	stats := func() (calls, plans int) {
		t.Helper()
		r := query(t, url, `SELECT coalesce(sum(calls), 0) || ' ' || coalesce(sum(plans), 0) FROM pg_stat_statements WHERE `+flushes)
		if _, err := fmt.Sscan(r[0], &calls, &plans); err != nil {
			t.Fatalf("pg_stat_statements: %q: %v", r[0], err)
		}
		return calls, plans
	}
	const statements = 2 // sqlFlushDue and sqlFlush
	eventually(t, 10*time.Second, "both lanes warmed (a plan a statement a lane)", func() bool {
		_, plans := stats()
		return plans == statements*cluster.FlushLanes
	})
	before := lanes()
	if r := n.PutBatch(ctx, "q", []task.PutRequest{{Delay: 700 * time.Millisecond}}); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	ts, err := n.ReserveQueues(ctx, []string{"q"}, 1, 5*time.Second)
	if err != nil || len(ts) != 1 {
		t.Fatalf("reserved %d, %v; want the task", len(ts), err)
	}
	calls, plans := stats()
	if after := lanes(); after != before {
		t.Fatalf("the lanes' connections changed (backends %s, then %s): the count below says nothing", before, after)
	}
	if want := 2 * statements * cluster.FlushLanes; plans != want || calls <= want {
		t.Errorf("once the task was delivered: %d plans in %d calls, want %d plans (the warm-ups' and the runs ahead, none by the flush) in more calls",
			plans, calls, want)
	}
}
