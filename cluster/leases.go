package cluster

import (
	"context"
	"github.com/hourglass-go/hourglass/internal/retry"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// The lease loop: heartbeat, renew, rebalance. See the package doc for
// the protocol; this file is its one implementation.

// membership is a node's role in the cluster: its heartbeat row, the
// partition leases it holds and at which epochs, and the lease loop that
// renews, releases and acquires them. It starts with start and ends with
// stop. The other roles ask it what it holds (holds, snapshot, arrays)
// and are told by handlers what it acquired and dropped.
//
// mu guards owned and nothing else, and is a leaf: it is taken under
// Node.mu (schedules) and the timers' lock, and nothing is called or
// waited for with it held; the handlers run without it.
// membership is safe for concurrent use by multiple goroutines.
type membership struct {
	db         *pool
	name       string
	instance   string // this run's, in the heartbeat row
	partitions int
	lease      time.Duration
	clock      *clock
	log        *slog.Logger
	metrics    *metrics
	paused     *atomic.Bool // hooks: the lease loop stops while set
	on         memberHandlers

	kick     chan struct{} // buffered 1: run the lease loop now
	quit     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup

	// reach is when the heartbeat last went through: whether the node
	// can reach its database (Node.Ready). Its own lock.
	reach reach

	mu sync.Mutex
	// owned maps each partition this node holds to the epoch it holds it
	// at. Guarded by mu.
	owned map[int]int64
	// sure maps partitions of owned to the local time until which their
	// leases, at the epochs held, surely run: when the statement that
	// last acquired or renewed one was sent, plus a lease (the database
	// set the lease's end a lease after it ran, which is later). Guarded
	// by mu.
	sure map[int]time.Time
	// gen counts the changes to owned (an acquisition, a drop, the
	// release on Close): a partition held at one generation and at a
	// later equal one was held throughout, at one epoch. Guarded by mu.
	gen uint64
}

// took is what a round's acquire took over from other nodes (partitions
// whose lease ran out), and when its statement returned.
type took struct {
	over int
	at   time.Time
}

// memberHandlers are what the membership tells the node's other roles
// of. They run on the lease loop's goroutine (or Open's, or the
// flusher's for dropped), without the membership's lock.
type memberHandlers struct {
	// acquired follows the acquisition of parts, now held: it listens to
	// their channels, then loads their timers, in that order, so that a
	// timer written meanwhile is either announced or read by the load.
	acquired func(ctx context.Context, parts []int32) error
	// dropped follows the loss or release of parts (possibly none),
	// already forgotten: their schedules are disarmed, their channels
	// unlistened.
	dropped func(parts []int)
	// round runs the rest of each round, once the leases are settled.
	round func(ctx context.Context) error
	// failed: another process took this node's name; it cannot serve.
	failed func(err error)
	// released: partitions were given up for others to take now.
	released func()
	// beaten runs right after a round's heartbeat and renewal returned
	// (a test hook; nil for none).
	beaten func()
}

// newMembership returns the role, not started.
func newMembership(db *pool, name, instance string, partitions int, lease time.Duration,
	c *clock, log *slog.Logger, m *metrics, paused *atomic.Bool, on memberHandlers) *membership {
	return &membership{
		db: db, name: name, instance: instance, partitions: partitions, lease: lease,
		clock: c, log: log, metrics: m, paused: paused, on: on,
		kick:  make(chan struct{}, 1),
		quit:  make(chan struct{}),
		owned: make(map[int]int64),
		sure:  make(map[int]time.Time),
	}
}

// start starts the lease loop.
func (m *membership) start() {
	m.wg.Add(1)
	go m.leaseLoop()
}

// stop ends the lease loop, if started, and returns once it has exited;
// it releases nothing (see release). It is idempotent.
func (m *membership) stop() {
	m.stopOnce.Do(func() { close(m.quit) })
	m.wg.Wait()
}

// kickTick has the lease loop run now, without waiting.
func (m *membership) kickTick() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// holds returns the epoch at which this node holds partition p, and
// whether it does. O(1).
func (m *membership) holds(p int) (int64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.owned[p]
	return e, ok
}

// generation returns the count of changes to the partitions held, for
// heldThrough. Generation 0 is never current once a partition has been
// held. O(1).
func (m *membership) generation() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gen
}

