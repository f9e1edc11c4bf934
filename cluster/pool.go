package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hourglass-go/hourglass/internal/retry"
	"github.com/hourglass-go/hourglass/task"
)

// ConfigurePool sets on cfg what a node wants of its pool's connections,
// where the connection string does not say otherwise:
//
//   - generic plans for its prepared statements
//     (plan_cache_mode=force_generic_plan). A node runs a handful of
//     statements thousands of times a second; PostgreSQL would otherwise
//     plan most of them afresh at each execution (the custom plans it
//     tries first win on estimated cost for array arguments), and
//     planning would cost a large share of the server's CPU. The
//     statements are written so that their generic plans are the right
//     ones (index lookups by the arrays' elements).
//   - no JIT compilation (jit=off). A generic plan's estimates can pass
//     jit_above_cost on a large table (LIMIT $2 is estimated at a tenth
//     of its input), and the reservation is then compiled afresh at
//     every execution, which costs far more than the statement's own
//     work on a large table. A node's statements touch
//     a few rows each, for which compiling never pays.
//   - a connect timeout (cfg.ConnConfig.ConnectTimeout, DefaultDBTimeout
//     when zero): the pool opens connections on goroutines of its own,
//     which no caller's context bounds, and a connection to a database
//     that drops packets would otherwise hang, holding a place in the
//     pool, for as long as the operating system retries.
//   - TCP keep-alive probes and, on Linux, TCP_USER_TIMEOUT (pool_linux.go),
//     so that a connection to a database that vanished without a reset
//     (a network partition) fails in bounded time, idle or not.
//   - a warm-up of each connection the pool opens (cfg.AfterConnect,
//     after the one cfg had, if any): the node's hot statements prepared
//     and the catalog caches they need loaded, no plan kept (warm.go),
//     within the connect timeout. Its failures are logged to
//     slog.Default (ConfigurePoolLogger logs them elsewhere).
//
// Call it once before pgxpool.NewWithConfig; [Open] logs a warning for a
// pool without it.
func ConfigurePool(cfg *pgxpool.Config) { ConfigurePoolLogger(cfg, slog.Default()) }

// ConfigurePoolLogger is [ConfigurePool] with the warm-ups' failures
// logged to log, about once a second with a count.
func ConfigurePoolLogger(cfg *pgxpool.Config, log *slog.Logger) {
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	if _, ok := cfg.ConnConfig.RuntimeParams[planCacheMode]; !ok {
		cfg.ConnConfig.RuntimeParams[planCacheMode] = "force_generic_plan"
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["jit"]; !ok {
		cfg.ConnConfig.RuntimeParams["jit"] = "off"
	}
	if cfg.ConnConfig.ConnectTimeout <= 0 {
		cfg.ConnConfig.ConnectTimeout = DefaultDBTimeout
	}
	cfg.ConnConfig.DialFunc = dialer(cfg.ConnConfig.ConnectTimeout).DialContext
	cfg.AfterConnect = warmHook(cfg.AfterConnect, cfg.ConnConfig.ConnectTimeout, newWarmFailures(log))
}

const planCacheMode = "plan_cache_mode"

// configured reports whether db's connections were set up by
// ConfigurePool (or say plan_cache_mode themselves).
func configured(db *pgxpool.Pool) bool {
	_, ok := db.Config().ConnConfig.RuntimeParams[planCacheMode]
	return ok
}

// The keep-alive of a node's connections: probes after keepAliveIdle of
// silence, every keepAliveInterval, keepAliveCount of them unanswered
// and the connection is dead. userTimeout, the most that sent data may
// stay unacknowledged, is as long, so that it does not cut the probing
// short.
const (
	keepAliveIdle     = 5 * time.Second
	keepAliveInterval = 5 * time.Second
	keepAliveCount    = 3
	userTimeout       = keepAliveIdle + keepAliveCount*keepAliveInterval
)

// dialer returns the dialer of a node's connections (see ConfigurePool).
func dialer(connect time.Duration) *net.Dialer {
	return &net.Dialer{
		Timeout: connect,
		KeepAliveConfig: net.KeepAliveConfig{
			Enable: true, Idle: keepAliveIdle, Interval: keepAliveInterval, Count: keepAliveCount,
		},
		Control: setUserTimeout,
	}
}

// DefaultDBTimeout is Options.DBTimeout's default.
const DefaultDBTimeout = 5 * time.Second

// pool is a node's pool with a deadline on every call: each statement,
// and the wait for a connection before it, ends by the caller's deadline
// or timeout from its start, whichever is first (bound). It has only
// the methods the node uses, each bounded, so that no statement of the
// cluster package can reach the database without a deadline; a
// transaction (Begin) bounds each of its statements the same way.
//
// A statement cut short by timeout fails with an error that says the
// database is unreachable and wraps task.ErrClosed (a 503 over HTTP),
// not with context.DeadlineExceeded, which the long-polls read as their
// wait running out. pool is safe for concurrent use by multiple
// goroutines.
type pool struct {
	raw     *pgxpool.Pool
	timeout time.Duration
	// keeping: a keeper of spare connections runs (startSpares), so a
	// call that finds no connection idle waits a little for one
	// (awaitIdle) rather than having the pool open one for it.
	keeping atomic.Bool
}

// errNoAnswer is the cause of a context that bound cut short.
var errNoAnswer = errors.New("no answer")

// unreachableError is a call that the database did not answer within
// the node's timeout, or that could not connect.
type unreachableError struct{ msg string }

func (e *unreachableError) Error() string { return "hourglass: database unreachable: " + e.msg }

// Is makes the error a task.ErrClosed: the request could not be served,
// nothing is promised of it.
func (e *unreachableError) Is(target error) bool { return target == task.ErrClosed }

// bound returns ctx with the pool's deadline: timeout from now, or ctx's
// own if that is sooner. O(1).
func (p *pool) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, p.timeout, errNoAnswer)
}

