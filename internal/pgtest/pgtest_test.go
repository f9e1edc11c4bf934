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

// TestStandby: a synchronous standby has every commit the primary
// answered; after the primary's SIGKILL and the standby's promotion, a
// multi-host URL asking for a read-write session reaches the new primary
// and finds the commit.
func TestStandby(t *testing.T) {
	p := pgtest.Start(t)
	db := pgtest.Database(p.CreateDatabase(t))
	s := p.StartStandby(t, "standby")
	url := pgtest.URL(db, "target_session_attrs=read-write", p, s)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE t (v int); INSERT INTO t VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)

	p.Kill()
	if _, err := pgx.Connect(ctx, url); err == nil {
		t.Fatal("a read-write session on a standby before its promotion")
	}
	if err := s.Promote(); err != nil {
		t.Fatal(err)
	}
	conn, err = pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var v int
	if err := conn.QueryRow(ctx, "SELECT v FROM t").Scan(&v); err != nil || v != 42 {
		t.Fatalf("on the promoted standby: %d, %v; want 42", v, err)
	}
	if _, err := conn.Exec(ctx, "INSERT INTO t VALUES (43)"); err != nil {
		t.Fatalf("writing on the promoted standby: %v", err)
	}
}
