package cluster_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hourglass-go/hourglass/cluster"
	"github.com/hourglass-go/hourglass/internal/pgtest"
	"github.com/hourglass-go/hourglass/task"
)

// coldUses records the hot statements run on a connection that was not
// warmed (cluster/warm.go), and counts those run on a warm one.
type coldUses struct {
	mu   sync.Mutex
	cold []string
	warm int
}

func (c *coldUses) use(conn *pgx.Conn, sql string) {
	if !slices.Contains(cluster.HotStatements, sql) {
		return
	}
	_, warm := conn.PgConn().CustomData()[cluster.WarmedKey]
	c.mu.Lock()
	defer c.mu.Unlock()
	if warm {
		c.warm++
	} else {
		c.cold = append(c.cold, sql[:min(len(sql), 40)])
	}
}

func (c *coldUses) TraceQueryStart(ctx context.Context, conn *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.use(conn, d.SQL)
	return ctx
}
func (c *coldUses) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *coldUses) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (c *coldUses) TraceBatchQuery(_ context.Context, conn *pgx.Conn, d pgx.TraceBatchQueryData) {
	c.use(conn, d.SQL)
}
func (c *coldUses) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (c *coldUses) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cold, c.warm = nil, 0
}

func (c *coldUses) result() ([]string, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.cold), c.warm
}

// hotPrepared returns how many of the hot statements conn has prepared,
// and how many of them keep a generic plan.
func hotPrepared(t *testing.T, conn *pgx.Conn) (hot, planned int) {
	t.Helper()
	err := conn.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE statement = ANY($1)),
		count(*) FILTER (WHERE statement = ANY($1) AND generic_plans > 0) FROM pg_prepared_statements`,
		cluster.HotStatements).Scan(&hot, &planned)
	if err != nil {
		t.Fatal(err)
	}
	return hot, planned
}

// cycle puts a task due now through n, reserves it and acks it.
func cycle(t *testing.T, n *cluster.Node) {
	t.Helper()
	ctx := context.Background()
	if _, _, err := svc(n).Put(ctx, "warm", task.PutRequest{}); err != nil {
		t.Fatal(err)
	}
	ts, err := svc(n).Reserve(ctx, "warm", 1, 5*time.Second)
	if err != nil || len(ts) != 1 {
		t.Fatalf("reserve: %v, %v", ts, err)
	}
	if err := svc(n).Ack(ctx, "warm", ts[0].ID, ts[0].Lease); err != nil {
		t.Fatal(err)
	}
}

// TestWarm_PoolWarmWhenOpen: once Open returns (the node says it is
// ready), the pool's first connections, opened before Open migrated the
// schema, have the hot statements prepared; a put, a
// reserve and an ack then run no hot statement on a cold connection.
// After a cut of every connection, the ones the pool opens again are
// warmed before their first use too.
func TestWarm_PoolWarmWhenOpen(t *testing.T) {
	url := server(t).CreateDatabase(t)
	uses := &coldUses{}
	pool := pgtest.Pool(t, url, 8, func(cfg *pgxpool.Config) {
		cfg.MinConns = 4
		cfg.ConnConfig.Tracer = uses
	}, cluster.ConfigurePool)
	n, err := cluster.Open(context.Background(), pool, cluster.Options{Node: "a", Lease: testLease, Window: testWindow, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	ctx := context.Background()
	var conns []*pgxpool.Conn
	for range 4 {
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for i, c := range conns {
		if hot, _ := hotPrepared(t, c.Conn()); hot != len(cluster.HotStatements) {
			t.Errorf("connection %d: %d of %d hot statements prepared", i, hot, len(cluster.HotStatements))
		}
		c.Release()
	}
	cycle(t, n)
	if cold, warm := uses.result(); len(cold) > 0 || warm == 0 {
		t.Errorf("after Open: hot statements run on cold connections: %q (%d on warm ones)", cold, warm)
	}

	// A cut: every connection of the database ended; the pool opens new
	// ones as the node needs them.
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()`); err != nil {
		t.Fatal(err)
	}
	pool.Reset()
	eventually(t, 10*time.Second, "a put after the cut", func() bool {
		_, _, err := svc(n).Put(ctx, "other", task.PutRequest{})
		return err == nil
	})
	uses.reset()
	cycle(t, n)
	if cold, warm := uses.result(); len(cold) > 0 || warm == 0 {
		t.Errorf("after the cut: hot statements run on cold connections: %q (%d on warm ones)", cold, warm)
	}
}

// TestWarm_Bounded: a warm-up held up (a table locked by another session)
// gives up within its bound, and the connection is handed out usable
// (cold: the plans, made first in one round trip, failed, so nothing was
// prepared after them); once the lock is gone, a new connection is
// warmed, and keeps no plan of the warm-up (made over empty tables).
func TestWarm_Bounded(t *testing.T) {
	url := server(t).CreateDatabase(t)
	pool := pgtest.Pool(t, url, 4, func(cfg *pgxpool.Config) {
		cfg.ConnConfig.ConnectTimeout = 3 * time.Second
	}, cluster.ConfigurePool)
	ctx := context.Background()
	if _, _, err := cluster.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	pool.Reset()
	// hourglass_partitions is read by one hot statement (sqlRenew),
	// whose plan waits for the lock.
	locker, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close(ctx)
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE hourglass_partitions IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := pool.Acquire(actx)
	if err != nil {
		t.Fatalf("acquiring a connection while its warm-up is held up: %v", err)
	}
	if _, warm := c.Conn().PgConn().CustomData()[cluster.WarmedKey]; warm {
		t.Error("connection warmed while a table it plans was locked")
	}
	if hot, _ := hotPrepared(t, c.Conn()); hot != 0 {
		t.Errorf("%d hot statements prepared on the server after the failed warm-up, want none", hot)
	}
	var n int
	if err := c.Conn().QueryRow(ctx, "SELECT 1").Scan(&n); err != nil || n != 1 {
		t.Errorf("connection not usable after the failed warm-up: %v", err)
	}
	c.Release()
	tx.Rollback(ctx)
	pool.Reset()
	c, err = pool.Acquire(actx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	if hot, planned := hotPrepared(t, c.Conn()); hot != len(cluster.HotStatements) || planned != 0 {
		t.Errorf("after the lock: %d hot statements prepared, %d generic plans kept; want %d, none",
			hot, planned, len(cluster.HotStatements))
	}
}

// TestWarm_OpenBounded: a node whose warm-up is held up (a table of the
// hot statements locked by another session) still opens, within the
// warm-up's bound, and serves once the lock is gone.
func TestWarm_OpenBounded(t *testing.T) {
	url := server(t).CreateDatabase(t)
	pool := pgtest.Pool(t, url, 8, func(cfg *pgxpool.Config) { cfg.MinConns = 2 }, cluster.ConfigurePool)
	ctx := context.Background()
	if _, _, err := cluster.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	pool.Reset()
	locker, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close(ctx)
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE hourglass_dedupe IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	type opened struct {
		n   *cluster.Node
		err error
	}
	done := make(chan opened, 1)
	go func() {
		n, err := cluster.Open(ctx, pool, cluster.Options{Node: "a", Lease: testLease, Window: testWindow, Logger: quiet})
		done <- opened{n, err}
	}()
	var o opened
	select {
	case o = <-done:
	case <-time.After(30 * time.Second):
		tx.Rollback(ctx)
		<-done
		t.Fatal("Open waited for the warm-up past its bound")
	}
	tx.Rollback(ctx)
	if o.err != nil {
		t.Fatal(o.err)
	}
	t.Cleanup(func() { o.n.Close() })
	cycle(t, o.n)
}
