package cluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hourglass-go/hourglass/internal/retry"
	"github.com/hourglass-go/hourglass/service"
)

// A leasing statement (sqlReserve, sqlReserveFair, sqlReserveLimited,
// ReserveJob's, sqlFlush's hand-over) commits by itself, or with its
// transaction, and its answer carries the leases it made. When the call
// ends with an error that leaves its outcome unknown (the statement's
// deadline, a client's cancel or a broken connection after the statement
// was sent), PostgreSQL may have committed leases that nobody will ever
// ack: the tasks would stay reserved until their TTR runs out, an
// attempt spent. So the node chooses each call's leases (newLeaseToken,
// sqlLease) and, when a call's answer is lost, gives back in the
// background whatever it may have leased (giveBacks): the reserve itself
// answers its error at once.
//
// A give-back must not run before the lost statement is over: a
// statement still running when its connection was given up would commit
// its leases after the give-back looked. The node knows the backend that
// ran the call (leaseQuery: its pid and start time, read once per
// connection) and ends it first with pg_terminate_backend, which waits
// for it to exit: its transaction has then committed or rolled back for
// good, and a statement whose bytes had not reached it yet never runs.
// Then one statement (sqlGiveBackLost) makes the tasks still held under
// the call's leases ready again.

// newLeaseToken returns a fresh call token: 64 random bits as 16 hex
// digits, the start of every lease one call of a leasing statement makes
// (sqlLease). The node, not PostgreSQL, chooses it, so that it knows the
// leases a call made even when the call's answer is lost. It needs no
// cryptographic strength: a lease names a reservation, it grants no
// right a client could not have by reserving. O(1); safe for concurrent
// use.
func newLeaseToken() string { return fmt.Sprintf("%016x", rand.Uint64()) }

// leaseCall is one call of a leasing statement: its token, where it may
// have leased, and what is known of the backend that ran it. Filled by
// leaseQuery and its rows, read by giveBacks once the call is over.
type leaseCall struct {
	tok string
	// queues the statement leases in; jobs, for a statement that leases
	// by job id (ReserveJob). A give-back looks there only.
	queues []string
	jobs   []int64
	// pid and start name the backend that ran the call (pg_stat_activity's
	// pid and backend_start); pid 0: unknown (a pooler between, whose
	// backends change under a connection).
	pid   int32
	start time.Time
	// lost: the call ended with an error that leaves its outcome
	// unknown (unknownOutcome).
	lost bool
	// open: the connection was still open once the call ended: its
	// statement is over, nothing needs to be awaited.
	open bool
	// until is when every lease the call may have made has run out.
	until time.Time
	// g receives the call if it is lost; nil: nobody gives back.
	g *giveBacks
}

// unknownOutcome reports whether a leasing statement that failed with
// err may have committed: not when PostgreSQL answered an error (the
// statement, or its transaction, rolled back) nor when pgx says nothing
// was sent (pgconn.SafeToRetry); in every other case (a deadline or a
// cancel after the statement was sent, a connection that broke, an
// answer that could not be read) it may have. O(1).
func unknownOutcome(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	return !errors.As(err, &pgErr) && !pgconn.SafeToRetry(err)
}

// backendKey is the key of a connection's backend (a backend) in
// its pgconn.PgConn's CustomData.
const backendKey = "hourglass.backend"

// backend is the PostgreSQL backend a connection talks to; pid 0 for
// none known.
type backend struct {
	pid   int32
	start time.Time
}

// backendOf returns the backend of conn, whose pgconn.PgConn is pc (conn
// itself, or a transaction on it), read from pg_stat_activity on
// the connection's first leasing call and kept with it. A backend whose
// pid is not the one the connection was given at its start (a pooler
// between) is not known: the pooler may run the next statement on
// another one.
func backendOf(ctx context.Context, conn interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, pc *pgconn.PgConn) (backend, error) {
	if b, ok := pc.CustomData()[backendKey].(backend); ok {
		return b, nil
	}
	var b backend
	err := conn.QueryRow(ctx, `SELECT pid, backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()`).
		Scan(&b.pid, &b.start)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return backend{}, err
	}
	if uint32(b.pid) != pc.PID() {
		b = backend{}
	}
	pc.CustomData()[backendKey] = b
	return b, nil
}

// leaseQuery runs the leasing statement sql with args and the call's
// token as its last parameter, within the pool's deadline (as Query), on
// a connection it acquires itself so that call knows the backend that
// runs it. The rows returned, or the error, record in call how the call
// ended; once it is over (the error returned, or the rows closed), a
// call whose outcome is unknown goes to call.g to be given back.
func (p *pool) leaseQuery(ctx context.Context, call *leaseCall, sql string, args ...any) (pgx.Rows, error) {
	bctx, cancel := p.bound(ctx)
	p.awaitIdle(bctx) // pool.go: rather than have the pool open one
	conn, err := p.raw.Acquire(bctx)
	if err != nil {
		cancel()
		return nil, p.check(bctx, err)
	}
	b, err := backendOf(bctx, conn, conn.Conn().PgConn())
	if err != nil {
		// Nothing was leased: the statement was not sent.
		conn.Release()
		cancel()
		return nil, p.check(bctx, err)
	}
	call.pid, call.start = b.pid, b.start
	rows, err := conn.Query(bctx, sql, append(args, call.tok)...)
	r := &leaseRows{Rows: rows, ctx: bctx, cancel: cancel, p: p, conn: conn, call: call}
	if err != nil {
		r.fail(err)
		r.Close()
		return nil, p.check(bctx, err)
	}
	return r, nil
}

