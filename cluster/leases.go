package cluster

import (
	"context"
	"slices"
	"time"
)

// The lease loop: heartbeat, renew, rebalance. See the package doc for
// the protocol; this file is its one implementation.

// leaseLoop runs tick every Lease/3, at once when notified (a node joined
// or left, a schedule changed, the listen connection came back), and at
// the moment another node's lease runs out, so that a dead node's
// partitions are taken over within about one lease.
func (n *Node) leaseLoop() {
	defer n.wg.Done()
	every := n.opts.Lease / 3
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-n.quit:
			return
		case <-t.C:
		case <-n.tickKick:
		}
		for n.opts.hooks.paused.Load() {
			select {
			case <-n.quit:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), n.opts.Lease)
		next, err := n.tickNext(ctx)
		cancel()
		if err != nil {
			n.metrics.tickFailures.Inc()
			n.log.Warn("hourglass: lease tick failed", "err", err)
			next = 100 * time.Millisecond
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(min(next, every))
	}
}

// kickTick has the lease loop run now.
func (n *Node) kickTick() {
	select {
	case n.tickKick <- struct{}{}:
	default:
	}
}

// tick runs one round of the lease loop.
func (n *Node) tick(ctx context.Context) error {
	_, err := n.tickNext(ctx)
	return err
}

// partitionRow is one row of hourglass_partitions as a tick reads it.
type partitionRow struct {
	partition  int
	owner      string
	epoch      int64
	leaseUntil int64 // database ns; 0 for never leased
}

// tickNext runs one round: measure the clock, heartbeat, renew the owned
// leases (dropping those that could not be renewed), release partitions
// above this node's share, acquire partitions up to it, extend the timer
// window, sweep overdue timers and reconcile schedules. It returns how
// long until the earliest lease of another node runs out.
func (n *Node) tickNext(ctx context.Context) (time.Duration, error) {
	if err := n.clock.measure(ctx, n.db); err != nil {
		return 0, err
	}
	lease := n.opts.Lease.Microseconds()

	// Heartbeat. A row under another instance means that this node was
	// declared dead and another process took its name: stop.
	tag, err := n.db.Exec(ctx, `UPDATE hourglass_nodes
		SET alive_until = clock_timestamp() + $3::bigint * interval '1 microsecond'
		WHERE name = $1 AND instance = $2`, n.name, n.instance, lease)
	if err != nil {
		return 0, err
	}
	if tag.RowsAffected() == 0 {
		n.mu.Lock()
		n.failed = ErrNameInUse
		n.mu.Unlock()
		n.dropAll()
		return time.Hour, ErrNameInUse
	}

	// Renew what is held, at the epoch it is held at, if not yet expired.
	parts, epochs := n.ownedArrays()
	if len(parts) > 0 {
		rows, err := n.db.Query(ctx, `UPDATE hourglass_partitions
			SET lease_until = clock_timestamp() + $4::bigint * interval '1 microsecond'
			WHERE partition IN (
				SELECT p.partition FROM hourglass_partitions p
				JOIN unnest($2::int[], $3::bigint[]) AS m(partition, epoch) ON m.partition = p.partition
				WHERE p.owner = $1 AND p.epoch = m.epoch AND p.lease_until > clock_timestamp()
				ORDER BY p.partition FOR UPDATE OF p)
			RETURNING partition`, n.name, parts, epochs, lease)
		if err != nil {
			return 0, err
		}
		renewed := map[int]bool{}
		for rows.Next() {
			var p int
			if err := rows.Scan(&p); err != nil {
				rows.Close()
				return 0, err
			}
			renewed[p] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return 0, err
		}
		var lost []int
		for _, p := range parts {
			if !renewed[int(p)] {
				lost = append(lost, int(p))
			}
		}
		if len(lost) > 0 {
			n.log.Warn("hourglass: partitions lost (lease expired or taken)", "partitions", lost)
			n.metrics.lost.Add(float64(len(lost)))
			n.drop(lost)
		}
	}

	// The cluster's state: every partition, and the live nodes.
	all, live, err := n.readPartitions(ctx)
	if err != nil {
		return 0, err
	}
	share := (n.partitions + live - 1) / max(live, 1)

	n.mu.Lock()
	held := len(n.owned)
	var mine []int
	for p := range n.owned {
		mine = append(mine, p)
	}
	n.mu.Unlock()
	slices.Sort(mine)
	if held > share {
		if err := n.releasePartitions(ctx, mine[share:]); err != nil {
			return 0, err
		}
	} else if held < share {
		if err := n.acquire(ctx, share-held); err != nil {
			return 0, err
		}
	}
	if err := n.extendWindow(ctx); err != nil {
		return 0, err
	}
	if err := n.sweep(ctx); err != nil {
		return 0, err
	}
	if err := n.reconcileSchedules(ctx); err != nil {
		return 0, err
	}
	n.mu.Lock()
	recap := n.recap
	n.recap = false
	n.mu.Unlock()
	if recap {
		if err := n.loadCapped(ctx); err != nil {
			n.mu.Lock()
			n.recap = true
			n.mu.Unlock()
			return 0, err
		}
		n.tellPolicies("") // changes may have gone unheard meanwhile
	}

	// Wake when the first lease held by another node (or by a previous
	// run of this one) runs out.
	next := time.Hour
	now := n.clock.now()
	n.mu.Lock()
	for _, r := range all {
		if _, mine := n.owned[r.partition]; r.owner != "" && (r.owner != n.name || !mine) && r.leaseUntil > now {
			next = min(next, n.clock.until(r.leaseUntil)+2*time.Millisecond)
		}
	}
	n.mu.Unlock()
	return next, nil
}

