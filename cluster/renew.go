package cluster

import (
	"context"
	"time"
)

// The renewal of the leases held during a slow lease round (keep).

// sqlRenew extends the leases of the partitions $2 held by node $1 at the
// epochs $3, if not yet run out, by $4 µs, and returns the partitions
// renewed. It locks the rows FOR NO KEY UPDATE, not FOR UPDATE: a
// renewal changes no owner and no epoch, so it need not wait for the
// owner's flushes (their fence, FOR KEY SHARE, flush.go), nor they for
// its synchronous commit.
const sqlRenew = `UPDATE hourglass_partitions
	SET lease_until = clock_timestamp() + $4::bigint * interval '1 microsecond'
	WHERE partition IN (
		SELECT p.partition FROM hourglass_partitions p
		JOIN unnest($2::int[], $3::bigint[]) AS m(partition, epoch) ON m.partition = p.partition
		WHERE p.owner = $1 AND p.epoch = m.epoch AND p.lease_until > clock_timestamp()
		ORDER BY p.partition FOR NO KEY UPDATE OF p)
	RETURNING partition`

// keep renews the node's heartbeat and the leases it holds, at their
// epochs, every third of a lease until the function it returns is called
// (which waits for it), ctx ends, or the heartbeat finds this node's name
// taken by another process: the keeper of a round whose rest is
// slow (on a loaded database a round can outlast a lease: the next round
// would find every lease run out, and the node lose all its partitions). It only extends
// what is held at the epoch it is held at; what it could not renew is for
// the next round's renewal to find and drop.
func (m *membership) keep(ctx context.Context) (stop func()) {
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(m.lease / 3)
		defer t.Stop()
		lease := m.lease.Microseconds()
		for {
			select {
			case <-quit:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			kctx, cancel := context.WithTimeout(ctx, m.lease/renewBound)
			tag, err := m.db.Exec(kctx, `UPDATE hourglass_nodes
				SET alive_until = clock_timestamp() + $3::bigint * interval '1 microsecond'
				WHERE name = $1 AND instance = $2`, m.name, m.instance, lease)
			if err != nil {
				cancel()
				continue
			}
			if tag.RowsAffected() == 0 {
				// Another process took this node's name: renew nothing
				// more (the next round finds it and stops the node).
				cancel()
				return
			}
			m.reach.ok()
			if parts, epochs := m.arrays(); len(parts) > 0 {
				// All renewed, or none known to be: the round's renewal
				// finds and drops what was not.
				sent := time.Now()
				if tag, err := m.db.Exec(kctx, sqlRenew, m.name, parts, epochs, lease); err == nil && tag.RowsAffected() == int64(len(parts)) {
					m.renewed(parts, epochs, sent)
				}
			}
			cancel()
			m.metrics.keeps.Inc()
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}