// check returns err, or an unreachableError when it is bctx's own
// deadline (not its parent's) that cut the call short.
func (p *pool) check(bctx context.Context, err error) error {
	if err != nil && context.Cause(bctx) == errNoAnswer {
		return &unreachableError{fmt.Sprintf("no answer within %v", p.timeout)}
	}
	return err
}

// Config returns a copy of the pool's configuration.
func (p *pool) Config() *pgxpool.Config { return p.raw.Config() }

// Exec runs sql within the pool's deadline.
func (p *pool) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	bctx, cancel := p.bound(ctx)
	defer cancel()
	p.awaitIdle(bctx)
	tag, err := p.raw.Exec(bctx, sql, args...)
	return tag, p.check(bctx, err)
}

// Query runs sql within the pool's deadline, which bounds the reading of
// the rows too; closing them (or reading them to the end) releases it.
func (p *pool) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	bctx, cancel := p.bound(ctx)
	p.awaitIdle(bctx)
	rows, err := p.raw.Query(bctx, sql, args...)
	if err != nil {
		cancel()
		return nil, p.check(bctx, err)
	}
	return &boundRows{Rows: rows, ctx: bctx, cancel: cancel, p: p}, nil
}

// QueryRow runs sql within the pool's deadline; Scan releases it.
func (p *pool) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	bctx, cancel := p.bound(ctx)
	p.awaitIdle(bctx)
	return &boundRow{row: p.raw.QueryRow(bctx, sql, args...), ctx: bctx, cancel: cancel, p: p}
}

// Begin starts a transaction within the pool's deadline; each of its
// statements, its commit and its rollback has a deadline of its own.
func (p *pool) Begin(ctx context.Context) (pgx.Tx, error) {
	bctx, cancel := p.bound(ctx)
	defer cancel()
	p.awaitIdle(bctx)
	tx, err := p.raw.Begin(bctx)
	if err != nil {
		return nil, p.check(bctx, err)
	}
	return &boundTx{Tx: tx, p: p}, nil
}

// SendBatch sends b's statements at once, run in one implicit
// transaction (each with its own snapshot, as in a transaction begun
// with BEGIN), within the pool's deadline; closing the results releases
// it and maps its errors as check does.
func (p *pool) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	bctx, cancel := p.bound(ctx)
	p.awaitIdle(bctx)
	return &boundBatch{BatchResults: p.raw.SendBatch(bctx, b), ctx: bctx, cancel: cancel, p: p}
}

// boundBatch are the results of a bounded SendBatch.
type boundBatch struct {
	pgx.BatchResults
	ctx    context.Context
	cancel context.CancelFunc
	p      *pool
}

func (b *boundBatch) Close() error {
	err := b.BatchResults.Close()
	b.cancel()
	return b.p.check(b.ctx, err)
}

// boundRows are the rows of a bounded Query.
type boundRows struct {
	pgx.Rows
	ctx    context.Context
	cancel context.CancelFunc
	p      *pool
}

