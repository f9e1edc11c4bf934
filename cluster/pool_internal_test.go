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