// heldThrough reports whether this node has held partition p, at one
// epoch, since generation returned gen, and its lease surely runs on for
// more than a renewal period (Lease/renewBound) from now: then a
// statement that committed before this call did so while no other node
// could hold p, and a later owner, which loads p's timers from the rows
// once it has acquired p, reads what the statement wrote. O(1).
func (m *membership) heldThrough(p int, gen uint64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gen != gen {
		return false
	}
	until, ok := m.sure[p]
	return ok && time.Until(until) > m.lease/renewBound
}

// renewed records that the partitions parts, held at epochs, had their
// leases renewed (or acquired) by a statement sent at sent. A partition
// no longer held at that epoch is passed over.
func (m *membership) renewed(parts []int32, epochs []int64, sent time.Time) {
	until := sent.Add(m.lease)
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, p := range parts {
		if e, ok := m.owned[int(p)]; ok && e == epochs[i] {
			m.sure[int(p)] = until
		}
	}
}

// count returns how many partitions this node holds.
func (m *membership) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.owned)
}

// snapshot returns a copy of the partitions held and their epochs.
func (m *membership) snapshot() map[int]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[int]int64, len(m.owned))
	for p, e := range m.owned {
		out[p] = e
	}
	return out
}

// arrays returns the partitions held and their epochs, for SQL.
func (m *membership) arrays() ([]int32, []int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	parts := make([]int32, 0, len(m.owned))
	epochs := make([]int64, 0, len(m.owned))
	for p, e := range m.owned {
		parts = append(parts, int32(p))
		epochs = append(epochs, e)
	}
	return parts, epochs
}

