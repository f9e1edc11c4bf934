package cluster_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/cluster"
	"github.com/hourglass-go/hourglass/internal/pgtest"
	"github.com/hourglass-go/hourglass/task"
)

// The simulation: many in-process nodes (100 by default) over one real
// PostgreSQL, with producers and consumers spread over them, while nodes
// die (no lease released, connections cut), pause past their leases (the
// lease loop and flusher stopped, as a SIGSTOP or a long GC would) and
// leave cleanly, and come back under their names. It checks what
// docs/SCALING.md promises at that scale:
//
//   - one owner at a time: a trigger writes every change of a partition's
//     row to a ledger; each epoch's ownership interval (from its
//     acquisition to its release or the last lease granted under it)
//     ends before the next epoch's begins, and epochs only ever grow by
//     one with a new owner. No two nodes ever believe they hold one
//     partition at one epoch (sampled every 50 ms), and no node writes as
//     owner of a partition the row gives to another (sqlAudit);
//   - nothing delivered after its ack was answered, none early, every
//     answered put delivered;
//   - rebalancing converges once the faults stop: every partition held
//     under a live lease by a running node, no node above its share, and
//     each node's belief equal to the record.
//
// HOURGLASS_SIM_NODES and HOURGLASS_SIM_FAULTS (a duration) change the
// size and length; HOURGLASS_SEED replays a run's choices of victims.

// simLease is the simulation's partition lease: with 100 nodes each
// ticking every third of it, 2 s keeps the lease loops to about 150 ticks
// per second on the database.
const simLease = 2 * time.Second

// sqlOwnership records every change of hourglass_partitions.
const sqlOwnership = `CREATE TABLE sim_ownership (seq bigserial PRIMARY KEY, at timestamptz DEFAULT clock_timestamp(),
		partition int, old_owner text, old_epoch bigint, old_until timestamptz,
		new_owner text, new_epoch bigint, new_until timestamptz);
	CREATE FUNCTION sim_ownership() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
		INSERT INTO sim_ownership (partition, old_owner, old_epoch, old_until, new_owner, new_epoch, new_until)
		VALUES (NEW.partition, OLD.owner, OLD.epoch, OLD.lease_until, NEW.owner, NEW.epoch, NEW.lease_until);
		RETURN NULL;
	END $$;
	CREATE TRIGGER sim_ownership AFTER UPDATE ON hourglass_partitions FOR EACH ROW EXECUTE FUNCTION sim_ownership();`

// simNode is one node's place in the simulation: its name, and the
// running instance, if any.
type simNode struct {
	name string
	url  string

	mu     sync.Mutex
	node   *cluster.Node // nil while down
	pool   *pgxpool.Pool
	hooks  *cluster.Hooks
	paused bool
	busy   bool // a fault or a restart is under way
}

// open starts an instance of the node.
func (s *simNode) open(ctx context.Context) error {
	cfg, err := pgxpool.ParseConfig(s.url + "&application_name=" + s.name)
	if err != nil {
		return err
	}
	cfg.MaxConns = 2
	cluster.ConfigurePool(cfg)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	h := &cluster.Hooks{}
	n, err := cluster.Open(ctx, pool, cluster.WithHooks(cluster.Options{Node: s.name, Lease: simLease, Window: 5 * time.Second, Logger: quiet}, h))
	if err != nil {
		pool.Close()
		return err
	}
	s.mu.Lock()
	s.node, s.pool, s.hooks = n, pool, h
	s.mu.Unlock()
	return nil
}

// running returns the node if it runs (paused or not).
func (s *simNode) running() *cluster.Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.node
}

// crash stops the instance as a killed process stops, and returns the
// partitions it believed it held.
func (s *simNode) crash() map[int]int64 {
	s.mu.Lock()
	n, pool := s.node, s.pool
	s.node, s.pool = nil, nil
	s.mu.Unlock()
	owned := n.Owned()
	n.Crash()
	pool.Close()
	return owned
}

// close stops the instance as a clean shutdown does.
func (s *simNode) close() {
	s.mu.Lock()
	n, pool := s.node, s.pool
	s.node, s.pool = nil, nil
	s.mu.Unlock()
	if n != nil {
		n.Close()
		pool.Close()
	}
}

