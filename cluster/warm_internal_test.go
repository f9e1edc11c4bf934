package cluster

import (
	"context"
	"testing"
	"time"

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
