package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hourglass-go/hourglass/internal/pgtest"
	"github.com/hourglass-go/hourglass/task"
)

// TestOwnConn: the connection of its own runs every statement on one
// server process, warmed once when opened; a statement the server refuses
// keeps it; a lost connection or a statement cut short by the pool's
// timeout (an unreachable database, task.ErrClosed) has the next
// statement open and warm another; close closes it; and where the
// warm-up fails, the pool runs the statement.
func TestOwnConn(t *testing.T) {
	url := pgtest.Start(t).CreateDatabase(t)
	p := &pool{raw: pgtest.Pool(t, url, 2, ConfigurePool), timeout: 300 * time.Millisecond}
	warmed := 0
	c := newOwnConn(p, func(ctx context.Context, conn *pgx.Conn) error {
		warmed++
		_, err := conn.Exec(ctx, "SELECT 1")
		return err
	})
	defer c.close()
	bg := context.Background()
	pid := func() int32 {
		t.Helper()
		rows, err := c.Query(bg, "SELECT pg_backend_pid(), current_setting('plan_cache_mode')")
		if err != nil {
			t.Fatal(err)
		}
		var id int32
		var mode string
		for rows.Next() {
			if err := rows.Scan(&id, &mode); err != nil {
				t.Fatal(err)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if mode != "force_generic_plan" {
			t.Errorf("plan_cache_mode = %q, want the pool's force_generic_plan", mode)
		}
		return id
	}
	first := pid()
	if again := pid(); again != first || warmed != 1 {
		t.Fatalf("two statements on backends %d and %d, warmed %d times; want one backend, warmed once", first, again, warmed)
	}

	// The server's refusal: the connection stays.
	rows, err := c.Query(bg, "SELECT 1/0")
	if err == nil {
		for rows.Next() {
		}
		rows.Close()
		err = rows.Err()
	}
	if err == nil || !strings.Contains(err.Error(), "division by zero") {
		t.Fatalf("SELECT 1/0: %v, want division by zero", err)
	}
	if got := pid(); got != first || warmed != 1 {
		t.Fatalf("after the server's refusal: backend %d (was %d), warmed %d times; want the same connection", got, first, warmed)
	}

	// The connection lost: the next statement fails or reconnects, and
	// the one after runs on a new, warmed connection.
	if _, err := p.Exec(bg, "SELECT pg_terminate_backend($1)", first); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if rows, err := c.Query(bg, "SELECT 1"); err == nil {
		for rows.Next() {
		}
		rows.Close()
	}
	second := pid()
	if second == first || warmed != 2 {
		t.Fatalf("after its backend was terminated: backend %d (was %d), warmed %d times; want a new connection, warmed", second, first, warmed)
	}

	// A statement past the pool's timeout: unreachable, then a new
	// connection.
	rows, err = c.Query(bg, "SELECT pg_sleep(5)")
	if err == nil {
		for rows.Next() {
		}
		rows.Close()
		err = rows.Err()
	}
	if !errors.Is(err, task.ErrClosed) || !strings.HasPrefix(err.Error(), "hourglass: database unreachable: no answer within 300ms") {
		t.Fatalf("a statement past the timeout: %v, want hourglass: database unreachable: no answer within 300ms", err)
	}
	if third := pid(); third == second || warmed != 3 {
		t.Fatalf("after a statement cut short: backend %d (was %d), warmed %d times; want a new connection, warmed", third, second, warmed)
	}

	// A failed warm-up leaves no connection: the pool answers.
	c.close()
	c.warm = func(ctx context.Context, conn *pgx.Conn) error { return errors.New("warm failed") }
	rows, err = c.Query(bg, "SELECT 1")
	if err == nil {
		rows.Close()
		err = rows.Err()
	}
	if err != nil || c.conn != nil {
		t.Fatalf("a failed warm-up: %v, connection %v; want the pool's answer and no connection of its own", err, c.conn)
	}
}

// TestOwnConn_NoRoom: where the server refuses a new connection (at
// max_connections) the statement runs through the pool's connections,
// the next try to open one waits a back-off, and the connection of its
// own is opened once there is room again.
func TestOwnConn_NoRoom(t *testing.T) {
	srv := pgtest.Start(t, pgtest.Set("max_connections", "4"), pgtest.Set("superuser_reserved_connections", "0"))
	url := srv.CreateDatabase(t)
	raw := pgtest.Pool(t, url, 2, ConfigurePool)
	p := &pool{raw: raw, timeout: 2 * time.Second}
	bg := context.Background()
	// The pool's two connections, open and idle.
	var held []*pgx.Conn
	a, err1 := raw.Acquire(bg)
	b, err2 := raw.Acquire(bg)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	a.Release()
	b.Release()
	// The rest of the server's connections taken.
	for {
		conn, err := pgx.Connect(bg, url)
		if err != nil {
			break
		}
		held = append(held, conn)
		if len(held) > 4 {
			t.Fatal("the server took more connections than max_connections")
		}
	}
	warmed := 0
	c := newOwnConn(p, func(ctx context.Context, conn *pgx.Conn) error { warmed++; return nil })
	defer c.close()
	query := func() error {
		rows, err := c.Query(bg, "SELECT 1")
		if err != nil {
			return err
		}
		for rows.Next() {
		}
		rows.Close()
		return rows.Err()
	}
	if err := query(); err != nil || c.conn != nil || warmed != 0 {
		t.Fatalf("with no room for a connection: %v, own connection %v, warmed %d; want the pool's answer", err, c.conn, warmed)
	}
	if c.retryAt.IsZero() {
		t.Fatal("a failure to open a connection set no back-off")
	}
	// Again (within the back-off, or past it with still no room): the
	// pool's.
	if err := query(); err != nil || c.conn != nil || warmed != 0 {
		t.Fatalf("again with no room: %v, own connection %v, warmed %d; want the pool's answer", err, c.conn, warmed)
	}
	for _, h := range held {
		h.Close(bg)
	}
	// The back-off's first wait is about retry.DefaultBase.
	for end := time.Now().Add(5 * time.Second); c.conn == nil && time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if err := query(); err != nil {
			t.Fatal(err)
		}
	}
	if c.conn == nil || warmed != 1 || c.backoff.Failures() != 0 {
		t.Fatalf("with room again: own connection %v, warmed %d, back-off failures %d; want its own, warmed once, the back-off reset",
			c.conn, warmed, c.backoff.Failures())
	}
}
