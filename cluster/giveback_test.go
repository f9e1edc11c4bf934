package cluster_test

import (
	"context"
	"errors"
	"net"
	neturl "net/url"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hourglass-go/hourglass/cluster"
	"github.com/hourglass-go/hourglass/internal/tcpproxy"
	"github.com/hourglass-go/hourglass/task"
)

// behindProxy returns a database on a new server, the URL of a link to
// it through a proxy the test sets, and the proxy.
func behindProxy(t *testing.T) (direct, proxied string, proxy *tcpproxy.Proxy) {
	t.Helper()
	pg := server(t)
	direct = pg.CreateDatabase(t)
	proxy, err := tcpproxy.Start(net.JoinHostPort("127.0.0.1", strconv.Itoa(pg.Port)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	u, err := neturl.Parse(direct)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = proxy.Addr()
	return direct, u.String(), proxy
}

// lostTTR is the TTR of the tasks whose reservation's answer is lost: far
// longer than the tests wait, so that only a give-back brings them back.
const lostTTR = 10 * time.Minute

// TestReserve_LostAnswerGivesBack: a reserve whose statement PostgreSQL
// committed but whose answer never reached the node (the proxy forwards
// the node's bytes and drops the database's) fails at its deadline, and
// the task it leased is ready again at once, not after its TTR of
// minutes: a reserve on another node takes it, its lost attempt undone.
// The give-back is counted. Without the give-back the task stayed
// reserved under a lease nobody knew until its TTR ran out.
func TestReserve_LostAnswerGivesBack(t *testing.T) {
	direct, proxied, proxy := behindProxy(t)
	reg := prometheus.NewRegistry()
	a := startNode(t, proxied, "a", func(o *cluster.Options) {
		o.DBTimeout = time.Second
		o.Lease = 30 * time.Second // the partitions outlast the muted second
		o.Registerer = reg
	})
	b := startNode(t, direct, "b")
	ctx := context.Background()
	if _, _, err := svc(a).Put(ctx, "q", task.PutRequest{TTR: lostTTR}); err != nil {
		t.Fatal(err)
	}
	// The lease loop and the flusher are held, so that the reserve's is
	// the only statement on the muted link; a reserve of another queue
	// just before leaves the connection it will use knowing its backend.
	a.hooks.Pause()
	defer a.hooks.Resume()
	if _, err := a.ReserveQueues(ctx, []string{"warm"}, 1, 0); err != nil {
		t.Fatal(err)
	}
	proxy.Set(tcpproxy.Mute)
	_, err := a.ReserveQueues(ctx, []string{"q"}, 1, 0)
	proxy.Set(tcpproxy.Pass)
	if err == nil {
		t.Fatal("a reserve whose answer was dropped succeeded")
	}
	if !errors.Is(err, task.ErrClosed) {
		t.Errorf("the reserve's error: %v, want task.ErrClosed (database unreachable)", err)
	}
	var got []task.Task
	within := eventually(t, 30*time.Second, "the task of the lost reserve ready again", func() bool {
		got, err = b.ReserveQueues(ctx, []string{"q"}, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		return len(got) == 1
	})
	t.Logf("ready again %v after the reserve's error", within)
	if got[0].Attempts != 1 {
		t.Errorf("the task reserved again: attempts = %d, want 1 (the lost attempt undone)", got[0].Attempts)
	}
	if n := counter(t, reg, "hourglass_cluster_lost_reserves_total"); n != 1 {
		t.Errorf("hourglass_cluster_lost_reserves_total = %v, want 1", n)
	}
	// One task given back: the database had committed the reservation.
	if n := counter(t, reg, "hourglass_cluster_lost_reserves_given_back_total"); n != 1 {
		t.Errorf("hourglass_cluster_lost_reserves_given_back_total = %v, want 1", n)
	}
}

// TestReserve_RolledBackNoGiveBack: a reserve that PostgreSQL answers
// with an error rolled its statement back: nothing was leased, and the
// node gives nothing back (no lost call counted).
func TestReserve_RolledBackNoGiveBack(t *testing.T) {
	n, reg := startMetered(t, server(t).CreateDatabase(t), "a")
	ctx := context.Background()
	if _, _, err := svc(n).Put(ctx, "q", task.PutRequest{TTR: lostTTR}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE FUNCTION test_no_reserve() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN RAISE EXCEPTION 'no reserve'; END $$`,
		`CREATE TRIGGER test_no_reserve BEFORE UPDATE ON hourglass_tasks
			FOR EACH ROW WHEN (NEW.state = 2) EXECUTE FUNCTION test_no_reserve()`,
	} {
		if _, err := n.pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.ReserveQueues(ctx, []string{"q"}, 1, 0); err == nil {
		t.Fatal("the reserve succeeded through a trigger that refuses it")
	}
	if k := counter(t, reg, "hourglass_cluster_lost_reserves_total"); k != 0 {
		t.Errorf("hourglass_cluster_lost_reserves_total = %v after a reserve PostgreSQL rolled back, want 0", k)
	}
}

// TestReserve_LeaseFormat: a lease is the call's token (16 hex digits)
// then the job id in hex, as the embedded engine's: the tasks of one
// reserve share the token, two reserves' differ.
func TestReserve_LeaseFormat(t *testing.T) {
	n := startNode(t, server(t).CreateDatabase(t), "a")
	ctx := context.Background()
	for range 3 {
		if _, _, err := svc(n).Put(ctx, "q", task.PutRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	first, err := n.ReserveQueues(ctx, []string{"q"}, 2, 0)
	if err != nil || len(first) != 2 {
		t.Fatalf("reserve: %d tasks, %v", len(first), err)
	}
	second, err := n.ReserveQueues(ctx, []string{"q"}, 1, 0)
	if err != nil || len(second) != 1 {
		t.Fatalf("reserve: %d tasks, %v", len(second), err)
	}
	for _, r := range append(first, second...) {
		want := strconv.FormatUint(r.JobID, 16)
		if len(r.Lease) != 16+len(want) || r.Lease[16:] != want {
			t.Errorf("lease %q of job %d: want 16 hex digits then %s", r.Lease, r.JobID, want)
		}
		if _, err := strconv.ParseUint(r.Lease[:16], 16, 64); err != nil {
			t.Errorf("lease %q: its token is not hex: %v", r.Lease, err)
		}
	}
	if first[0].Lease[:16] != first[1].Lease[:16] {
		t.Errorf("one reserve's leases %q and %q: not one token", first[0].Lease, first[1].Lease)
	}
	if first[0].Lease[:16] == second[0].Lease[:16] {
		t.Errorf("two reserves' leases %q and %q share a token", first[0].Lease, second[0].Lease)
	}
}

// TestReserve_CommitAfterCutEnded: a reserve statement still running
// when the link is lost (a trigger sleeps 8 s in it; the proxy
// blackholes the link meanwhile, so that pgx's cancel request at the
// deadline never arrives) would commit its lease after the node gave up
// on it, and after a give-back that looked as soon as the link was back.
// The give-back ends the statement's backend first: the task is never
// left leased to no one, and another node reserves it within seconds,
// not after its TTR. Without the backend's end, the give-back found
// nothing and the lease committed seconds later.
func TestReserve_CommitAfterCutEnded(t *testing.T) {
	direct, proxied, proxy := behindProxy(t)
	u, err := neturl.Parse(proxied)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("application_name", "slow")
	u.RawQuery = q.Encode()
	a := startNode(t, u.String(), "a", func(o *cluster.Options) {
		o.DBTimeout = 2 * time.Second
		o.Lease = 30 * time.Second
	})
	b := startNode(t, direct, "b")
	ctx := context.Background()
	if _, _, err := svc(a).Put(ctx, "q", task.PutRequest{TTR: lostTTR}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		`CREATE FUNCTION test_slow_reserve() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN
				IF current_setting('application_name') = 'slow' THEN PERFORM pg_sleep(8); END IF;
				RETURN NEW;
			END $$`,
		`CREATE TRIGGER test_slow_reserve BEFORE UPDATE ON hourglass_tasks
			FOR EACH ROW WHEN (NEW.state = 2) EXECUTE FUNCTION test_slow_reserve()`,
	} {
		if _, err := b.pool.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	a.hooks.Pause()
	defer a.hooks.Resume()
	failed := make(chan error, 1)
	go func() {
		_, err := a.ReserveQueues(ctx, []string{"q"}, 1, 0)
		failed <- err
	}()
	eventually(t, 10*time.Second, "the reserve statement sleeping", func() bool {
		var k int
		b.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = 'slow' AND wait_event = 'PgSleep'`).Scan(&k)
		return k == 1
	})
	proxy.Set(tcpproxy.Blackhole)
	if err := <-failed; err == nil {
		t.Fatal("a reserve cut off by the link succeeded")
	}
	time.Sleep(500 * time.Millisecond) // the node has given the connection up
	proxy.Set(tcpproxy.Pass)
	// Past the sleep's end, when the statement would have committed.
	eventually(t, 30*time.Second, "the sleep over", func() bool {
		var k int
		b.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = 'slow' AND wait_event = 'PgSleep'`).Scan(&k)
		return k == 0
	})
	time.Sleep(500 * time.Millisecond)
	eventually(t, 30*time.Second, "the task of the cut reserve ready", func() bool {
		got, err := b.ReserveQueues(ctx, []string{"q"}, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		return len(got) == 1
	})
}

// TestFlush_LostHandOverGivesBack: the owner's flush hands a task that
// falls due to a reserver long-polling on the owner, leasing it in the
// flush statement, on the flusher's connection of its own. When that
// statement's answer is lost (the proxy drops the database's bytes), the
// flush fails at its deadline and the task it leased is given back: it
// is ready again long before its TTR of minutes, and a reserve on
// another node takes it, its lost attempt undone.
func TestFlush_LostHandOverGivesBack(t *testing.T) {
	direct, proxied, proxy := behindProxy(t)
	reg := prometheus.NewRegistry()
	a := startNode(t, proxied, "a", func(o *cluster.Options) {
		o.DBTimeout = time.Second
		o.Lease = 30 * time.Second // the partitions outlast the muted seconds
		o.Registerer = reg
	})
	b := startNode(t, direct, "b", func(o *cluster.Options) { o.Lease = 30 * time.Second })
	ctx := context.Background()
	// A first flush on a, so that its flusher's connection is open and
	// knows its backend before the link is muted.
	if _, _, err := svc(a).Put(ctx, "warm", task.PutRequest{Delay: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the warm-up task ready", func() bool {
		got, err := a.ReserveQueues(ctx, []string{"warm"}, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		return len(got) == 1
	})
	const delay = 1500 * time.Millisecond
	if _, _, err := svc(a).Put(ctx, "q", task.PutRequest{TTR: lostTTR, Delay: delay}); err != nil {
		t.Fatal(err)
	}
	put := time.Now()
	// A reserver long-polls q on a, which owns every partition: the
	// flush hands the task to it.
	waited := make(chan error, 1)
	go func() {
		got, err := a.ReserveQueues(ctx, []string{"q"}, 1, 2*delay)
		if err == nil && len(got) > 0 {
			err = errors.New("the long-poll got the task its flush's answer was lost for")
		}
		waited <- err
	}()
	time.Sleep(delay - 500*time.Millisecond)
	proxy.Set(tcpproxy.Mute)
	time.Sleep(time.Until(put.Add(delay + 1500*time.Millisecond)))
	proxy.Set(tcpproxy.Pass)
	var got []task.Task
	eventually(t, 30*time.Second, "the task of the lost hand-over ready again", func() bool {
		var err error
		got, err = b.ReserveQueues(ctx, []string{"q"}, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		return len(got) == 1
	})
	if got[0].Attempts != 1 {
		t.Errorf("the task reserved again: attempts = %d, want 1 (the lost attempt undone)", got[0].Attempts)
	}
	if n := counter(t, reg, "hourglass_cluster_lost_reserves_total"); n < 1 {
		t.Errorf("hourglass_cluster_lost_reserves_total = %v, want at least 1", n)
	}
	<-waited
}
