package pgtest_test

import (
	"context"
	"testing"

	"github.com/hourglass-go/hourglass/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// TestStart: a server starts, gives two databases apart, keeps a commit
// across a SIGKILL, and says it runs with fsync and synchronous commits.
func TestStart(t *testing.T) {
	s := pgtest.Start(t)
	ctx := context.Background()
	a, b := s.CreateDatabase(t), s.CreateDatabase(t)
	if a == b {
		t.Fatalf("two databases with one URL %s", a)
	}
	conn, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"fsync", "synchronous_commit"} {
		var v string
		if err := conn.QueryRow(ctx, "SHOW "+name).Scan(&v); err != nil || v != "on" {
			t.Fatalf("SHOW %s = %q, %v; want on", name, v, err)
		}
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE t (v int); INSERT INTO t VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)

	s.Kill()
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	conn, err = pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var v int
	if err := conn.QueryRow(ctx, "SELECT v FROM t").Scan(&v); err != nil || v != 42 {
		t.Fatalf("after SIGKILL and restart: %d, %v; want 42", v, err)
	}
}