func (r *boundRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.cancel()
	return false
}

func (r *boundRows) Close() {
	r.Rows.Close()
	r.cancel()
}

func (r *boundRows) Err() error { return r.p.check(r.ctx, r.Rows.Err()) }

func (r *boundRows) Scan(dest ...any) error { return r.p.check(r.ctx, r.Rows.Scan(dest...)) }

// boundRow is the row of a bounded QueryRow.
type boundRow struct {
	row    pgx.Row
	ctx    context.Context
	cancel context.CancelFunc
	p      *pool
}

func (r *boundRow) Scan(dest ...any) error {
	defer r.cancel()
	return r.p.check(r.ctx, r.row.Scan(dest...))
}

// boundTx is a transaction of a pool whose every statement is bounded.
// What it does not override (CopyFrom, SendBatch, Prepare, LargeObjects,
// Conn) the node does not use.
type boundTx struct {
	pgx.Tx
	p *pool
}

func (tx *boundTx) Begin(ctx context.Context) (pgx.Tx, error) {
	bctx, cancel := tx.p.bound(ctx)
	defer cancel()
	sub, err := tx.Tx.Begin(bctx)
	if err != nil {
		return nil, tx.p.check(bctx, err)
	}
	return &boundTx{Tx: sub, p: tx.p}, nil
}

func (tx *boundTx) Commit(ctx context.Context) error {
	bctx, cancel := tx.p.bound(ctx)
	defer cancel()
	return tx.p.check(bctx, tx.Tx.Commit(bctx))
}

func (tx *boundTx) Rollback(ctx context.Context) error {
	bctx, cancel := tx.p.bound(ctx)
	defer cancel()
	return tx.p.check(bctx, tx.Tx.Rollback(bctx))
}

func (tx *boundTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	bctx, cancel := tx.p.bound(ctx)
	defer cancel()
	tag, err := tx.Tx.Exec(bctx, sql, args...)
	return tag, tx.p.check(bctx, err)
}

func (tx *boundTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	bctx, cancel := tx.p.bound(ctx)
	rows, err := tx.Tx.Query(bctx, sql, args...)
	if err != nil {
		cancel()
		return nil, tx.p.check(bctx, err)
	}
	return &boundRows{Rows: rows, ctx: bctx, cancel: cancel, p: tx.p}, nil
}

func (tx *boundTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	bctx, cancel := tx.p.bound(ctx)
	return &boundRow{row: tx.Tx.QueryRow(bctx, sql, args...), ctx: bctx, cancel: cancel, p: tx.p}
}

// Spare connections. A pool opens a connection when a caller finds none
// idle, and that caller waits for it: the connection's start on the
// server, then its warm-up (warm.go), round trips that each wait for a
// core when the machine is busy. Whatever made the pool grow (a reserve,
// a flush's give-back, the notifier) waited that long, and the tasks
// behind it with it. So a node keeps a few connections idle ahead of
// demand: once fewer than spareConns are idle (or being opened), its
// keeper opens more in the background, up to the pool's MaxConns, and a
// caller finds one ready. The pool closes connections idle past its
// MaxConnIdleTime as before, down to its MinConns.

// A burst of callers (a load starting: reservers, acks, give-backs and
// notifications at once) may still find none idle while the keeper's
// are being opened. The pool would open one for each; since a statement
// holds its connection for milliseconds and an opening takes far longer,
// such a caller first waits up to idleWait for one handed back or opened
// (awaitIdle), and only then lets the pool open one.

// spareConns is how many idle connections a node's keeper keeps ready.
const spareConns = 2

// spareEvery is how often the keeper looks at the pool: a look is a
// Stat of the pool, a lock and a few reads.
const spareEvery = 5 * time.Millisecond

// spares is a node's keeper of spare connections (keepSpare). It is
// safe for concurrent use.
type spares struct {
	p        *pool
	failures *retry.FailureLog
	quit     chan struct{}
	wg       sync.WaitGroup
	// opening counts the connections the keeper is opening; opened those
	// it opened, for tests.
	opening, opened atomic.Int64
}

// startSpares starts p's keeper of spare connections; stop ends it.
func (p *pool) startSpares(log *slog.Logger) *spares {
	s := &spares{p: p, quit: make(chan struct{}),
		failures: retry.NewFailureLog(log, "hourglass: opening a spare database connection failed",
			"hourglass: spare database connections open again")}
	s.wg.Go(s.run)
	p.keeping.Store(true)
	return s
}

