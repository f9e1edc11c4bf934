package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

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
	tag, err := p.raw.Exec(bctx, sql, args...)
	return tag, p.check(bctx, err)
}

// Query runs sql within the pool's deadline, which bounds the reading of
// the rows too; closing them (or reading them to the end) releases it.
func (p *pool) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	bctx, cancel := p.bound(ctx)
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
	return &boundRow{row: p.raw.QueryRow(bctx, sql, args...), ctx: bctx, cancel: cancel, p: p}
}

// Begin starts a transaction within the pool's deadline; each of its
// statements, its commit and its rollback has a deadline of its own.
func (p *pool) Begin(ctx context.Context) (pgx.Tx, error) {
	bctx, cancel := p.bound(ctx)
	defer cancel()
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
