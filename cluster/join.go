package cluster

import (
	"context"
	"fmt"
	"github.com/hourglass-go/hourglass/internal/retry"
	"time"

	"github.com/jackc/pgx/v5"
)

// Joining and leaving the cluster: the node's heartbeat row, the wait for
// a previous run's leases, and the release on Close.

// register writes the node's heartbeat row, waiting up to two leases for
// a previous process under the same name to be declared dead, trying
// again after a back-off from a tenth of a second to a third of a lease.
func (m *membership) register(ctx context.Context) error {
	deadline := time.Now().Add(2 * m.lease)
	backoff := retry.Backoff{Base: min(retry.DefaultBase, m.lease/3), Max: m.lease / 3}
	for {
		// A row left by a previous run (xmax set: the insert updated it)
		// means that run did not leave: Close deletes it.
		var unclean bool
		err := m.db.QueryRow(ctx, `INSERT INTO hourglass_nodes (name, instance, alive_until, started)
			VALUES ($1, $2, clock_timestamp() + $3::bigint * interval '1 microsecond', clock_timestamp())
			ON CONFLICT (name) DO UPDATE SET instance = EXCLUDED.instance,
				alive_until = EXCLUDED.alive_until, started = EXCLUDED.started
			WHERE hourglass_nodes.alive_until < clock_timestamp()
			RETURNING xmax <> 0`,
			m.name, m.instance, m.lease.Microseconds()).Scan(&unclean)
		if err != nil && err != pgx.ErrNoRows {
			return dbErr(err)
		}
		if err == nil {
			m.reach.ok()
			if unclean {
				m.log.Warn("hourglass: node was not closed cleanly (a crash, or a lost database connection): its partitions are taken back once their leases run out, and the tasks it had handed out come back when their own leases do", "node", m.name)
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: %q", ErrNameInUse, m.name)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff.Next()):
		}
	}
}

// awaitPreviousLeases waits until the partition leases that a previous
// run of this node still holds have run out (register waited for its
// heartbeat, which each round renews just before them, so this is
// usually a few milliseconds, and never over a lease), so that the first
// round takes them back, at a new epoch, and Open's flush makes their
// overdue tasks ready: a restarted node is ready when its tasks are,
// and no two runs ever hold a partition's lease at once.
func (m *membership) awaitPreviousLeases(ctx context.Context) error {
	var until *int64
	err := m.db.QueryRow(ctx, `SELECT (extract(epoch FROM max(lease_until)) * 1000000000)::bigint
		FROM hourglass_partitions WHERE owner = $1 AND lease_until > clock_timestamp()`, m.name).Scan(&until)
	if err != nil {
		return dbErr(err)
	}
	if until == nil {
		return nil
	}
	d := min(m.clock.until(*until)+2*time.Millisecond, m.lease)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// release frees every partition and the heartbeat, on Close, once the
// lease loop has stopped.
func (m *membership) release(ctx context.Context) error {
	m.mu.Lock()
	var ps []int32
	var es []int64
	for p, e := range m.owned {
		ps = append(ps, int32(p))
		es = append(es, e)
	}
	m.owned = map[int]int64{}
	m.sure = map[int]time.Time{}
	m.gen++
	m.mu.Unlock()
	_, err := m.db.Exec(ctx, sqlRelease, m.name, ps, es)
	if err != nil {
		return err
	}
	_, err = m.db.Exec(ctx, `DELETE FROM hourglass_nodes WHERE name = $1 AND instance = $2`, m.name, m.instance)
	return err
}
