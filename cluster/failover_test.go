package cluster_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/internal/pgtest"
)

// TestProcessFailover: three node processes on a primary with a
// synchronous standby, connected with one URL naming both servers and
// target_session_attrs=read-write. Under load, the primary is killed with
// SIGKILL and the standby promoted; the nodes find it on their own. Every
// put answered before, during or after is delivered, none early, none
// after its ack was answered, and no node writes as owner of a partition
// it does not hold.
func TestProcessFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("fails a PostgreSQL primary over to its standby under load for about 15 s; skipped with -short")
	}
	t.Parallel()
	began := time.Now()
	primary := pgtest.Start(t, pgtest.Set("max_connections", "400"))
	db := pgtest.Database(primary.CreateDatabase(t))
	standby := primary.StartStandby(t, "standby")
	url := pgtest.URL(db, "target_session_attrs=read-write", primary, standby)
	nodes := []*proc{startProc(t, url, "a")}
	execSQL(t, url, sqlAudit)
	nodes = append(nodes, startProc(t, url, "b"), startProc(t, url, "c"))
	total := 64
	t.Logf("primary, synchronous standby and nodes up in %v", time.Since(began).Round(time.Millisecond))

	s := seed(t)
	t.Logf("seed %d (HOURGLASS_SEED=%d to run again)", s, s)
	l := newLedger()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	putCtx, stopPuts := context.WithCancel(ctx)
	defer stopPuts()
	var producers, consumers sync.WaitGroup
	for pi := range 6 {
		producers.Go(func() { l.produce(putCtx, nodes, pi, rand.New(rand.NewPCG(s, uint64(pi))), "work") })
	}
	for ci := range 6 {
		consumers.Go(func() { l.consume(ctx, nodes, ci, "work") })
	}
	answered := func() int {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.put)
	}

	time.Sleep(3 * time.Second)
	before := answered()
	primary.Kill()
	killed := time.Now()
	// The time an operator or a failover manager takes to decide.
	time.Sleep(500 * time.Millisecond)
	if err := standby.Promote(); err != nil {
		t.Fatal(err)
	}
	promoted := time.Now()
	atPromote := answered()
	firstPut := eventually(t, 20*time.Second, "a put answered after the promotion", func() bool { return answered() > atPromote })
	held := eventually(t, 20*time.Second, "every partition held on the new primary", func() bool {
		return sumOwned(ownedBy(t, url)) == total
	})
	t.Logf("primary killed at %s after %d answered puts; standby promoted %v later (%d answered meanwhile); "+
		"first put answered %v after the promotion, every partition held %v after it: %v",
		killed.Format("15:04:05.000"), before, promoted.Sub(killed).Round(time.Millisecond), atPromote-before,
		firstPut.Round(time.Millisecond), held.Round(time.Millisecond), ownedBy(t, url))

	time.Sleep(3 * time.Second)
	stopPuts()
	producers.Wait()
	t.Logf("load ended at %v: %d puts answered, %d after the promotion", time.Since(began).Round(time.Millisecond),
		answered(), answered()-atPromote)
	if !within(20*time.Second, func() bool { return l.settled(t, url) }) {
		t.Errorf("answered puts not settled within 20 s after the load: %v", l.unacked(t, url))
	}
	t.Logf("settled at %v", time.Since(began).Round(time.Millisecond))
	cancel()
	consumers.Wait()
	l.check(t)
	auditClean(t, url)
}
