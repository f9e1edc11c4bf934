package cluster

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hourglass-go/hourglass/internal/pgtest"
)

// TestOwnConn_BackendRead: the flusher's connection of its own knows its
// backend once opened, so that its first leasing call (a flush handing
// tasks over) does not read pg_stat_activity first.
func TestOwnConn_BackendRead(t *testing.T) {
	url := pgtest.Start(t).CreateDatabase(t)
	p := &pool{raw: pgtest.Pool(t, url, 2, ConfigurePool), timeout: 5 * time.Second}
	c := newOwnConn(p, nil)
	defer c.close()
	conn, err := c.open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b, ok := conn.PgConn().CustomData()[backendKey].(backend)
	if !ok || uint32(b.pid) != conn.PgConn().PID() {
		t.Errorf("backend known once opened: %v %+v, want the connection's (pid %d)", ok, b, conn.PgConn().PID())
	}
}

// TestWarm_ParamCount: paramCount gives, for each hot statement, the
// number of parameters the server finds in it (the EXPLAIN EXECUTE of
// planAll names that many).
func TestWarm_ParamCount(t *testing.T) {
	url := pgtest.Start(t).CreateDatabase(t)
	raw := pgtest.Pool(t, url, 2)
	ctx := context.Background()
	if _, _, err := Migrate(ctx, raw); err != nil {
		t.Fatal(err)
	}
	c, err := raw.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	for i, sql := range hotStatements {
		sd, err := c.Conn().Prepare(ctx, "", sql)
		if err != nil {
			t.Fatal(err)
		}
		if got := paramCount(sql); got != len(sd.ParamOIDs) {
			t.Errorf("hot statement %d (%.40s): paramCount %d, the server's %d", i, sql, got, len(sd.ParamOIDs))
		}
	}
}

// TestWarm_RoundTrips: a connection's warm-up sends a bounded number of
// messages, not four round trips per hot statement: each is a wait for
// the server's process and then for this one's, which on busy cores made
// a warm-up, and the caller that had the pool open the connection, wait
// hundreds of milliseconds. Counted as the writes on the connection from
// its start to its first hand-out (the start-up message included).
func TestWarm_RoundTrips(t *testing.T) {
	url := pgtest.Start(t).CreateDatabase(t)
	ctx := context.Background()
	if _, _, err := Migrate(ctx, pgtest.Pool(t, url, 1)); err != nil {
		t.Fatal(err)
	}
	var writes atomic.Int64
	raw := pgtest.Pool(t, url, 1, ConfigurePool, func(cfg *pgxpool.Config) {
		dial := cfg.ConnConfig.DialFunc
		cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &countWrites{Conn: c, n: &writes}, nil
		}
	})
	c, err := raw.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	if !warmed(c.Conn()) {
		t.Fatal("connection not warmed")
	}
	if n, most := writes.Load(), int64(len(hotStatements)+8); n > most {
		t.Errorf("%d writes to warm a connection for %d hot statements, want at most %d", n, len(hotStatements), most)
	}
	t.Logf("%d writes", writes.Load())
}

// countWrites counts the writes on a connection.
type countWrites struct {
	net.Conn
	n *atomic.Int64
}

func (c *countWrites) Write(b []byte) (int, error) {
	c.n.Add(1)
	return c.Conn.Write(b)
}