// leaseLoop runs tick every Lease/3, at once when kicked (a node joined
// or left, a schedule changed, the listen connection came back), and at
// the moment another node's lease runs out, so that a dead node's
// partitions are taken over within about one lease. After a failed
// tick it tries again after a back-off from a tenth of a second up to a
// second, and a sixth of a lease: soon enough after a blip (a failed
// heartbeat takes at most a third of a lease, see tickNext) that a
// healthy node renews its leases before they run out, and that a node
// cut off from its database is ready again about a second after it can
// reach it.
func (m *membership) leaseLoop() {
	defer m.wg.Done()
	every := m.lease / 3
	backoff := retry.Backoff{Base: min(retry.DefaultBase, m.lease/6), Max: min(time.Second, m.lease/6)}
	failures := retry.NewFailureLog(m.log, "hourglass: lease tick failed", "hourglass: lease ticks work again")
	t := time.NewTimer(every)
	defer t.Stop()
	planned := time.Now().Add(every) // when t fires
	for {
		woke := "timer"
		select {
		case <-m.quit:
			return
		case <-t.C:
		case <-m.kick:
			woke = "kick"
		}
		for m.paused.Load() {
			select {
			case <-m.quit:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), m.lease)
		began := time.Now()
		next, tk, err := m.tickNext(ctx)
		cancel()
		if tk.over > 0 {
			// A takeover is rare (a node died or stalled) and its timing is
			// what a takeover's latency is made of: when the round was
			// meant to run, when it ran, and when its acquire took them.
			m.log.Info("hourglass: lease round took partitions over", "taken over", tk.over,
				"woke", woke, "planned", planned, "began", began, "acquired", tk.at, "ended", time.Now())
		}
		if err != nil {
			m.metrics.tickFailures.Inc()
			m.reach.failed(err)
			failures.Failed(err)
			next = backoff.Next()
		} else {
			failures.OK()
			backoff.Reset()
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(min(next, every))
		planned = time.Now().Add(min(next, every))
	}
}

// tick runs one round of the lease loop.
func (m *membership) tick(ctx context.Context) error {
	_, _, err := m.tickNext(ctx)
	return err
}

// renewBound: the clock, heartbeat and renewal of a tick, and each
// renewal of the keeper, take at most Lease/renewBound, their period.
const renewBound = 3

// partitionRow is one row of hourglass_partitions as a tick reads it.
type partitionRow struct {
	partition  int
	owner      string
	epoch      int64
	leaseUntil int64 // database ns; 0 for never leased
	running    bool  // the lease had not run out when the row was read (database clock)
}

// tickNext runs one round: measure the clock, heartbeat, renew the owned
// leases (dropping those that could not be renewed), release partitions
// above this node's share, acquire partitions up to it, then the rest of
// the round (the handler round: the timer window, the sweep of overdue
// timers, the schedules). It returns how long until the earliest lease
// of another node runs out.
//
// The clock, the heartbeat and the renewal have a third of a lease
// between them (renewBound): one stuck on a connection that died
// silently fails in time for the next try to renew the leases before
// they run out.
func (m *membership) tickNext(ctx context.Context) (time.Duration, took, error) {
	hctx, cancel := context.WithTimeout(ctx, m.lease/renewBound)
	defer cancel()
	if err := m.clock.measure(hctx, m.db); err != nil {
		return 0, took{}, err
	}
	// Heartbeat and renew what is held, at the epoch it is held at, if
	// not yet expired, in one statement (sqlRenew). A heartbeat row under
	// another instance means that this node was declared dead and another
	// process took its name: stop.
	parts, epochs := m.arrays()
	sent := time.Now()
	alive, renewed, err := m.renew(hctx, parts, epochs)
	if err != nil {
		return 0, took{}, err
	}
	if !alive {
		m.on.failed(ErrNameInUse)
		m.dropAll()
		return time.Hour, took{}, ErrNameInUse
	}
	m.reach.ok()
	if f := m.on.beaten; f != nil {
		f()
	}
	if len(parts) > 0 {
		slices.Sort(renewed)
		var lost []int
		var kept []int32
		var keptEpochs []int64
		for i, p := range parts {
			if _, ok := slices.BinarySearch(renewed, p); !ok {
				lost = append(lost, int(p))
			} else {
				kept, keptEpochs = append(kept, p), append(keptEpochs, epochs[i])
			}
		}
		m.renewed(kept, keptEpochs, sent)
		if len(lost) > 0 {
			m.log.Warn("hourglass: partitions lost (lease expired or taken)", "partitions", lost)
			m.metrics.lost.Add(float64(len(lost)))
			m.drop(lost)
		}
	}

	// The rest of the round may take long on a slow database: meanwhile
	// the keeper renews the heartbeat and the leases held every third of
	// a lease, so that they do not run out before the next round.
	defer m.keep(ctx)()

	// The cluster's state: every partition, and the live nodes.
	all, live, heartbeatEnd, err := m.readPartitions(ctx)
	if err != nil {
		return 0, took{}, err
	}
	share := (m.partitions + live - 1) / max(live, 1)

	m.mu.Lock()
	held := len(m.owned)
	var mine []int
	for p := range m.owned {
		mine = append(mine, p)
	}
	m.mu.Unlock()
	slices.Sort(mine)
	// Orphans: partitions leased to this node's name that it does not
	// hold, left by an acquire or a release whose result was lost (the
	// statement committed, the answer did not arrive). No other node may
	// take them before their lease runs out: this one frees them, ending
	// their epoch's lease at once, and the acquire below (this node's,
	// when under its share, or another's) takes them at the next epoch.
	// Freeing rather than taking them over at a new epoch keeps every
	// epoch's lease ended before the next one starts.
	var orphans []partitionRow
	now := m.clock.now()
	for _, r := range all {
		if _, ok := slices.BinarySearch(mine, r.partition); !ok && r.owner == m.name && r.leaseUntil > now {
			orphans = append(orphans, r)
		}
	}
	if len(orphans) > 0 {
		if err := m.freeOrphans(ctx, orphans); err != nil {
			return 0, took{}, err
		}
	}
	if held > share {
		if err := m.releasePartitions(ctx, mine[share:]); err != nil {
			return 0, took{}, err
		}
	}
	var tk took
	if held < share {
		if tk, err = m.acquire(ctx, share-held); err != nil {
			return 0, tk, err
		}
	}
	if err := m.on.round(ctx); err != nil {
		return 0, tk, err
	}

	// Wake when the first lease held by another node (or by a previous
	// run of this one) runs out, or the first heartbeat of another node,
	// of those running when the rows were read: at once if that was
	// during this round. A lease or a heartbeat that ran out during the
	// round, after the read, may have left this node at its share or the
	// partition not yet free to its acquire; waiting for the next round
	// instead would leave the partition untaken for up to a third of a
	// lease (TestTakeover_LeaseEndsDuringRound). The next round reads them
	// run out, so this wakes once for each. A node that died between its
	// heartbeat and its renewal used to count as live, keeping its share,
	// until its heartbeat ran out, a round after its leases: they are one
	// statement now (sqlRenew), and the wake at the heartbeat's end stays
	// for a node of an older build (TestTakeover_HeartbeatOutlivesLeases).
	// A live node's heartbeat is renewed every third of a lease, so it
	// ends well after the next round: this costs no round.
	next := time.Hour
	if heartbeatEnd > 0 {
		next = m.clock.until(heartbeatEnd) + 2*time.Millisecond
	}
	m.mu.Lock()
	for _, r := range all {
		if _, mine := m.owned[r.partition]; r.owner != "" && (r.owner != m.name || !mine) && r.running {
			next = min(next, m.clock.until(r.leaseUntil)+2*time.Millisecond)
		}
	}
	m.mu.Unlock()
	return next, tk, nil
}

// readPartitions returns every partition's row, the number of live
// nodes, and when the first heartbeat of the other nodes live at the
// read runs out (database ns; 0 for none).
func (m *membership) readPartitions(ctx context.Context) ([]partitionRow, int, int64, error) {
	rows, err := m.db.Query(ctx, `SELECT partition, coalesce(owner, ''), epoch,
			(extract(epoch FROM greatest(lease_until, 'epoch'::timestamptz)) * 1000000000)::bigint,
			lease_until > clock_timestamp()
		FROM hourglass_partitions ORDER BY partition`)
	if err != nil {
		return nil, 0, 0, err
	}
	var all []partitionRow
	for rows.Next() {
		var r partitionRow
		if err := rows.Scan(&r.partition, &r.owner, &r.epoch, &r.leaseUntil, &r.running); err != nil {
			rows.Close()
			return nil, 0, 0, err
		}
		all = append(all, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, 0, 0, err
	}
	var live int
	var heartbeatEnd *int64
	if err := m.db.QueryRow(ctx, `SELECT count(*),
			(extract(epoch FROM min(alive_until) FILTER (WHERE name <> $1)) * 1000000000)::bigint
		FROM hourglass_nodes WHERE alive_until > clock_timestamp()`, m.name).Scan(&live, &heartbeatEnd); err != nil {
		return nil, 0, 0, err
	}
	if heartbeatEnd == nil {
		return all, live, 0, nil
	}
	return all, live, *heartbeatEnd, nil
}

// acquire takes up to k partitions that are free or whose lease ran out,
// each at a new epoch, records them as held, then has the handler
// acquired listen to their channels and load their timers. It returns
// how many of them it took over from another node, and when.
func (m *membership) acquire(ctx context.Context, k int) (took, error) {
	sent := time.Now()
	rows, err := m.db.Query(ctx, `UPDATE hourglass_partitions p
		SET owner = $1, epoch = p.epoch + 1,
			lease_until = clock_timestamp() + $3::bigint * interval '1 microsecond'
		FROM (
			SELECT partition, owner FROM hourglass_partitions
			WHERE owner IS NULL OR lease_until < clock_timestamp()
			ORDER BY partition LIMIT $2 FOR UPDATE SKIP LOCKED) prev
		WHERE p.partition = prev.partition
		RETURNING p.partition, p.epoch, prev.owner IS NOT NULL`, m.name, k, m.lease.Microseconds())
	if err != nil {
		return took{}, err
	}
	got := map[int]int64{}
	takeovers := 0
	for rows.Next() {
		var p int
		var e int64
		var takeover bool
		if err := rows.Scan(&p, &e, &takeover); err != nil {
			rows.Close()
			return took{}, err
		}
		got[p] = e
		if takeover {
			takeovers++
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return took{}, err
	}
	if len(got) == 0 {
		return took{}, nil
	}
	// Counted before they are owned, so that a scrape that sees them owned
	// also sees them acquired.
	m.metrics.acquired.Add(float64(len(got)))
	m.metrics.takeovers.Add(float64(takeovers))
	tk := took{over: takeovers, at: time.Now()}
	var parts []int32
	m.mu.Lock()
	for p, e := range got {
		m.owned[p] = e
		m.sure[p] = sent.Add(m.lease)
		parts = append(parts, int32(p))
	}
	m.gen++
	m.mu.Unlock()
	m.log.Info("hourglass: partitions acquired", "partitions", len(got), "taken over", takeovers)
	return tk, m.on.acquired(ctx, parts)
}

// drop forgets partitions this node no longer holds: their timers still
// in the wheel are dropped when they fire, their schedules are disarmed.
func (m *membership) drop(parts []int) {
	m.dropAt(parts, nil)
}

// dropAt is drop for the partitions of parts still held at the epoch
// epochs gives (every one of parts when epochs is nil). A flush that
// found itself fenced out of a partition at the epoch it read drops it
// only if the lease loop has not taken it again meanwhile at a new epoch:
// dropping that new lease would leave its tasks unhanded until it ran
// out. The handler dropped runs in any case, with the partitions
// forgotten.
func (m *membership) dropAt(parts []int, epochs map[int]int64) {
	var gone []int
	m.mu.Lock()
	for _, p := range parts {
		if e, ok := m.owned[p]; ok {
			if want, ok := epochs[p]; epochs != nil && (!ok || want != e) {
				continue
			}
			delete(m.owned, p)
			delete(m.sure, p)
			gone = append(gone, p)
		}
	}
	if len(gone) > 0 {
		m.gen++
	}
	m.mu.Unlock()
	m.on.dropped(gone)
}

// dropAll forgets every partition.
func (m *membership) dropAll() {
	m.mu.Lock()
	var parts []int
	for p := range m.owned {
		parts = append(parts, p)
	}
	m.mu.Unlock()
	m.drop(parts)
}

// releasePartitions gives parts up: this node stops acting on them first,
// then frees their leases (at the epoch it held them) for others to
// acquire, and tells the others so.
func (m *membership) releasePartitions(ctx context.Context, parts []int) error {
	m.mu.Lock()
	var ps []int32
	var es []int64
	for _, p := range parts {
		if e, ok := m.owned[p]; ok {
			ps = append(ps, int32(p))
			es = append(es, e)
		}
	}
	m.mu.Unlock()
	m.drop(parts)
	if len(ps) == 0 {
		return nil
	}
	_, err := m.db.Exec(ctx, sqlRelease, m.name, ps, es)
	if err != nil {
		return err
	}
	m.log.Info("hourglass: partitions released", "partitions", len(ps))
	m.on.released()
	return nil
}

// freeOrphans frees the leases of orphans (tickNext) at the epochs they
// were read at, for other nodes to acquire.
func (m *membership) freeOrphans(ctx context.Context, orphans []partitionRow) error {
	ps := make([]int32, len(orphans))
	es := make([]int64, len(orphans))
	for i, r := range orphans {
		ps[i], es[i] = int32(r.partition), r.epoch
	}
	tag, err := m.db.Exec(ctx, sqlRelease, m.name, ps, es)
	if err != nil {
		return err
	}
	if tag.RowsAffected() > 0 {
		m.log.Info("hourglass: orphaned partitions freed", "partitions", tag.RowsAffected())
		m.on.released()
	}
	return nil
}

// sqlRelease frees the leases of the partitions $2 held by node $1 at the
// epochs $3, for other nodes to acquire.
const sqlRelease = `UPDATE hourglass_partitions SET owner = NULL, lease_until = '-infinity'
	WHERE partition IN (
		SELECT p.partition FROM hourglass_partitions p
		JOIN unnest($2::int[], $3::bigint[]) AS m(partition, epoch) ON m.partition = p.partition
		WHERE p.owner = $1 AND p.epoch = m.epoch
		ORDER BY p.partition FOR UPDATE OF p)`