// ownedArrays returns the owned partitions and their epochs, for SQL.
func (n *Node) ownedArrays() ([]int32, []int64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	parts := make([]int32, 0, len(n.owned))
	epochs := make([]int64, 0, len(n.owned))
	for p, e := range n.owned {
		parts = append(parts, int32(p))
		epochs = append(epochs, e)
	}
	return parts, epochs
}

// readPartitions returns every partition's row and the number of live
// nodes.
func (n *Node) readPartitions(ctx context.Context) ([]partitionRow, int, error) {
	rows, err := n.db.Query(ctx, `SELECT partition, coalesce(owner, ''), epoch,
			(extract(epoch FROM greatest(lease_until, 'epoch'::timestamptz)) * 1000000000)::bigint
		FROM hourglass_partitions ORDER BY partition`)
	if err != nil {
		return nil, 0, err
	}
	var all []partitionRow
	for rows.Next() {
		var r partitionRow
		if err := rows.Scan(&r.partition, &r.owner, &r.epoch, &r.leaseUntil); err != nil {
			rows.Close()
			return nil, 0, err
		}
		all = append(all, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	var live int
	if err := n.db.QueryRow(ctx, `SELECT count(*) FROM hourglass_nodes WHERE alive_until > clock_timestamp()`).Scan(&live); err != nil {
		return nil, 0, err
	}
	return all, live, nil
}

// acquire takes up to k partitions that are free or whose lease ran out,
// each at a new epoch, then listens to their channels and loads their
// timers: in that order, so that a timer written meanwhile is either
// announced to this node or read by the load.
func (n *Node) acquire(ctx context.Context, k int) error {
	rows, err := n.db.Query(ctx, `UPDATE hourglass_partitions p
		SET owner = $1, epoch = p.epoch + 1,
			lease_until = clock_timestamp() + $3::bigint * interval '1 microsecond'
		FROM (
			SELECT partition, owner FROM hourglass_partitions
			WHERE owner IS NULL OR lease_until < clock_timestamp()
			ORDER BY partition LIMIT $2 FOR UPDATE SKIP LOCKED) prev
		WHERE p.partition = prev.partition
		RETURNING p.partition, p.epoch, prev.owner IS NOT NULL`, n.name, k, n.opts.Lease.Microseconds())
	if err != nil {
		return err
	}
	got := map[int]int64{}
	takeovers := 0
	for rows.Next() {
		var p int
		var e int64
		var takeover bool
		if err := rows.Scan(&p, &e, &takeover); err != nil {
			rows.Close()
			return err
		}
		got[p] = e
		if takeover {
			takeovers++
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if len(got) == 0 {
		return nil
	}
	var parts []int32
	var chans []string
	n.mu.Lock()
	for p, e := range got {
		n.owned[p] = e
		parts = append(parts, int32(p))
		chans = append(chans, partitionChannel(p))
	}
	horizon := n.horizon
	n.mu.Unlock()
	n.metrics.acquired.Add(float64(len(got)))
	n.metrics.takeovers.Add(float64(takeovers))
	n.log.Info("hourglass: partitions acquired", "partitions", len(got), "taken over", takeovers)
	if err := n.notifications.listen(ctx, chans...); err != nil {
		return err
	}
	return n.loadTimers(ctx, parts, 0, horizon, true)
}

// drop forgets partitions this node no longer holds: their timers still
// in the wheel are dropped when they fire, their schedules are disarmed.
func (n *Node) drop(parts []int) {
	n.dropAt(parts, nil)
}

// dropAt is drop for the partitions of parts still held at the epoch
// epochs gives (every one of parts when epochs is nil). A flush that
// found itself fenced out of a partition at the epoch it read drops it
// only if the lease loop has not taken it again meanwhile at a new epoch:
// dropping that new lease would leave its tasks unhanded until it ran
// out.
func (n *Node) dropAt(parts []int, epochs map[int]int64) {
	var chans []string
	n.mu.Lock()
	for _, p := range parts {
		if e, ok := n.owned[p]; ok {
			if want, ok := epochs[p]; epochs != nil && (!ok || want != e) {
				continue
			}
			delete(n.owned, p)
			chans = append(chans, partitionChannel(p))
		}
	}
	for name, s := range n.schedules {
		if _, ok := n.owned[s.partition]; !ok {
			s.disarm()
			delete(n.schedules, name)
		}
	}
	n.mu.Unlock()
	if len(chans) > 0 {
		n.notifications.unlisten(chans...)
	}
}

// dropAll forgets every partition.
func (n *Node) dropAll() {
	n.mu.Lock()
	var parts []int
	for p := range n.owned {
		parts = append(parts, p)
	}
	n.mu.Unlock()
	n.drop(parts)
}

// releasePartitions gives parts up: this node stops acting on them first,
// then frees their leases (at the epoch it held them) for others to
// acquire, and tells the others so.
func (n *Node) releasePartitions(ctx context.Context, parts []int) error {
	n.mu.Lock()
	var ps []int32
	var es []int64
	for _, p := range parts {
		if e, ok := n.owned[p]; ok {
			ps = append(ps, int32(p))
			es = append(es, e)
		}
	}
	n.mu.Unlock()
	n.drop(parts)
	if len(ps) == 0 {
		return nil
	}
	_, err := n.db.Exec(ctx, `UPDATE hourglass_partitions SET owner = NULL, lease_until = '-infinity'
		WHERE partition IN (
			SELECT p.partition FROM hourglass_partitions p
			JOIN unnest($2::int[], $3::bigint[]) AS m(partition, epoch) ON m.partition = p.partition
			WHERE p.owner = $1 AND p.epoch = m.epoch
			ORDER BY p.partition FOR UPDATE OF p)`, n.name, ps, es)
	if err != nil {
		return err
	}
	n.log.Info("hourglass: partitions released", "partitions", len(ps))
	n.notifications.send(chanMembers, "release "+n.name)
	return nil
}

// release frees every partition and the heartbeat, on Close.
func (n *Node) release(ctx context.Context) error {
	n.mu.Lock()
	var parts []int
	for p := range n.owned {
		parts = append(parts, p)
	}
	n.mu.Unlock()
	var ps []int32
	var es []int64
	n.mu.Lock()
	for _, p := range parts {
		ps = append(ps, int32(p))
		es = append(es, n.owned[p])
	}
	n.owned = map[int]int64{}
	n.mu.Unlock()
	_, err := n.db.Exec(ctx, `UPDATE hourglass_partitions SET owner = NULL, lease_until = '-infinity'
		WHERE partition IN (
			SELECT p.partition FROM hourglass_partitions p
			JOIN unnest($2::int[], $3::bigint[]) AS m(partition, epoch) ON m.partition = p.partition
			WHERE p.owner = $1 AND p.epoch = m.epoch
			ORDER BY p.partition FOR UPDATE OF p)`, n.name, ps, es)
	if err != nil {
		return err
	}
	_, err = n.db.Exec(ctx, `DELETE FROM hourglass_nodes WHERE name = $1 AND instance = $2`, n.name, n.instance)
	return err
}