// crashEvent is a node's death: when, and the partitions it held.
type crashEvent struct {
	at    time.Time
	owned map[int]int64
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// TestSimulation: see the top of the file.
func TestSimulation(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 100 nodes through faults for about 40 s; skipped with -short")
	}
	// Not parallel, and 40 nodes under the race detector (100 without it,
	// as .ci/run also runs it): beside the package's other heavy tests on
	// two loaded cores, with the race detector's cost on every goroutine,
	// the lease loops of 100 nodes could not keep their leases (failures
	// in full test runs at load 16-25: 31-40 of 64 partitions held for
	// two minutes, half the nodes' heartbeats late).
	began := time.Now()
	count := envInt("HOURGLASS_SIM_NODES", 100)
	if raceBuild && os.Getenv("HOURGLASS_SIM_NODES") == "" {
		count = 40
	}
	faultsFor := envDuration("HOURGLASS_SIM_FAULTS", 12*time.Second)
	// A node holds up to five connections: its pool's two, its
	// listener, and a connection per flush lane (flushLanes) while it
	// owns partitions.
	url := pgtest.Start(t, pgtest.Set("max_connections", strconv.Itoa(count*(3+cluster.FlushLanes)+50))).CreateDatabase(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	nodes := make([]*simNode, count)
	for i := range nodes {
		nodes[i] = &simNode{name: fmt.Sprintf("n%02d", i), url: url}
	}
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, s := range nodes {
			wg.Go(s.close)
		}
		wg.Wait()
	})
	if err := nodes[0].open(ctx); err != nil {
		t.Fatal(err)
	}
	total := nodes[0].running().Partitions()
	execSQL(t, url, sqlAudit+sqlOwnership)
	{
		var wg sync.WaitGroup
		errs := make(chan error, count)
		sem := make(chan struct{}, 10)
		for _, s := range nodes[1:] {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				if err := s.open(ctx); err != nil {
					errs <- fmt.Errorf("%s: %w", s.name, err)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	took := eventually(t, 10*simLease, "the first balance", func() bool { return simConverged(t, url, nodes, total) })
	t.Logf("%d nodes up in %v; balanced %v later (%d partitions, lease %v)", count,
		time.Since(began).Round(time.Millisecond)-took, took.Round(time.Millisecond), total, simLease)

	// Beliefs: no two running nodes hold one partition at one epoch.
	var (
		bmu     sync.Mutex
		beliefs []string
		samples int
	)
	var samplers sync.WaitGroup
	sampleCtx, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	samplers.Go(func() {
		for sampleCtx.Err() == nil {
			type pe struct {
				p int
				e int64
			}
			seen := map[pe]string{}
			for _, s := range nodes {
				n := s.running()
				if n == nil {
					continue
				}
				for p, e := range n.Owned() {
					if other, ok := seen[pe{p, e}]; ok {
						bmu.Lock()
						beliefs = append(beliefs, fmt.Sprintf("partition %d epoch %d held by %s and %s", p, e, other, s.name))
						bmu.Unlock()
					}
					seen[pe{p, e}] = s.name
				}
			}
			bmu.Lock()
			samples++
			bmu.Unlock()
			time.Sleep(50 * time.Millisecond)
		}
	})

	// Load: producers and consumers on random running nodes.
	seedv := seed(t)
	t.Logf("seed %d (HOURGLASS_SEED=%d to run again)", seedv, seedv)
	l := newLedger()
	pick := func(r *rand.Rand) (*simNode, *cluster.Node) {
		for {
			s := nodes[r.IntN(len(nodes))]
			if n := s.running(); n != nil {
				return s, n
			}
		}
	}
	putCtx, stopPuts := context.WithCancel(ctx)
	defer stopPuts()
	var producers, consumers sync.WaitGroup
	for pi := range 4 {
		r := rand.New(rand.NewPCG(seedv, uint64(100+pi)))
		producers.Go(func() {
			for k := 0; putCtx.Err() == nil; k++ {
				_, n := pick(r)
				var reqs []task.PutRequest
				for j := range 5 {
					reqs = append(reqs, task.PutRequest{ID: fmt.Sprintf("p%d-%d-%d", pi, k, j),
						Delay: time.Duration(r.Int64N(int64(2 * time.Second))), TTR: 3 * time.Second})
				}
				for _, res := range n.PutBatch(putCtx, "sim", reqs) {
					if res.Err == nil {
						l.mu.Lock()
						l.put[res.Task.ID] = res.Task.Due
						l.mu.Unlock()
					}
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
	for ci := range 8 {
		r := rand.New(rand.NewPCG(seedv, uint64(200+ci)))
		consumers.Go(func() {
			for ctx.Err() == nil {
				s, n := pick(r)
				asked := time.Now()
				rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
				tasks, err := svc(n).Reserve(rctx, "sim", 10, 300*time.Millisecond)
				rcancel()
				got := time.Now()
				if err != nil {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				for _, task := range tasks {
					l.delivery(s.name, api.Task{ID: task.ID, Due: task.Due}, asked, got)
				}
				for _, task := range tasks {
					actx, acancel := context.WithTimeout(ctx, 3*time.Second)
					err := svc(n).Ack(actx, "sim", task.ID, task.Lease)
					acancel()
					if err == nil {
						l.mu.Lock()
						l.acked[task.ID] = time.Now()
						l.mu.Unlock()
					}
				}
			}
		})
	}

	// Faults, one every 150 to 450 ms: a crash (back 0.5 to 2 s later), a
	// pause of one to two and a half leases, or a clean leave (back 0.5 s
	// later), never on more than a tenth of the nodes at once.
	rng := rand.New(rand.NewPCG(seedv, 14))
	var (
		emu     sync.Mutex
		crashes []crashEvent
		openErr []string
		kinds   = map[string]int{}
	)
	var faults sync.WaitGroup
	inFault := func() int {
		k := 0
		for _, s := range nodes {
			s.mu.Lock()
			if s.busy {
				k++
			}
			s.mu.Unlock()
		}
		return k
	}
	reopen := func(s *simNode, after time.Duration) {
		time.Sleep(after)
		octx, ocancel := context.WithTimeout(ctx, 10*simLease)
		defer ocancel()
		if err := s.open(octx); err != nil {
			emu.Lock()
			openErr = append(openErr, fmt.Sprintf("%s: %v", s.name, err))
			emu.Unlock()
		}
		s.mu.Lock()
		s.busy = false
		s.mu.Unlock()
	}
	faultsEnd := time.Now().Add(faultsFor)
	for time.Now().Before(faultsEnd) {
		time.Sleep(150*time.Millisecond + time.Duration(rng.Int64N(int64(300*time.Millisecond))))
		if inFault() >= count/10 {
			continue
		}
		s := nodes[rng.IntN(len(nodes))]
		s.mu.Lock()
		if s.busy || s.node == nil {
			s.mu.Unlock()
			continue
		}
		s.busy = true
		h := s.hooks
		s.mu.Unlock()
		kind := []string{"crash", "crash", "pause", "pause", "leave"}[rng.IntN(5)]
		kinds[kind]++
		switch kind {
		case "crash":
			back := 500*time.Millisecond + time.Duration(rng.Int64N(int64(1500*time.Millisecond)))
			at := time.Now()
			owned := s.crash()
			emu.Lock()
			crashes = append(crashes, crashEvent{at, owned})
			emu.Unlock()
			faults.Go(func() { reopen(s, back) })
		case "pause":
			d := simLease + time.Duration(rng.Int64N(int64(3*simLease/2)))
			h.Pause()
			s.mu.Lock()
			s.paused = true
			s.mu.Unlock()
			faults.Go(func() {
				time.Sleep(d)
				h.Resume()
				s.mu.Lock()
				s.paused, s.busy = false, false
				s.mu.Unlock()
			})
		case "leave":
			s.close()
			faults.Go(func() { reopen(s, 500*time.Millisecond) })
		}
	}
	faults.Wait()
	faultsOver := time.Now()
	l.mu.Lock()
	t.Logf("faults for %v: %v; load on; %d answered puts so far", faultsFor, kinds, len(l.put))
	l.mu.Unlock()
	for _, e := range openErr {
		t.Errorf("reopening %s", e)
	}

	// On an idle machine this takes about a second; under the load of a
	// whole test run (load average 16 on two cores, 100 nodes on one
	// PostgreSQL) it has twice not done within 40 s. The wait is long,
	// and a failure says what had not converged.
	var why string
	start := time.Now()
	ok := within(60*simLease, func() bool {
		why = simDivergence(t, url, nodes, total)
		return why == ""
	})
	took = time.Since(start)
	if !ok {
		t.Fatalf("rebalancing converged after the faults: not within %v: %s", 60*simLease, why)
	}
	t.Logf("converged %v after the last fault ended (lease %v)", took.Round(time.Millisecond), simLease)
	stopPuts()
	producers.Wait()
	if !within(30*time.Second, func() bool { return l.settled(t, url) }) {
		t.Errorf("answered puts not settled within 30 s after the load: %v", l.unacked(t, url))
	}
	cancel()
	consumers.Wait()
	stopSampling()
	samplers.Wait()
	t.Logf("settled %v after the faults; %v in all", time.Since(faultsOver).Round(time.Millisecond), time.Since(began).Round(time.Millisecond))

	l.check(t)
	auditClean(t, url)
	bmu.Lock()
	if len(beliefs) > 0 {
		t.Errorf("%d samples of two nodes holding one partition at one epoch, first: %v", len(beliefs), beliefs[:min(5, len(beliefs))])
	}
	t.Logf("%d samples of the nodes' beliefs", samples)
	bmu.Unlock()
	checkOwnership(t, url, crashes)
}

// simConverged reports whether every partition is held under a live
// lease by a running node, none above its share, and every running
// node believes it holds exactly what the record gives it, at the
// record's epochs.
func simConverged(t testing.TB, url string, nodes []*simNode, total int) bool {
	return simDivergence(t, url, nodes, total) == ""
}

// simDivergence returns why the cluster has not converged (see
// simConverged), or "" once it has.
func simDivergence(t testing.TB, url string, nodes []*simNode, total int) string {
	record := map[string]map[int]int64{}
	held := 0
	for _, r := range query(t, url, `SELECT owner, partition, epoch FROM hourglass_partitions
		WHERE owner IS NOT NULL AND lease_until > clock_timestamp()`) {
		f := strings.Fields(r)
		p, _ := strconv.Atoi(f[1])
		e, _ := strconv.ParseInt(f[2], 10, 64)
		if record[f[0]] == nil {
			record[f[0]] = map[int]int64{}
		}
		record[f[0]][p] = e
		held++
	}
	running := 0
	for _, s := range nodes {
		if s.running() != nil {
			running++
		}
	}
	if held != total {
		// Say who holds nothing, who believes otherwise than the
		// database, and what the unheld partitions' rows say.
		idle, busyPools, odd := 0, 0, []string{}
		for _, s := range nodes {
			n := s.running()
			if n == nil {
				continue
			}
			own, rec := n.Owned(), record[s.name]
			if len(rec) == 0 {
				idle++
				s.mu.Lock()
				if s.pool != nil && s.pool.Stat().AcquiredConns() >= s.pool.Stat().MaxConns() {
					busyPools++
				}
				s.mu.Unlock()
			}
			if len(own) != len(rec) && len(odd) < 3 {
				odd = append(odd, fmt.Sprintf("%s believes %v, the database %v", s.name, own, rec))
			}
		}
		unheld := query(t, url, `SELECT partition || ' ' || coalesce(owner, '-') || ' ' ||
			coalesce(round(extract(epoch FROM clock_timestamp() - lease_until)::numeric, 1) || 's ago', 'never')
			FROM hourglass_partitions WHERE owner IS NULL OR lease_until <= clock_timestamp() ORDER BY partition LIMIT 4`)
		live := query(t, url, `SELECT count(*) FROM hourglass_nodes WHERE alive_until > clock_timestamp()`)
		return fmt.Sprintf("%d of %d partitions held under a live lease; %d nodes running, %v live by the heartbeats, %d holding none (%d of them with every pool connection in use); unheld (partition, owner, lease ran out): %v; beliefs unlike the database: %v",
			held, total, running, live, idle, busyPools, unheld, odd)
	}
	share := (total + running - 1) / running
	for _, s := range nodes {
		n := s.running()
		rec := record[s.name]
		if n == nil {
			if len(rec) > 0 {
				return fmt.Sprintf("%s, stopped, holds %v", s.name, rec)
			}
			continue
		}
		if len(rec) > share {
			return fmt.Sprintf("%s holds %d partitions, over its share of %d among %d running", s.name, len(rec), share, running)
		}
		own := n.Owned()
		if len(own) != len(rec) {
			return fmt.Sprintf("%s believes it holds %v; the database says %v", s.name, own, rec)
		}
		for p, e := range own {
			if rec[p] != e {
				return fmt.Sprintf("%s believes it holds %v; the database says %v", s.name, own, rec)
			}
		}
	}
	return ""
}

// ownership is the ledger of partition changes read back: each epoch's
// interval by partition and epoch, and the changes that break the
// protocol.
type ownership struct {
	changes   int
	intervals map[ownershipKey]*ownershipInterval
	bad       []string
}

type ownershipKey struct {
	p int
	e int64
}

// ownershipInterval is one epoch of one partition: its owner, from its
// acquisition to its release or the end of the last lease granted under
// it (Unix µs, the database's clock).
type ownershipInterval struct {
	owner      string
	start, end int64
	released   bool
}

// readOwnership reads the ledger (sqlOwnership) and finds where an
// epoch's interval overlaps the next one's, or an epoch changes other
// than by one with a new owner.
func readOwnership(t testing.TB, url string) ownership {
	t.Helper()
	o := ownership{intervals: map[ownershipKey]*ownershipInterval{}}
	rows := query(t, url, `SELECT partition, coalesce(old_owner, '-'), old_epoch, coalesce(new_owner, '-'), new_epoch,
			(extract(epoch FROM at) * 1000000)::bigint,
			(extract(epoch FROM greatest(new_until, 'epoch'::timestamptz)) * 1000000)::bigint
		FROM sim_ownership ORDER BY seq`)
	o.changes = len(rows)
	for _, r := range rows {
		f := strings.Fields(r)
		p, _ := strconv.Atoi(f[0])
		oldE, _ := strconv.ParseInt(f[2], 10, 64)
		newE, _ := strconv.ParseInt(f[4], 10, 64)
		at, _ := strconv.ParseInt(f[5], 10, 64)
		until, _ := strconv.ParseInt(f[6], 10, 64)
		oldOwner, newOwner := f[1], f[3]
		switch {
		case newE == oldE+1 && newOwner != "-":
			o.intervals[ownershipKey{p, newE}] = &ownershipInterval{owner: newOwner, start: at, end: until}
		case newE == oldE && (newOwner == oldOwner || newOwner == "-"):
			cur := o.intervals[ownershipKey{p, newE}]
			if cur == nil { // the epoch began before the ledger
				cur = &ownershipInterval{owner: oldOwner, end: at}
				o.intervals[ownershipKey{p, newE}] = cur
			}
			if cur.released {
				continue
			}
			if newOwner == "-" {
				cur.end, cur.released = min(cur.end, at), true
			} else {
				cur.end = max(cur.end, until)
			}
		default:
			o.bad = append(o.bad, fmt.Sprintf("partition %d: %s@%d → %s@%d", p, oldOwner, oldE, newOwner, newE))
		}
	}
	for k, cur := range o.intervals {
		if prev := o.intervals[ownershipKey{k.p, k.e - 1}]; prev != nil && prev.end > cur.start {
			o.bad = append(o.bad, fmt.Sprintf("partition %d: %s's epoch %d held until %s, %s's epoch %d from %s",
				k.p, prev.owner, k.e-1, time.UnixMicro(prev.end).Format(time.StampMicro), cur.owner, k.e,
				time.UnixMicro(cur.start).Format(time.StampMicro)))
		}
	}
	return o
}

// checkOwnership fails t where the ledger shows two owners at once, and
// logs how long after each crash the crashed node's partitions were
// acquired by others.
func checkOwnership(t *testing.T, url string, crashes []crashEvent) {
	t.Helper()
	o := readOwnership(t, url)
	if len(o.bad) > 0 {
		t.Errorf("%d ownership violations, first: %v", len(o.bad), o.bad[:min(5, len(o.bad))])
	}
	var takeovers []time.Duration
	for _, c := range crashes {
		for p, e := range c.owned {
			if next := o.intervals[ownershipKey{p, e + 1}]; next != nil {
				takeovers = append(takeovers, time.UnixMicro(next.start).Sub(c.at))
			}
		}
	}
	slices.Sort(takeovers)
	acquired := 0
	for _, iv := range o.intervals {
		if iv.start > 0 {
			acquired++
		}
	}
	t.Logf("ledger: %d changes, %d acquisitions; %d crashes, %d of their partitions taken over", o.changes,
		acquired, len(crashes), len(takeovers))
	if len(takeovers) > 0 {
		t.Logf("takeover after a crash (lease %v): min %v p50 %v max %v", simLease, takeovers[0].Round(time.Millisecond),
			takeovers[len(takeovers)/2].Round(time.Millisecond), takeovers[len(takeovers)-1].Round(time.Millisecond))
	}
}

// TestOwnershipLedger: the simulation's ledger sees two owners at once
// when a partition is taken while its lease runs.
func TestOwnershipLedger(t *testing.T) {
	url := server(t).CreateDatabase(t)
	a := startNode(t, url, "a")
	execSQL(t, url, sqlOwnership)
	eventually(t, 2*testLease, "a renews", func() bool { return readOwnership(t, url).changes > 0 })
	if o := readOwnership(t, url); len(o.bad) > 0 {
		t.Fatalf("violations with one node: %v", o.bad)
	}
	a.hooks.Pause()
	execSQL(t, url, `UPDATE hourglass_partitions SET owner = 'thief', epoch = epoch + 1,
		lease_until = clock_timestamp() + interval '1 hour' WHERE partition = 3`)
	a.hooks.Resume()
	if o := readOwnership(t, url); len(o.bad) != 1 || !strings.Contains(o.bad[0], "partition 3: a's epoch") {
		t.Fatalf("a partition taken under a running lease: violations %q, want one on partition 3", o.bad)
	}
}
