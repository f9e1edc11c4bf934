package cluster

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hourglass-go/hourglass/internal/retry"
)

// ownConn is a connection of its own, outside the pool, for one goroutine
// at a time that runs one large statement often: a lane of the flusher
// (flush.go, flushLanes). PostgreSQL
// parses a prepared statement and builds its generic plan once per
// connection, and loads the catalog entries of the tables it touches at
// its first execution there. For the flush statement (a dozen CTEs over
// eight tables) that first run costs many times a warm one
// (docs/results/2026-12-07-cluster-flush-tail.md). Through the pool, the
// flush would land on whichever connection is idle, now and then a cold
// one, which sets the flush's tail latency; and
// every invalidation of the plan (an autoanalyze of hourglass_tasks)
// costs a plan again on every pool connection the flush next runs on. On
// a connection of its own, readied by warm before the first timer is due
// (timers.warm: the caches filled, the statement prepared), it is planned
// once, at the first flush, and again only after an invalidation, once.
//
// The connection is opened when asked for (open, or a statement while
// there is none), each statement and the opening bounded by the pool's
// deadline (pool.bound); it is closed after a failure that may have left
// it unusable (anything but an error the server reported), at the pool's
// MaxConnLifetime, and by close. warm runs on every new connection before
// its first statement, so that a reconnection is warmed too. A statement
// for which no connection can be opened runs through the pool.
//
// ownConn is not safe for concurrent use: one goroutine at a time (the
// flusher's loop while its lane is idle, the lane's flush while it runs;
// Open's flush of overdue timers before the flusher starts).
// Each method is O(1) apart from the database's work.
type ownConn struct {
	p    *pool
	warm func(ctx context.Context, conn *pgx.Conn) error
	// cfg is the pool's connections' configuration and life the pool's
	// MaxConnLifetime (0: none), read at the first open.
	cfg  *pgx.ConnConfig
	life time.Duration

	conn   *pgx.Conn // nil: none open
	opened time.Time
	// planned: a flush statement has run on conn, or its planning was
	// tried (plan.go); false for a connection just opened (cold).
	planned bool
	// After a failure to open one, none is tried before retryAt, a
	// back-off (jittered, up to retry.DefaultMax) from the failure: a
	// server refusing connections is not asked at every statement.
	backoff retry.Backoff
	retryAt time.Time
}

// errOpenLater is open's answer while its back-off runs.
var errOpenLater = errors.New("hourglass: no connection of its own until the back-off ends")

// newOwnConn returns an ownConn on p's database, configured as p's
// connections are, that runs warm on each connection it opens. It opens
// none yet.
func newOwnConn(p *pool, warm func(ctx context.Context, conn *pgx.Conn) error) *ownConn {
	return &ownConn{p: p, warm: warm, backoff: retry.Backoff{Base: retry.DefaultBase, Max: retry.DefaultMax}}
}

// open returns the connection, opening and warming one first if none is
// open, if it was lost, or if it has lived out the pool's
// MaxConnLifetime; errOpenLater while the back-off of a failure to open
// one runs.
func (c *ownConn) open(ctx context.Context) (*pgx.Conn, error) {
	if c.conn != nil && (c.conn.IsClosed() || c.old()) {
		c.close()
	}
	if c.conn != nil {
		return c.conn, nil
	}
	if time.Now().Before(c.retryAt) {
		return nil, errOpenLater
	}
	conn, err := c.connect(ctx)
	if err != nil {
		c.retryAt = time.Now().Add(c.backoff.Next())
		return nil, err
	}
	c.backoff.Reset()
	c.conn, c.opened, c.planned = conn, time.Now(), false
	return conn, nil
}

// cold reports whether a connection is open on which no flush statement
// has run yet, nor its planning been tried (plan.go).
func (c *ownConn) cold() bool { return c.conn != nil && !c.planned }

// connect opens and warms a connection, within the pool's deadline.
func (c *ownConn) connect(ctx context.Context) (*pgx.Conn, error) {
	if c.cfg == nil {
		cfg := c.p.Config()
		c.cfg, c.life = cfg.ConnConfig, cfg.MaxConnLifetime
	}
	bctx, cancel := c.p.bound(ctx)
	defer cancel()
	conn, err := pgx.ConnectConfig(bctx, c.cfg)
	if err != nil {
		return nil, c.p.check(bctx, err)
	}
	// The connection's backend, which its first leasing call (the first
	// flush that hands tasks over) would read otherwise (backendOf): a
	// cold read of pg_stat_activity, about 5 ms on a server just started.
	if _, err := backendOf(bctx, conn, conn.PgConn()); err != nil {
		conn.Close(context.Background())
		return nil, c.p.check(bctx, err)
	}
	// The warm-up last, so that pg_stat_activity shows a flusher's
	// connection by its statement.
	if c.warm != nil {
		if err := c.warm(bctx, conn); err != nil {
			conn.Close(context.Background())
			return nil, c.p.check(bctx, err)
		}
	}
	return conn, nil
}

