package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hourglass-go/hourglass/internal/pgtest"
)

// TestVacuum_ThresholdScalesWithLiveTuples: the threshold of dead tuples
// is base + scale × live tuples, the scale a fraction. With 2,500 live
// and 1,500 dead tuples, base 1,000 and scale 0.4 (a threshold of 2,000)
// the table is not vacuumed; with scale 0.1 (1,250) it is. The scale was
// once sent as a bigint, rounded to 0, and a table of a million tasks was
// vacuumed, indexes and all, each second that 1,000 of its tuples died.
func TestVacuum_ThresholdScalesWithLiveTuples(t *testing.T) {
	ctx := context.Background()
	raw := deadTasks(t, 4000, 0)
	if _, err := raw.Exec(ctx, `DELETE FROM hourglass_tasks WHERE job_id <= 1500`); err != nil {
		t.Fatal(err)
	}
	// The statistics reach pg_stat_user_tables when the writers' backends
	// report them (about a second); wait for them, boundedly.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var live, dead int64
		if err := raw.QueryRow(ctx, `SELECT n_live_tup, n_dead_tup FROM pg_stat_user_tables
			WHERE relid = 'hourglass_tasks'::regclass`).Scan(&live, &dead); err != nil {
			t.Fatal(err)
		}
		if live == 2500 && dead == 1500 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("statistics: %d live, %d dead tuples; want 2500 and 1500", live, dead)
		}
		time.Sleep(50 * time.Millisecond)
	}
	n := &Node{db: &pool{raw: raw, timeout: 5 * time.Second}}
	vacuums := func() int64 {
		var v int64
		if err := raw.QueryRow(ctx, `SELECT vacuum_count FROM pg_stat_user_tables
			WHERE relid = 'hourglass_tasks'::regclass`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := n.vacuumTasks(1000, 0.4)(pctx, 0, 0); err != nil {
		t.Fatal(err)
	}
	if v := vacuums(); v != 0 {
		t.Fatalf("1,500 dead of 2,500 live tuples, threshold 1,000 + 0.4 × live: %d vacuums, want none", v)
	}
	if _, err := n.vacuumTasks(1000, 0.1)(pctx, 0, 0); err != nil {
		t.Fatal(err)
	}
	// The vacuum's count is reported by its backend, as the writers' are.
	for v := vacuums(); v != 1; v = vacuums() {
		if time.Now().After(deadline) {
			t.Fatalf("1,500 dead of 2,500 live tuples, threshold 1,000 + 0.1 × live: %d vacuums, want 1", v)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// deadTasks returns a pool on a migrated database of its own whose
// hourglass_tasks holds n dead tasks (job ids 1 to n) with payloads of
// size bytes.
func deadTasks(t *testing.T, n, size int) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	raw := pgtest.Pool(t, pgtest.Start(t).CreateDatabase(t), 2, ConfigurePool)
	if _, _, err := Migrate(ctx, raw); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(ctx, `INSERT INTO hourglass_tasks (job_id, partition, queue, id, state, priority, due,
			created, ttr, attempts, max_attempts, lease, lease_until, timeouts, releases, buries, kicks, payload)
		SELECT i, 0, 'q', i::text, 3, 0, 0, 0, 0, 0, 0, '', 0, 0, 0, 0, 0, convert_to(repeat('x', $2), 'UTF8')
		FROM generate_series(1, $1::int) AS i`, n, size); err != nil {
		t.Fatal(err)
	}
	return raw
}
