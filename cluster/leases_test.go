package cluster_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/cluster"
)

// TestLeases_SlowRound: a lease round whose work after the renewal is
// held up until its deadline (a slow database), twice, does not let the
// leases run out meanwhile: the keeper renews them every third of a
// lease, and the node keeps every partition at the epoch it had. Without
// it the next round found every lease run out and the node lost all of
// them (the e2e crash test saw it under load: due tasks unhanded until
// they were taken again).
func TestLeases_SlowRound(t *testing.T) {
	const lease = 900 * time.Millisecond
	n := startNode(t, server(t).CreateDatabase(t), "a", func(o *cluster.Options) { o.Lease = lease })
	eventually(t, 10*time.Second, "every partition held", func() bool { return len(n.Owned()) == 64 })
	before := n.Owned()
	var held atomic.Int32
	n.hooks.Rounding(func(ctx context.Context) {
		if held.Add(1) <= 2 {
			<-ctx.Done() // this round's work does not end before its deadline
		}
	})
	eventually(t, 10*time.Second, "two rounds held up", func() bool { return held.Load() > 2 })
	time.Sleep(lease)
	after := n.Owned()
	if len(after) != 64 {
		t.Fatalf("node holds %d partitions after slow rounds; want 64", len(after))
	}
	for p, e := range before {
		if after[p] != e {
			t.Errorf("partition %d: epoch %d, then %d: the lease was lost and taken again", p, e, after[p])
		}
	}
}

// TestLeases_KeeperStopsWhenNameTaken: as a round starts and is held
// up, another process takes the node's name (its heartbeat row under a
// new instance). The keeper, which renews the heartbeat and the leases
// while the round runs, must then extend no lease: before, it went on
// renewing them every third of a lease until the round ended.
func TestLeases_KeeperStopsWhenNameTaken(t *testing.T) {
	const lease = 3 * time.Second
	url := server(t).CreateDatabase(t)
	n := startNode(t, url, "a", func(o *cluster.Options) { o.Lease = lease })
	eventually(t, 20*time.Second, "every partition held", func() bool { return len(n.Owned()) == 64 })
	started := make(chan struct{}, 1)
	n.hooks.Rounding(func(ctx context.Context) {
		select {
		case started <- struct{}{}:
		default:
		}
		<-ctx.Done() // every round held up until its deadline
	})
	<-started
	query(t, url, `UPDATE hourglass_nodes SET instance = 'someone else' WHERE name = 'a'`)
	const latest = `SELECT coalesce(max((extract(epoch FROM lease_until) * 1e6)::bigint), 0)
		FROM hourglass_partitions WHERE owner = 'a'`
	time.Sleep(50 * time.Millisecond) // a renewal already sent may land
	first := query(t, url, latest)[0]
	deadline := time.Now().Add(lease)
	for time.Now().Before(deadline) {
		if now := query(t, url, latest)[0]; now != first {
			t.Fatalf("a lease of the node was extended after its name was taken (latest end %s µs, then %s)", first, now)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
