package cluster

import (
	"context"
	"time"
)

// The renewal of the leases held during a slow lease round (keep).

// sqlRenew is a node's heartbeat and the renewal of its leases, in one
// statement: node $1, run $5, is alive for $4 µs more, and the leases of
// the partitions $2 it holds at the epochs $3, if not yet run out, end
// when that heartbeat ends. It returns whether the heartbeat's row was
// this run's (false: another process took the name, and nothing was
// renewed) and the partitions renewed.
//
// One statement, so that a node killed at any point leaves a heartbeat
// that ends with its leases: were the heartbeat a statement of its own,
// a node killed between the two left a heartbeat a round newer than its
// leases, and the others counted it live, keeping their share and
// leaving its partitions untaken, for up to a third of a lease after its
// leases ran out.
//
// It locks the partitions' rows FOR NO KEY UPDATE, not FOR UPDATE: a
// renewal changes no owner and no epoch, so it need not wait for the
// owner's flushes (their fence, FOR KEY SHARE, flush.go), nor they for
// its synchronous commit.
const sqlRenew = `WITH beat AS (
		UPDATE hourglass_nodes SET alive_until = clock_timestamp() + $4::bigint * interval '1 microsecond'
		WHERE name = $1 AND instance = $5
		RETURNING alive_until),
	renewed AS (
		UPDATE hourglass_partitions SET lease_until = (SELECT alive_until FROM beat)
		WHERE EXISTS (SELECT FROM beat) AND partition IN (
			SELECT p.partition FROM hourglass_partitions p
			JOIN unnest($2::int[], $3::bigint[]) AS m(partition, epoch) ON m.partition = p.partition
			WHERE p.owner = $1 AND p.epoch = m.epoch AND p.lease_until > clock_timestamp()
			ORDER BY p.partition FOR NO KEY UPDATE OF p)
		RETURNING partition)
	SELECT EXISTS (SELECT FROM beat), coalesce(array_agg(partition), '{}') FROM renewed`

// renew runs sqlRenew for the partitions parts held at epochs: whether
// the heartbeat went through (false: the name was taken) and which of
// parts were renewed. One round trip.
func (m *membership) renew(ctx context.Context, parts []int32, epochs []int64) (alive bool, renewed []int32, err error) {
	err = m.db.QueryRow(ctx, sqlRenew, m.name, parts, epochs, m.lease.Microseconds(), m.instance).Scan(&alive, &renewed)
	return alive, renewed, err
}

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
		for {
			select {
			case <-quit:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			kctx, cancel := context.WithTimeout(ctx, m.lease/renewBound)
			parts, epochs := m.arrays()
			sent := time.Now()
			alive, renewed, err := m.renew(kctx, parts, epochs)
			cancel()
			if err != nil {
				continue
			}
			if !alive {
				// Another process took this node's name: renew nothing
				// more (the next round finds it and stops the node).
				return
			}
			m.reach.ok()
			if len(renewed) == len(parts) {
				// All renewed, or none known to be: the round's renewal
				// finds and drops what was not.
				m.renewed(parts, epochs, sent)
			}
			m.metrics.keeps.Inc()
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}
