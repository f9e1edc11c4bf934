package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/hourglass-go/hourglass/internal/retry"
)

// The node that owns partition 0 vacuums hourglass_tasks itself, as it
// prunes the history (startPruners), when enough of it died since its
// last vacuum.
//
// Every worked task leaves two dead versions of its row: a reservation's
// update is not a HOT one (state and fire_at are in the partial indexes'
// predicates and in hourglass_tasks_timers), and its ack or delete
// removes the row. A reserve walks hourglass_tasks_ready from the head of
// its queue, so it reads the entries of every task reserved since the
// table's last vacuum (marked dead at the first visit, still read), and an
// ack reads the dead entries of hourglass_tasks_queue_id: a cost a task
// that grows with the tasks worked since the last vacuum. Autovacuum
// visits a database at most once per autovacuum_naptime (a minute by
// default, a server setting this package does not own) and is throttled
// by its cost delay, so at thousands of tasks a second the dead head
// grows to hundreds of thousands of entries between its visits.
//
// Every vacuumEvery the node reads the table's dead and live tuples
// (pg_stat_user_tables, which lags the commits by up to a second or so)
// and vacuums it when more than vacuumBase + vacuumScale × live tuples
// are dead: a table of 100,000 tasks worked at 7,500 a second is
// vacuumed about every second; one of a million pending, about every
// 100,000 dead tuples, since a vacuum with dead entries to remove scans
// every index of the table in full. VACUUM (SKIP_LOCKED) skips the table
// when another vacuum (autovacuum's, say) holds it; it takes no lock that
// writers wait for.

const (
	// vacuumEvery is the time between two looks at the table's dead
	// tuples: retry.Pruner runs a round every quarter of its Retention.
	vacuumEvery = time.Second
	// vacuumBase and vacuumScale make the threshold of dead tuples: a
	// fixed part, so that a small table is not vacuumed at every look,
	// and a part of the live tuples, so that a vacuum's full scan of the
	// indexes stays a small cost per dead tuple on a large table.
	vacuumBase  = 1000
	vacuumScale = 0.1
)

// sqlVacuumDue says whether hourglass_tasks has more than $1 + $2 × its
// live tuples dead: one read of the statistics, O(1). $2 is a fraction:
// cast, since PostgreSQL would take it for a bigint like n_live_tup and
// the driver would send 0.1 as 0 (a table of a million tasks vacuumed,
// every index in full, each second that a thousand of its tuples died).
const sqlVacuumDue = `SELECT coalesce((SELECT n_dead_tup > $1 + $2::float8 * n_live_tup
	FROM pg_stat_user_tables WHERE relid = 'hourglass_tasks'::regclass), false)`

// sqlVacuum vacuums the tasks' table, unless another vacuum holds it,
// in the node's backend alone (PARALLEL 0) and without truncating the
// table's empty tail (TRUNCATE false):
//   - a parallel vacuum starts a process per index worker (two here) at
//     each vacuum, about one a second under load, and the CPU of their
//     start comes on top of the same index work, on a server whose CPU
//     the reserves and acks need; a vacuum in one backend blocks no one
//     the longer, since it takes no lock that writers wait for;
//   - truncating takes the table's ACCESS EXCLUSIVE lock, which every
//     reserve, ack and put waits for while the vacuum reads the empty
//     pages back to front (a drained queue: 0.3 s seen), and the pages it
//     gives back are the ones the next puts take again. The empty pages
//     stay in the free space map for the next rows; autovacuum, which
//     yields that lock to waiters, may still truncate.
const sqlVacuum = `VACUUM (SKIP_LOCKED, PARALLEL 0, TRUNCATE false) hourglass_tasks`

// vacuumTasks is a retry.PruneFunc that vacuums hourglass_tasks when
// more than base + scale × its live tuples are dead, and returns 0, so
// that its round ends there: age and max are the pruner's and mean
// nothing here. It holds one connection of the pool while the vacuum
// runs. Its two statements are bounded by ctx's deadline
// (retry.PruneTimeout), not by the node's DBTimeout (5 s by default),
// which a vacuum of a large table outlasts: cut off, it would start
// over at every round and never end.
func (n *Node) vacuumTasks(base int64, scale float64) retry.PruneFunc {
	return func(ctx context.Context, _ time.Duration, _ int) (int, error) {
		var due bool
		if err := n.db.raw.QueryRow(ctx, sqlVacuumDue, base, scale).Scan(&due); err != nil {
			return 0, err
		}
		if !due {
			return 0, nil
		}
		if _, err := n.db.raw.Exec(ctx, sqlVacuum); err != nil {
			return 0, fmt.Errorf("vacuum hourglass_tasks: %w", err)
		}
		return 0, nil
	}
}

// vacuumer returns the pruner that runs vacuumTasks every vacuumEvery
// on the node that owns partition 0 (leadsPruning): its loop brings the
// back-off after a failure and logs a lasting one about once a second
// with a count (retry.FailureLog).
func (n *Node) vacuumer() *retry.Pruner {
	return &retry.Pruner{
		What:      "the dead versions of tasks (VACUUM hourglass_tasks)",
		Retention: 4 * vacuumEvery,
		Prune:     n.vacuumTasks(vacuumBase, vacuumScale),
	}
}
