package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/internal/pgtest"
)

// TestVacuum_NotCutByDBTimeout: the vacuum's statements run within the
// pruner's deadline, not the node's DBTimeout, which a vacuum of a
// large table outlasts: with a DBTimeout that no statement meets, the
// vacuum still runs.
func TestVacuum_NotCutByDBTimeout(t *testing.T) {
	ctx := context.Background()
	raw := pgtest.Pool(t, pgtest.Start(t).CreateDatabase(t), 2, ConfigurePool)
	if _, _, err := Migrate(ctx, raw); err != nil {
		t.Fatal(err)
	}
	n := &Node{db: &pool{raw: raw, timeout: time.Nanosecond}}
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	// base -1: due whatever the dead tuples.
	if _, err := n.vacuumTasks(-1, 0)(pctx, 0, 0); err != nil {
		t.Fatalf("vacuum with a DBTimeout of 1 ns: %v", err)
	}
	var vacuums int64
	if err := raw.QueryRow(ctx, `SELECT vacuum_count FROM pg_stat_user_tables
		WHERE relid = 'hourglass_tasks'::regclass`).Scan(&vacuums); err != nil || vacuums != 1 {
		t.Fatalf("vacuums of hourglass_tasks: %d, %v; want 1", vacuums, err)
	}
}
