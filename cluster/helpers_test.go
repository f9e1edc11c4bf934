package cluster_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/cluster"
	"github.com/hourglass-go/hourglass/internal/pgtest"
	"github.com/hourglass-go/hourglass/service"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

var _ service.Engine = (*cluster.Node)(nil)

// Test timings: leases and windows short enough that takeovers and window
// loads happen within a test.
const (
	testLease  = 600 * time.Millisecond
	testWindow = 2 * time.Second
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// testNode is a node with its own pool, as a process of its own would
// have.
type testNode struct {
	*cluster.Node
	pool  *pgxpool.Pool
	hooks *cluster.Hooks
}

// startNode opens node name on the database at url, closed when t ends
// (unless crashed).
func startNode(t testing.TB, url, name string, opts ...func(*cluster.Options)) *testNode {
	t.Helper()
	pool := pgtest.Pool(t, url, 8, cluster.ConfigurePool)
	h := &cluster.Hooks{}
	o := cluster.Options{Node: name, Lease: testLease, Window: testWindow, Logger: quiet}
	for _, f := range opts {
		f(&o)
	}
	n, err := cluster.Open(context.Background(), pool, cluster.WithHooks(o, h))
	if err != nil {
		t.Fatalf("Open(%s): %v", name, err)
	}
	tn := &testNode{Node: n, pool: pool, hooks: h}
	t.Cleanup(func() { n.Close() })
	return tn
}

// crash stops tn as a killed process would stop: no lease released, its
// connections cut.
func (tn *testNode) crash() {
	tn.Node.Crash()
	tn.pool.Close()
}

// server returns a PostgreSQL server for the test, and a new database on
// it for each call of db.
func server(t *testing.T) *pgtest.Server {
	return pgtest.Start(t, pgtest.Set("max_connections", "400"))
}

// eventually polls cond every 10 ms until it holds or within passes.
func eventually(t testing.TB, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

// migratedTo returns a new database whose schema is what Migrate makes
// of the first version migrations, its version table included, and a
// pool on it: the database an older binary left, for a migration test.
func migratedTo(t *testing.T, version int) (string, *pgxpool.Pool) {
	t.Helper()
	url := server(t).CreateDatabase(t)
	pool := pgtest.Pool(t, url, 8, cluster.ConfigurePool)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE hourglass_migrations (version integer PRIMARY KEY,
		name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		t.Fatal(err)
	}
	for _, m := range cluster.Migrations()[:version] {
		if _, err := pool.Exec(ctx, m.SQL); err != nil {
			t.Fatalf("%s: %v", m.Name, err)
		}
		if _, err := pool.Exec(ctx, "INSERT INTO hourglass_migrations (version, name) VALUES ($1, $2)", m.Version, m.Name); err != nil {
			t.Fatal(err)
		}
	}
	return url, pool
}

// startMetered is startNode with the node's metrics registered on a
// registry of their own, returned for the test to read.
func startMetered(t testing.TB, url, name string, opts ...func(*cluster.Options)) (*testNode, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	return startNode(t, url, name, append([]func(*cluster.Options){func(o *cluster.Options) { o.Registerer = reg }}, opts...)...), reg
}