// stop ends the keeper and waits for the connections it is opening (each
// bounded by the pool's deadline). It is idempotent.
func (s *spares) stop() {
	s.p.keeping.Store(false)
	select {
	case <-s.quit:
	default:
		close(s.quit)
	}
	s.wg.Wait()
}

// run is the keeper's loop: every spareEvery it opens, each on a
// goroutine of its own, as many connections as are missing from
// spareConns idle or being opened, within the pool's MaxConns. After a
// failure it opens none for a back-off (jittered, up to retry.DefaultMax),
// and logs about once a second.
func (s *spares) run() {
	tick := time.NewTicker(spareEvery)
	defer tick.Stop()
	backoff := retry.Backoff{Base: retry.DefaultBase, Max: retry.DefaultMax}
	var notBefore time.Time
	done := make(chan error, spareConns)
	for {
		select {
		case <-s.quit:
			return
		case err := <-done:
			if err != nil {
				s.failures.Failed(err)
				notBefore = time.Now().Add(backoff.Next())
			} else {
				s.failures.OK()
				backoff.Reset()
			}
			continue
		case <-tick.C:
		}
		if time.Now().Before(notBefore) {
			continue
		}
		st := s.p.raw.Stat()
		opening := s.opening.Load()
		want := int64(spareConns) - int64(st.IdleConns()) - max(int64(st.ConstructingConns()), opening)
		want = min(want, int64(st.MaxConns()-st.TotalConns()))
		for range max(want, 0) {
			s.opening.Add(1)
			s.wg.Go(func() {
				defer s.opening.Add(-1)
				err := s.open()
				select {
				case done <- err:
				case <-s.quit:
				}
			})
		}
	}
}

// open has the pool open a connection (warmed by its AfterConnect) and
// leaves it idle. The pool opens one for an acquisition only when it has
// none idle, so open holds the idle ones (AcquireAllIdle) until its
// acquisition has begun opening one, or has returned, then gives them
// back, at most openHold later: a caller that comes meanwhile finds
// none idle and has the pool open one of its own, as it would without
// the keeper. Bounded by the pool's deadline and by stop.
func (s *spares) open() error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.quit:
			cancel()
		case <-ctx.Done():
		}
	}()
	bctx, bcancel := s.p.bound(ctx)
	defer bcancel()
	before := s.p.raw.Stat().ConstructingConns()
	held := s.p.raw.AcquireAllIdle(bctx)
	type acquired struct {
		c   *pgxpool.Conn
		err error
	}
	got := make(chan acquired, 1)
	go func() {
		c, err := s.p.raw.Acquire(bctx)
		got <- acquired{c, err}
	}()
	var r acquired
	returned := false
	for deadline := time.Now().Add(openHold); !returned && time.Now().Before(deadline) &&
		s.p.raw.Stat().ConstructingConns() <= before; {
		select {
		case r = <-got:
			returned = true
		case <-time.After(50 * time.Microsecond):
		}
	}
	for _, c := range held {
		c.Release()
	}
	if !returned {
		r = <-got
	}
	if r.err != nil {
		if ctx.Err() != nil {
			return nil // stopped
		}
		return s.p.check(bctx, r.err)
	}
	r.c.Release()
	s.opened.Add(1)
	return nil
}

// idleWait bounds how long a call waits for an idle connection
// (awaitIdle), and idleLook is how often it looks meanwhile.
const (
	idleWait = 20 * time.Millisecond
	idleLook = 250 * time.Microsecond
)

// awaitIdle waits, while a keeper runs, until the pool has a connection
// idle, up to idleWait or ctx's end, when it has none idle and room to
// open one (at MaxConns the pool's acquisition waits for one handed back
// itself). It returns at once in the usual case, a connection idle.
// O(1) a look (the pool's Stat).
func (p *pool) awaitIdle(ctx context.Context) {
	if !p.keeping.Load() {
		return
	}
	st := p.raw.Stat()
	if st.IdleConns() > 0 || st.TotalConns() >= st.MaxConns() {
		return
	}
	t := time.NewTimer(idleLook)
	defer t.Stop()
	for deadline := time.Now().Add(idleWait); time.Now().Before(deadline); {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if p.raw.Stat().IdleConns() > 0 {
			return
		}
		t.Reset(idleLook)
	}
}

// openHold bounds how long open holds the pool's idle connections.
const openHold = 5 * time.Millisecond
