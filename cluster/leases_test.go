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
	// A lease long enough that a renewal held up by a loaded machine (a
	// race build beside other tests) is not what the test sees.
	const lease = 3 * time.Second
	n := startNode(t, server(t).CreateDatabase(t), "a", func(o *cluster.Options) { o.Lease = lease })
	eventually(t, 10*time.Second, "every partition held", func() bool { return len(n.Owned()) == 64 })
	before := n.Owned()
	var held atomic.Int32
	n.hooks.Rounding(func(ctx context.Context) {
		if held.Add(1) <= 2 {
			<-ctx.Done() // this round's work does not end before its deadline
		}
	})
	eventually(t, 20*time.Second, "two rounds held up", func() bool { return held.Load() > 2 })
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

// TestLeases_Orphans: a partition leased in the database to a node's
// name at an epoch the node does not hold (an acquire whose answer was
// lost, simulated by raising the epoch under it) is an orphan: no other
// node may take it before its lease runs out (30 s here). The node frees
// it in its next round, and takes it again at the next epoch when under
// its share; otherwise another node takes it. Without that the
// partition's tasks waited for the lease to run out.
func TestLeases_Orphans(t *testing.T) {
	const lease = 30 * time.Second
	ctx := context.Background()
	url := server(t).CreateDatabase(t)
	a := startNode(t, url, "a", func(o *cluster.Options) { o.Lease = lease })
	eventually(t, 20*time.Second, "every partition held", func() bool { return len(a.Owned()) == 64 })

	// Under its share: freed and taken again at the next epoch, long
	// before the lease would have run out. The lease loop runs too, and
	// may do it first: only the end is checked.
	p, e := 5, a.Owned()[5]
	query(t, url, `UPDATE hourglass_partitions SET epoch = epoch + 1 WHERE partition = $1`, p)
	eventually(t, 5*time.Second, "the orphan freed and taken again", func() bool {
		_ = a.Tick(ctx)
		got, ok := a.Owned()[p]
		return ok && got >= e+2
	})

	// At its share: freed, and taken by the node short of one.
	b := startNode(t, url, "b", func(o *cluster.Options) { o.Lease = lease })
	// b starts with nothing free; a round of a at 2 live nodes releases
	// half (the rest of the test runs rounds by hand: the loops run
	// every 10 s).
	eventually(t, 20*time.Second, "32 partitions each", func() bool {
		_ = a.Tick(ctx)
		_ = b.Tick(ctx)
		return len(a.Owned()) == 32 && len(b.Owned()) == 32
	})
	var q int
	for q = range b.Owned() {
		break
	}
	// a's acquire took q and its answer was lost: an orphan of a, which
	// a (at its share) frees, and b (short of one) takes at the next
	// epoch, long before the 30 s lease would have run out. The rounds
	// are run by hand, but the loops run too, so only the end is
	// checked.
	e = b.Owned()[q]
	query(t, url, `UPDATE hourglass_partitions SET owner = 'a', epoch = epoch + 1 WHERE partition = $1`, q)
	eventually(t, 5*time.Second, "the orphan freed by a and taken by b", func() bool {
		_ = a.Tick(ctx)
		_ = b.Tick(ctx)
		got, ok := b.Owned()[q]
		return ok && got >= e+2
	})
	if _, ok := a.Owned()[q]; ok || len(a.Owned()) != 32 {
		t.Fatalf("a at its share took orphan %d (holds %d)", q, len(a.Owned()))
	}
}
