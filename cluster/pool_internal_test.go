package cluster

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hourglass-go/hourglass/internal/pgtest"
	"github.com/hourglass-go/hourglass/task"
)

// TestPool_Deadline: every call of the node's pool ends by its timeout
// (then as unreachable: task.ErrClosed) or by its caller's deadline if
// sooner (then as the caller's context.DeadlineExceeded), on a database
// that takes longer; answers in time pass unchanged (pgx.ErrNoRows as
// itself).
func TestPool_Deadline(t *testing.T) {
	url := pgtest.Start(t).CreateDatabase(t)
	p := &pool{raw: pgtest.Pool(t, url, 4, ConfigurePool), timeout: 200 * time.Millisecond}
	const slow = "SELECT pg_sleep(5)"
	bg := context.Background()
	calls := map[string]func(ctx context.Context) error{
		"Exec": func(ctx context.Context) error { _, err := p.Exec(ctx, slow); return err },
		"Query": func(ctx context.Context) error {
			rows, err := p.Query(ctx, slow)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
			}
			return rows.Err()
		},
		"QueryRow": func(ctx context.Context) error { return p.QueryRow(ctx, slow).Scan(new(any)) },
		"Tx.Exec": func(ctx context.Context) error {
			return pgx.BeginFunc(bg, p, func(tx pgx.Tx) error { _, err := tx.Exec(ctx, slow); return err })
		},
	}
	for name, call := range calls {
		start := time.Now()
		err := call(bg)
		if took := time.Since(start); took > 4*time.Second {
			t.Errorf("%s without a deadline took %v, want the pool's timeout (200ms)", name, took)
		}
		if !errors.Is(err, task.ErrClosed) || !strings.HasPrefix(err.Error(), "hourglass: database unreachable: no answer within 200ms") {
			t.Errorf("%s without a deadline: %v, want hourglass: database unreachable: no answer within 200ms", name, err)
		}
		ctx, cancel := context.WithTimeout(bg, 50*time.Millisecond)
		err = call(ctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, task.ErrClosed) {
			t.Errorf("%s with a deadline sooner: %v, want the caller's context.DeadlineExceeded", name, err)
		}
	}
	var k int
	if err := p.QueryRow(bg, "SELECT 1").Scan(&k); err != nil || k != 1 {
		t.Errorf("SELECT 1: %d, %v", k, err)
	}
	if err := p.QueryRow(bg, "SELECT 1 WHERE false").Scan(&k); err != pgx.ErrNoRows {
		t.Errorf("no row: %v, want pgx.ErrNoRows itself", err)
	}
}

// TestSpares_Ready: the keeper keeps spareConns connections idle ahead of
// demand, opening them in the background as callers take them, so that
// a caller is handed one at once rather than waiting for a connection to
// be opened and warmed (here a second, held up on purpose); and it never
// opens more than the pool's MaxConns.
func TestSpares_Ready(t *testing.T) {
	url := pgtest.Start(t).CreateDatabase(t)
	const slowOpen = time.Second
	raw := pgtest.Pool(t, url, 4, ConfigurePool, func(cfg *pgxpool.Config) {
		prev := cfg.AfterConnect
		cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
			time.Sleep(slowOpen)
			return prev(ctx, conn)
		}
	})
	p := &pool{raw: raw, timeout: 10 * time.Second}
	s := p.startSpares(slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer s.stop()
	waitFor := func(what string, ok func(st *pgxpool.Stat) bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			st := raw.Stat()
			if ok(st) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d idle of %d open", what, st.IdleConns(), st.TotalConns())
			}
		}
	}
	ctx := context.Background()
	var held []*pgxpool.Conn
	defer func() {
		for _, c := range held {
			c.Release()
		}
	}()
	for k := range 4 {
		waitFor("spares ready", func(st *pgxpool.Stat) bool {
			return st.IdleConns() >= min(spareConns, 4-int32(k)) && st.ConstructingConns() == 0
		})
		start := time.Now()
		c, err := raw.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		if took := time.Since(start); took >= slowOpen {
			t.Errorf("acquire %d took %v: it opened a connection, though spares were ready", k, took)
		}
	}
	time.Sleep(50 * spareEvery)
	if st := raw.Stat(); st.TotalConns() != 4 {
		t.Errorf("%d connections open, want the pool's MaxConns, 4", st.TotalConns())
	}
	if s.opened.Load() < 4 {
		t.Errorf("the keeper opened %d connections, want 4", s.opened.Load())
	}
}

// TestPool_AwaitsIdle: while the keeper runs, a call that finds no
// connection idle (all taken, room left) waits for one handed back a
// moment later rather than having the pool open one for it (here a
// second, held up on purpose).
func TestPool_AwaitsIdle(t *testing.T) {
	url := pgtest.Start(t).CreateDatabase(t)
	const slowOpen = time.Second
	raw := pgtest.Pool(t, url, 6, ConfigurePool, func(cfg *pgxpool.Config) {
		prev := cfg.AfterConnect
		cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
			time.Sleep(slowOpen)
			return prev(ctx, conn)
		}
	})
	p := &pool{raw: raw, timeout: 10 * time.Second}
	s := p.startSpares(slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer s.stop()
	for deadline := time.Now().Add(20 * time.Second); raw.Stat().IdleConns() < spareConns; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no spare connections opened")
		}
	}
	ctx := context.Background()
	held := raw.AcquireAllIdle(ctx)
	if len(held) == 0 || raw.Stat().IdleConns() != 0 {
		t.Fatalf("holding the idle connections: %d held, %d idle", len(held), raw.Stat().IdleConns())
	}
	go func() {
		time.Sleep(2 * time.Millisecond)
		for _, c := range held {
			c.Release()
		}
	}()
	start := time.Now()
	if _, err := p.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took >= slowOpen {
		t.Errorf("Exec took %v: the pool opened a connection for it, though one was handed back at once", took)
	}
}