// old reports whether the connection has lived out the pool's
// MaxConnLifetime (none: never), so that it follows the pool's
// connections to a new server address or through a proxy's rotation.
func (c *ownConn) old() bool {
	return c.life > 0 && time.Since(c.opened) > c.life
}

// Query runs sql on the connection (opened first if need be) within the
// pool's deadline, which bounds the reading of the rows too; closing
// them (or reading them to the end) releases it. After an error that is
// not the server's answer to the statement, the connection is closed:
// it may be broken or still busy, and the next statement opens another.
// When no connection can be opened (the server at max_connections, say,
// while the pool still holds its own), the statement runs through the
// pool, as it would without ownConn: cold perhaps, but run.
func (c *ownConn) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	conn, err := c.open(ctx)
	if err != nil {
		return c.p.Query(ctx, sql, args...)
	}
	bctx, cancel := c.p.bound(ctx)
	rows, err := conn.Query(bctx, sql, args...)
	if err != nil {
		cancel()
		c.failed(err)
		return nil, c.p.check(bctx, err)
	}
	return &ownRows{boundRows: boundRows{Rows: rows, ctx: bctx, cancel: cancel, p: c.p}, c: c}, nil
}

// failed closes the connection after err unless err is the server's
// answer to a statement (a *pgconn.PgError), after which the connection
// is idle and fine.
func (c *ownConn) failed(err error) {
	var pgErr *pgconn.PgError
	if c.conn != nil && (!errors.As(err, &pgErr) || c.conn.IsClosed()) {
		c.close()
	}
}

// close closes the connection, if one is open. It waits at most a
// moment for the server to hear of it.
func (c *ownConn) close() {
	if c.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c.conn.Close(ctx)
	c.conn = nil
}

// ownRows are the rows of ownConn.Query: bounded rows that close the
// connection when reading them failed (see ownConn.failed).
type ownRows struct {
	boundRows
	c *ownConn
}

func (r *ownRows) Next() bool {
	if r.boundRows.Next() {
		return true
	}
	if err := r.Rows.Err(); err != nil {
		r.c.failed(err)
	}
	return false
}

func (r *ownRows) Close() {
	r.boundRows.Close()
	if err := r.Rows.Err(); err != nil {
		r.c.failed(err)
	}
}

// LeaseQuery is Query for a leasing statement (see leaseQuery in
// giveback.go): the call's token goes as the last parameter, the backend
// that runs it is recorded in call, and a call whose outcome is unknown
// goes to call.g once it is over. A failure that closes the connection
// leaves call.open false, so that the give-back ends the backend first.
// When no connection can be opened, the statement runs through the
// pool's leaseQuery.
func (c *ownConn) LeaseQuery(ctx context.Context, call *leaseCall, sql string, args ...any) (pgx.Rows, error) {
	conn, err := c.open(ctx)
	if err != nil {
		return c.p.leaseQuery(ctx, call, sql, args...)
	}
	bctx, cancel := c.p.bound(ctx)
	b, err := backendOf(bctx, conn, conn.PgConn())
	if err != nil {
		// Nothing was leased: the statement was not sent.
		cancel()
		c.failed(err)
		return nil, c.p.check(bctx, err)
	}
	call.pid, call.start = b.pid, b.start
	c.planned = true // planned by this run if not before
	rows, err := conn.Query(bctx, sql, append(args, call.tok)...)
	r := &ownLeaseRows{ownRows: ownRows{boundRows: boundRows{Rows: rows, ctx: bctx, cancel: cancel, p: c.p}, c: c}, call: call}
	if err != nil {
		r.fail(err)
		c.failed(err)
		r.end()
		cancel()
		return nil, c.p.check(bctx, err)
	}
	return r, nil
}

// ownLeaseRows are the rows of ownConn.LeaseQuery.
type ownLeaseRows struct {
	ownRows
	call  *leaseCall
	ended bool
}

// fail records err, an error of the call.
func (r *ownLeaseRows) fail(err error) {
	if unknownOutcome(err) {
		r.call.lost = true
	}
}

// end records whether the connection is still open once the call is
// over and hands a lost call to be given back. Idempotent.
func (r *ownLeaseRows) end() {
	if r.ended {
		return
	}
	r.ended = true
	r.call.open = r.c.conn != nil && !r.c.conn.IsClosed()
	if r.call.lost && r.call.g != nil {
		r.call.g.add(r.call)
	}
}

func (r *ownLeaseRows) Next() bool {
	if r.ownRows.Next() {
		return true
	}
	r.fail(r.Rows.Err())
	r.end()
	return false
}

func (r *ownLeaseRows) Scan(dest ...any) error {
	err := r.Rows.Scan(dest...)
	r.fail(err)
	return r.p.check(r.ctx, err)
}

func (r *ownLeaseRows) Close() {
	r.ownRows.Close()
	r.fail(r.Rows.Err())
	r.end()
}
