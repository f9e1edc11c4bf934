package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hourglass-go/hourglass/cluster"
)

// TestTakeover_HeartbeatOutlivesLeases: a node killed between its
// round's heartbeat and its renewal of the leases (two statements, one
// after the other) leaves a heartbeat that runs out after its leases, by
// up to a third of a lease. The others count it live until then, so its
// share stays its own and its partitions, their leases run out, stay
// untaken. They are taken when its heartbeat runs out: the others wake
// then, as they wake when a lease runs out, and not at their next
// round, up to a third of a lease later. Here the heartbeat is made to
// end 600 ms after the leases, with a lease of 4.5 s (a round every
// 1.5 s): the partitions must be taken within 500 ms of the heartbeat's
// end, where the next round came at least 900 ms after it.
func TestTakeover_HeartbeatOutlivesLeases(t *testing.T) {
	url := server(t).CreateDatabase(t)
	const lease = 4500 * time.Millisecond
	withLease := func(o *cluster.Options) { o.Lease = lease }
	a := startNode(t, url, "a", withLease)
	b := startNode(t, url, "b", withLease)
	total := a.Partitions()
	eventually(t, 4*lease, "balanced", func() bool {
		o := owners(t, url)
		return o["a"] > 0 && o["b"] > 0 && o["a"]+o["b"] == total
	})
	b.crash()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var leaseEnd, heartbeatEnd time.Time
	err = conn.QueryRow(ctx, `UPDATE hourglass_nodes
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
	var taken time.Time
	eventually(t, 3*lease, "b's partitions taken", func() bool {
		var held int
		err := conn.QueryRow(ctx, `SELECT count(*), clock_timestamp() FROM hourglass_partitions
			WHERE owner = 'a' AND lease_until > clock_timestamp()`).Scan(&held, &taken)
		return err == nil && held == total
	})
	after := taken.Sub(heartbeatEnd)
	t.Logf("b's partitions taken %v after its heartbeat ran out (%v after its leases)", after, taken.Sub(leaseEnd))
	if after > 500*time.Millisecond {
		t.Errorf("b's partitions taken %v after its heartbeat ran out, want within 500 ms (a round is every %v)", after, lease/3)
	}
}