// leaseRows are the rows of a leaseQuery.
type leaseRows struct {
	pgx.Rows
	ctx    context.Context
	cancel context.CancelFunc
	p      *pool
	conn   *pgxpool.Conn // nil once released
	call   *leaseCall
}

// fail records err, an error of the call.
func (r *leaseRows) fail(err error) {
	if unknownOutcome(err) {
		r.call.lost = true
	}
}

func (r *leaseRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.fail(r.Rows.Err())
	r.Close()
	return false
}

func (r *leaseRows) Scan(dest ...any) error {
	err := r.Rows.Scan(dest...)
	r.fail(err)
	return r.p.check(r.ctx, err)
}

func (r *leaseRows) Err() error { return r.p.check(r.ctx, r.Rows.Err()) }

// Close closes the rows, releases the connection and, if the call's
// outcome is unknown, hands the call to be given back. Idempotent.
func (r *leaseRows) Close() {
	if r.conn == nil {
		return
	}
	if r.Rows != nil {
		r.Rows.Close()
		r.fail(r.Rows.Err())
	}
	r.call.open = !r.conn.Conn().PgConn().IsClosed()
	r.conn.Release()
	r.conn = nil
	r.cancel()
	if r.call.lost && r.call.g != nil {
		r.call.g.add(r.call)
	}
}

// maxGiveBacks bounds the lost calls a node keeps to give back; past
// it, a lost call's leases are left to run out (counted).
const maxGiveBacks = 1024

// giveBacks gives back, on a goroutine of its own started when there is
// work, what lost calls (leaseCall) may have leased: one call at a time,
// oldest first, each try bounded by the pool's deadline, a failed try
// retried after a capped, jittered back-off (retry.Backoff), its lasting
// failure logged about once a second (retry.FailureLog), until it
// succeeds or the call's leases would have run out anyway. At most
// maxGiveBacks calls wait. It is safe for concurrent use by multiple
// goroutines.
type giveBacks struct {
	db      *pool
	readied func(queue string, k int) // wakes the reservers of queue, k tasks made ready
	log     *retry.FailureLog
	// calls counts the lost calls, given the tasks given back, left the
	// calls left to their leases' expiry.
	calls, given, left prometheus.Counter
	quit               chan struct{}
	wg                 sync.WaitGroup

	mu sync.Mutex
	// pending are the lost calls to give back, oldest first. Guarded by mu.
	pending []*leaseCall
	// running: the goroutine runs. closed: by close. Guarded by mu.
	running, closed bool
}

// newGiveBacks returns the give-backs of a node.
func newGiveBacks(n *Node) *giveBacks {
	return &giveBacks{
		db:      n.db,
		readied: n.readied,
		log: retry.NewFailureLog(n.log, "hourglass: giving back the tasks of a reserve whose answer was lost failed",
			"hourglass: giving back the tasks of lost reserves works again"),
		calls: n.metrics.lostCalls, given: n.metrics.lostGivenBack, left: n.metrics.lostLeft,
		quit: make(chan struct{}),
	}
}

// call returns a new call of a leasing statement over queues,
// whose tasks g gives back if its answer is lost.
func (g *giveBacks) call(queues []string) *leaseCall {
	return &leaseCall{tok: newLeaseToken(), queues: queues, until: time.Now().Add(service.MaxTTR), g: g}
}

// callJob returns a new call of a leasing statement that reserves by job
// id, whose tasks g gives back if its answer is lost.
func (g *giveBacks) callJob(job int64) *leaseCall {
	return &leaseCall{tok: newLeaseToken(), queues: []string{}, jobs: []int64{job},
		until: time.Now().Add(service.MaxTTR), g: g}
}

// committed takes c, a call whose statements ran in a transaction that
// ended with err, to give back if it was its commit that failed
// (committing) with an outcome unknown. Any other error rolled the
// transaction back, or will once PostgreSQL sees the connection gone:
// no COMMIT reached it. A commit cut short leaves its connection closed.
func (g *giveBacks) committed(c *leaseCall, committing bool, err error) {
	if committing && unknownOutcome(err) {
		c.lost = true
		g.add(c)
	}
}

// add takes a lost call to give back. O(1).
func (g *giveBacks) add(c *leaseCall) {
	g.calls.Inc()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed || len(g.pending) >= maxGiveBacks {
		g.left.Inc()
		return
	}
	g.pending = append(g.pending, c)
	if !g.running {
		g.running = true
		g.wg.Add(1)
		go g.run()
	}
}

