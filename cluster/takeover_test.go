package cluster_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hourglass-go/hourglass/cluster"
)

// TestTakeover_HeartbeatOutlivesLeases: a node whose heartbeat runs out
// after its leases, by up to a third of a lease (a node of a build whose
// heartbeat and renewal were two statements, killed between them; this
// build renews both in one, TestTakeover_KilledAfterHeartbeat). The
// others count it live until then, so its share stays its own and its
// partitions, their leases run out, stay untaken. They are taken when
// its heartbeat runs out: the others wake then, as they wake when a
// lease runs out, and not at their next round, up to a third of a lease
// later. Here the heartbeat is made to end 600 ms after the leases, with
// a lease of 4.5 s (a round every 1.5 s): the partitions must be taken
// within 500 ms of the heartbeat's end, where the next round came at
// least 900 ms after it.
func TestTakeover_HeartbeatOutlivesLeases(t *testing.T) {
	url, a, b := balancedPair(t)
	b.crash()
	ctx := context.Background()
	conn := connect(t, url)
	var leaseEnd, heartbeatEnd time.Time
	err := conn.QueryRow(ctx, `UPDATE hourglass_nodes
		SET alive_until = (SELECT max(lease_until) FROM hourglass_partitions WHERE owner = 'b') + interval '600 milliseconds'
		WHERE name = 'b'
		RETURNING alive_until - interval '600 milliseconds', alive_until`).Scan(&leaseEnd, &heartbeatEnd)
	if err != nil {
		t.Fatal(err)
	}
	var now time.Time
	if err := conn.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&now); err != nil {
		t.Fatal(err)
	}
	if !leaseEnd.After(now) {
		t.Fatalf("b's leases ran out before its heartbeat could be moved (%v ago)", now.Sub(leaseEnd))
	}
	taken := takenByA(t, conn, a.Partitions())
	after := taken.Sub(heartbeatEnd)
	t.Logf("b's partitions taken %v after its heartbeat ran out (%v after its leases)", after, taken.Sub(leaseEnd))
	if after > 500*time.Millisecond {
		t.Errorf("b's partitions taken %v after its heartbeat ran out, want within 500 ms (a round is every %v)", after, takeoverLease/3)
	}
}

// TestTakeover_KilledAfterHeartbeat: a node whose lease round stops for
// good right after its heartbeat (a process killed there) leaves
// partitions that the others hold within a lease of its last renewal,
// plus the time to notice and acquire. Its heartbeat and its renewal are
// one statement: when they were two, a node killed between them left a
// heartbeat a round newer than its leases, and the others, counting it
// live until its heartbeat ran out, took its partitions a third of a
// lease late (here 1.5 s; the margin allowed is 700 ms).
func TestTakeover_KilledAfterHeartbeat(t *testing.T) {
	url, a, b := balancedPair(t)
	var armed atomic.Bool
	armed.Store(true)
	beaten := make(chan struct{})
	stuck := make(chan struct{})
	t.Cleanup(func() { close(stuck) }) // before b's Close, which waits for its lease loop
	b.hooks.Beating(func() {
		if armed.CompareAndSwap(true, false) {
			close(beaten)
			<-stuck // b's lease loop goes no further, as a killed process
		}
	})
	<-beaten
	ctx := context.Background()
	conn := connect(t, url)
	var leaseEnd, heartbeatEnd time.Time
	err := conn.QueryRow(ctx, `SELECT (SELECT max(lease_until) FROM hourglass_partitions WHERE owner = 'b'),
		(SELECT alive_until FROM hourglass_nodes WHERE name = 'b')`).Scan(&leaseEnd, &heartbeatEnd)
	if err != nil {
		t.Fatal(err)
	}
	taken := takenByA(t, conn, a.Partitions())
	after := taken.Sub(leaseEnd)
	t.Logf("b's partitions taken %v after its leases ran out (its heartbeat ran out %v after them)",
		after, heartbeatEnd.Sub(leaseEnd))
	if after > 700*time.Millisecond {
		t.Errorf("b's partitions taken %v after its leases ran out, %v after its last renewal; want within 700 ms of the leases' end",
			after, taken.Sub(leaseEnd.Add(-takeoverLease)))
	}
}

// TestTakeover_LeaseEndsDuringRound: a survivor's lease round that read
// the dead node's leases still running, and ran on past their end (a
// slow round: here its rest is held up until 300 ms after), takes them
// at once after that round, not at its next round a third of a lease
// later (1.5 s here; the margin allowed after the round is 500 ms). The
// wake was computed at the round's end from the leases still running
// then, which no longer included those.
func TestTakeover_LeaseEndsDuringRound(t *testing.T) {
	url, a, b := balancedPair(t)
	b.crash()
	ctx := context.Background()
	conn := connect(t, url)
	var leaseEnd time.Time
	err := conn.QueryRow(ctx, `SELECT max(lease_until) FROM hourglass_partitions WHERE owner = 'b'`).Scan(&leaseEnd)
	if err != nil {
		t.Fatal(err)
	}
	const hold = 300 * time.Millisecond
	var held atomic.Bool
	a.hooks.Rounding(func(ctx context.Context) {
		// The last round of a to begin before b's leases run out.
		if until := time.Until(leaseEnd); until > 0 && until < takeoverLease/3 && held.CompareAndSwap(false, true) {
			select {
			case <-time.After(until + hold):
			case <-ctx.Done():
			}
		}
	})
	taken := takenByA(t, conn, a.Partitions())
	if !held.Load() {
		t.Fatal("no round of a was held up across the end of b's leases")
	}
	after := taken.Sub(leaseEnd)
	t.Logf("b's partitions taken %v after its leases ran out (a's round held up until %v after)", after, hold)
	if after > hold+500*time.Millisecond {
		t.Errorf("b's partitions taken %v after its leases ran out, want within %v (a round is every %v)",
			after, hold+500*time.Millisecond, takeoverLease/3)
	}
}

// takeoverLease is the lease of the takeover tests' nodes: a round every
// 1.5 s.
const takeoverLease = 4500 * time.Millisecond

// balancedPair starts nodes a and b on a database of their own with
// takeoverLease, and returns once each holds a share of the partitions.
func balancedPair(t *testing.T) (url string, a, b *testNode) {
	t.Helper()
	url = server(t).CreateDatabase(t)
	withLease := func(o *cluster.Options) { o.Lease = takeoverLease }
	a = startNode(t, url, "a", withLease)
	b = startNode(t, url, "b", withLease)
	total := a.Partitions()
	eventually(t, 4*takeoverLease, "balanced", func() bool {
		o := owners(t, url)
		return o["a"] > 0 && o["b"] > 0 && o["a"]+o["b"] == total
	})
	return url, a, b
}

// connect opens a connection of the test's own to url, closed at its end.
func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	return conn
}

// takenByA waits, up to three leases, until a holds all total partitions
// under a live lease, and returns when that was first seen, on the
// database's clock (polled every 10 ms).
func takenByA(t *testing.T, conn *pgx.Conn, total int) time.Time {
	t.Helper()
	var taken time.Time
	eventually(t, 3*takeoverLease, "b's partitions taken", func() bool {
		var n int
		err := conn.QueryRow(context.Background(), `SELECT count(*), clock_timestamp() FROM hourglass_partitions
			WHERE owner = 'a' AND lease_until > clock_timestamp()`).Scan(&n, &taken)
		return err == nil && n == total
	})
	return taken
}