// close stops the goroutine and waits for it; the calls still pending
// are left to their leases' expiry. Idempotent.
func (g *giveBacks) close() {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return
	}
	g.closed = true
	g.left.Add(float64(len(g.pending)))
	g.pending = nil
	g.mu.Unlock()
	close(g.quit)
	g.wg.Wait()
}

// run gives back the pending calls until none is left.
func (g *giveBacks) run() {
	defer g.wg.Done()
	b := retry.Backoff{Base: retry.DefaultBase, Max: retry.DefaultMax}
	for {
		g.mu.Lock()
		if len(g.pending) == 0 || g.closed {
			g.running = false
			g.mu.Unlock()
			return
		}
		c, waiting := g.pending[0], len(g.pending)
		g.mu.Unlock()
		if time.Now().After(c.until) {
			g.pop(c)
			g.left.Inc()
			continue
		}
		if err := g.giveBack(c); err != nil {
			g.log.Failed(err, "calls", waiting)
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) {
				// PostgreSQL refused the statement: trying again would
				// not change that, and the calls behind would wait.
				g.pop(c)
				g.left.Inc()
				continue
			}
			t := time.NewTimer(b.Next())
			select {
			case <-t.C:
			case <-g.quit:
				t.Stop()
			}
			continue
		}
		g.pop(c)
		b.Reset()
		g.log.OK()
	}
}

// pop drops c, the first pending call.
func (g *giveBacks) pop(c *leaseCall) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.pending) > 0 && g.pending[0] == c {
		g.pending[0] = nil
		g.pending = g.pending[1:]
	}
}

// sqlEndBackend ends the backend $1 started at $2, if it still runs, and
// waits up to $3 ms for it to exit; it returns how many it could not
// end in time (0 or 1). A backend ended or gone is one whose
// transaction will never commit anything more.
const sqlEndBackend = `SELECT count(*) FILTER (WHERE NOT pg_terminate_backend(pid, $3))
	FROM pg_stat_activity WHERE pid = $1 AND backend_start = $2`

// sqlGiveBackLost makes ready again the tasks of the queues $1, or the
// jobs $2, still held under leases of the call token $3 (sqlLease),
// undoing the reservation (its attempt and try included) as sqlGiveBack
// does. Each queue's reserved tasks are read through the partial index
// hourglass_tasks_key_reserved (queue, ...) WHERE state = 2 (migrations
// 014, 019) by its prefix, one index descent a queue (the lateral subquery, fenced by OFFSET 0: a condition on queue
// OR job_id, or a subquery the planner may flatten, is planned as a walk
// of every reserved task), and the jobs by primary key: O(tasks reserved
// in the queues), those in flight, never the ready or delayed ones. It
// commits without waiting for the WAL flush, as the reservation did.
const sqlGiveBackLost = `WITH r AS (SELECT set_config('synchronous_commit', 'off', true)),
	held AS (
		SELECT x.job_id FROM unnest($1::text[]) AS q(name)
		CROSS JOIN LATERAL (SELECT t.job_id FROM hourglass_tasks t
			WHERE t.queue = q.name AND t.state = 2 AND t.lease = $3` + sqlLease + ` OFFSET 0) x
		UNION
		SELECT j FROM unnest($2::bigint[]) AS g(j)
	)
	UPDATE hourglass_tasks t SET state = 1, attempts = t.attempts - 1, tries = t.tries - 1, lease = '', lease_until = 0,
		fire_at = NULL
	FROM r
	WHERE t.job_id = ANY(ARRAY(SELECT job_id FROM held)) AND t.state = 2 AND t.lease = $3` + sqlLease + `
	RETURNING t.queue`

// giveBack is one try at giving back c: its backend ended first if its
// connection was given up (unless PostgreSQL does not allow it), then its
// tasks made ready again and their reservers woken. It returns the
// database's error as pgx gives it: a PgError is final (run).
func (g *giveBacks) giveBack(c *leaseCall) error {
	ctx := context.Background()
	if !c.open && c.pid != 0 {
		wait := min(time.Second, g.db.timeout/2).Milliseconds()
		var running int
		err := g.db.QueryRow(ctx, sqlEndBackend, c.pid, c.start, wait).Scan(&running)
		var pgErr *pgconn.PgError
		switch {
		case errors.As(err, &pgErr):
			// Not allowed to end it (another role's backend, say): the
			// give-back does what it can without.
			running = 0
		case err != nil:
			return err
		}
		if running > 0 {
			return fmt.Errorf("hourglass: the backend of a reserve whose answer was lost (pid %d) has not ended", c.pid)
		}
		c.pid = 0 // ended: later tries need not look
	}
	jobs := c.jobs
	if jobs == nil {
		jobs = []int64{}
	}
	rows, err := g.db.Query(ctx, sqlGiveBackLost, c.queues, jobs, c.tok)
	if err != nil {
		return err
	}
	queues, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	g.given.Add(float64(len(queues)))
	byQueue := map[string]int{}
	for _, q := range queues {
		byQueue[q]++
	}
	for q, k := range byQueue {
		g.readied(q, k)
	}
	return nil
}
