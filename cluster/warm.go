package cluster

import (
	"context"
	"errors"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hourglass-go/hourglass/internal/retry"
)

// Warming the pool's connections (issue 40: the light load's first round
// on nodes just started).
//
// A PostgreSQL server process parses a statement, builds its plan and
// loads the catalog entries of the tables, indexes, types and operators
// it touches at the statement's first run there: 4-28 ms for the node's
// larger statements against under a millisecond warm
// (docs/results/2026-12-07-cluster-flush-tail.md). A pool opens its
// connections as requests need them, so on a node just started these
// costs fell on its first deliveries, and on its first reserve and ack
// after each new connection. warmConn readies a connection before its
// first use, for each of hotStatements:
//
//  1. it prepares the statement under a name of its own (warmName),
//     which parses it and loads the catalog entries of what it names;
//  2. it runs EXPLAIN EXECUTE on it: the planner builds the generic plan
//     (the pool's plan_cache_mode, ConfigurePool) and so loads the
//     entries of the indexes, statistics and operators the plan needs,
//     without running the statement: no row is read, locked or written,
//     and the tables are locked only ACCESS SHARE, for the planning;
//  3. it drops that statement, plan and all, and prepares the statement
//     again under pgx's name for it (its SQL), so that its first run on
//     the connection sends neither a Parse nor a Describe.
//
// The plan is thrown away because PostgreSQL builds a generic plan from
// the tables' sizes and statistics at that moment and keeps it until an
// invalidation (an ANALYZE of a table it reads): one built on a node's
// start over tables still empty is seq scans and nested loops that read
// whole tables once they fill (see timers.warm in flush.go, where such a
// plan made each flush take seconds). The statement's first run plans it
// over the tables as they are then, with the caches warm.
//
// Where it runs: ConfigurePool makes warmConn the pool's AfterConnect,
// so that every connection the pool opens is warmed before it is handed
// out, those it opens later too (after a database cut, or as it grows),
// within the connection's connect timeout. A connection opened before
// the schema is at this binary's version (a node's first start, before
// [Open] migrates it) is not warmed there: [Open] warms the pool once it
// has migrated (Node.warmPool), and says nothing of being ready before
// that or before warmBound. A warm-up that fails leaves the connection
// as it was, usable and cold, unless the failure closed it; the failures
// are logged about once a second with a count.

// hotStatements are the statements a node runs on its pool's connections
// for every task of a light load: the put (sqlInsert, and sqlUndoDeduped
// in its batch), the reserve (sqlReserve, sqlReserveFair for queues with
// keys, each also run by a woken long-poll), the ack (sqlAck), the
// settling of a release, a failure or a bury (sqlSettle), the
// notifications that wake the other nodes' long-polls (sqlNotify) and
// the lease renewal (sqlRenew); and, on one node a second, the look at
// the tasks' dead tuples (sqlVacuumDue), whose view costs 14-63 ms to
// plan on a cold process, on a core the deliveries share. The flush runs
// on a connection of its own, warmed by timers.warm. A statement not
// listed runs cold once per connection, as it did before.
var hotStatements = []string{
	sqlInsert, sqlUndoDeduped,
	sqlReserve, sqlReserveFair,
	sqlAck, sqlSettle,
	sqlNotify, sqlNextIDs, sqlRenew,
	sqlVacuumDue,
}

// warmName is the name a statement is prepared under for its EXPLAIN.
const warmName = "hourglass_warm"

// warmedKey is the key, in a connection's CustomData, that says it is
// warm.
const warmedKey = "hourglass.warmed"

// warmBound bounds the warm-up of the pool in Open (Node.warmPool),
// within the database timeout: a node says it is ready after it at the
// latest.
const warmBound = 2 * time.Second

// warmStatementTimeout bounds each statement of a warm-up on the server
// (statement_timeout): they take from under a millisecond to about ten
// on a server just started, over a hundred on a saturated machine.
const warmStatementTimeout = 500 * time.Millisecond

// errSchemaBehind is warmConn's answer on a database whose schema is not
// at this binary's version yet: the statements would not prepare.
var errSchemaBehind = errors.New("hourglass: schema not migrated yet; connection not warmed")

// newestSchema is the schema version this binary migrates to.
var newestSchema = sync.OnceValue(func() int { return len(Migrations()) })

// warmed reports whether conn has been warmed. O(1).
func warmed(conn *pgx.Conn) bool {
	_, ok := conn.PgConn().CustomData()[warmedKey]
	return ok
}

// warmConn readies conn for hotStatements (see above), unless it is warm
// already; errSchemaBehind where the schema is older than this binary's.
// It sends 3 query strings and a prepare per hot statement, and 3 more,
// one at a time, all but 2 in one transaction, each bounded by warmStatementTimeout on the
// server and all by ctx, which the caller bounds; past ctx's end the
// connection is closed. conn is used by the caller's goroutine alone,
// as any pgx.Conn.
func warmConn(ctx context.Context, conn *pgx.Conn) error {
	if warmed(conn) {
		return nil
	}
	// Whether the schema is there first, so that a database not yet
	// migrated logs no error for each connection.
	var exists bool
	err := conn.QueryRow(ctx, "SELECT to_regclass('hourglass_migrations') IS NOT NULL",
		pgx.QueryExecModeSimpleProtocol).Scan(&exists)
	version := 0
	if err == nil && exists {
		err = conn.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM hourglass_migrations",
			pgx.QueryExecModeSimpleProtocol).Scan(&version)
	}
	if err != nil {
		return err
	}
	if version < newestSchema() {
		return errSchemaBehind
	}
	// One transaction, so that SET LOCAL bounds each statement on the
	// server: one kept waiting (a lock another session holds on a table,
	// ACCESS EXCLUSIVE for a migration) fails with the server's error
	// and leaves the connection usable, where the end of ctx would close
	// it. Prepared statements outlive the transaction, even a rollback.
	pc := conn.PgConn()
	if _, err := pc.Exec(ctx, "BEGIN; SET LOCAL statement_timeout = "+
		strconv.FormatInt(warmStatementTimeout.Milliseconds(), 10)).ReadAll(); err != nil {
		return err
	}
	err = warmStatements(ctx, conn)
	end := "COMMIT"
	if err != nil {
		end = "ROLLBACK"
	}
	if _, eerr := pc.Exec(ctx, end).ReadAll(); err == nil {
		err = eerr
	}
	if pc.TxStatus() != 'I' {
		// Not out of the transaction (ctx ended first): the connection
		// cannot be handed out as it is.
		conn.Close(ctx)
		if err == nil {
			err = errors.New("hourglass: warm-up left its transaction open")
		}
		return err
	}
	if err != nil {
		return err
	}
	pc.CustomData()[warmedKey] = true
	return nil
}

// warmStatements prepares and plans each of hotStatements on conn (see
// warmConn), after the connection's backend, which a leasing call reads
// first (giveback.go): read here, it is not read at the first reserve.
// The plans are made in one round trip (planAll), then each statement is
// prepared for pgx (one round trip each): every round trip is a wait for
// the server's process and then for this one's goroutine, long on busy
// cores, and the caller that had the pool open the connection waits for
// all of them.
func warmStatements(ctx context.Context, conn *pgx.Conn) error {
	if _, err := backendOf(ctx, conn, conn.PgConn()); err != nil {
		return err
	}
	if err := planAll(ctx, conn.PgConn(), hotStatements); err != nil {
		return err
	}
	for _, sql := range hotStatements {
		if _, err := conn.Prepare(ctx, sql, sql); err != nil {
			return err
		}
	}
	return nil
}

// planAll prepares each of sqls under a name of its own (warmName and
// its index), plans it with EXPLAIN EXECUTE (its parameters NULL: a
// generic plan does not look at them) and drops it, all in one query
// string, so one round trip: a failure of any ends the rest (and, inside
// warmConn's transaction, the transaction). O(len(sqls)) statements.
func planAll(ctx context.Context, pc *pgconn.PgConn, sqls []string) error {
	var b strings.Builder
	for i, sql := range sqls {
		name := warmName + strconv.Itoa(i)
		b.WriteString("PREPARE " + name + " AS " + sql + ";\nEXPLAIN EXECUTE " + name)
		if k := paramCount(sql); k > 0 {
			b.WriteString("(" + strings.Repeat("NULL, ", k-1) + "NULL)")
		}
		b.WriteString(";\nDEALLOCATE " + name + ";\n")
	}
	_, err := pc.Exec(ctx, b.String()).ReadAll()
	return err
}

// paramRef is a parameter's reference in a statement: $ and its number.
var paramRef = regexp.MustCompile(`\$([0-9]+)`)

// paramCount returns how many parameters sql takes: the highest $N it
// refers to (the node's statements have no $ in a literal;
// TestWarm_ParamCount checks each hot statement against the server's
// count). O(len(sql)).
func paramCount(sql string) int {
	k := 0
	for _, m := range paramRef.FindAllStringSubmatch(sql, -1) {
		if n, err := strconv.Atoi(m[1]); err == nil {
			k = max(k, n)
		}
	}
	return k
}

// warmHook returns the AfterConnect of a pool set up by ConfigurePool:
// prev (the pool's own AfterConnect, if any), then warmConn within
// timeout. A warm-up that failed is logged in failures; the connection
// is refused only when the failure closed it.
func warmHook(prev func(context.Context, *pgx.Conn) error, timeout time.Duration,
	failures *retry.FailureLog) func(context.Context, *pgx.Conn) error {
	return func(ctx context.Context, conn *pgx.Conn) error {
		if prev != nil {
			if err := prev(ctx, conn); err != nil {
				return err
			}
		}
		wctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return warmLogged(wctx, conn, failures)
	}
}

// warmLogged warms conn (warmConn) and logs a failure in failures; it
// returns an error only when the failure closed the connection.
func warmLogged(ctx context.Context, conn *pgx.Conn, failures *retry.FailureLog) error {
	err := warmConn(ctx, conn)
	switch {
	case err == nil:
		failures.OKShared()
		return nil
	case errors.Is(err, errSchemaBehind):
		return nil
	}
	failures.Failed(err)
	if conn.IsClosed() {
		return err
	}
	return nil
}

// newWarmFailures returns the failure log of the warm-ups of a pool's
// connections.
func newWarmFailures(log *slog.Logger) *retry.FailureLog {
	return retry.NewFailureLog(log, "hourglass: warming a database connection failed; it serves cold",
		"hourglass: database connections warmed again")
}

// warmPool warms the pool's first connections before Open goes on (so
// before the node says it is ready), once the schema is migrated: it
// holds the pool's idle connections and more up to its MinConns at once,
// and warms those not warm yet (opened before the migration), in
// parallel. It is bounded by warmBound (and the database timeout, if
// shorter): past it the node starts with what is warm, the rest warm
// or not as it happened. The time it took and the connections warmed
// are logged.
func (n *Node) warmPool(ctx context.Context, db *pgxpool.Pool) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, min(warmBound, n.opts.DBTimeout))
	defer cancel()
	failures := newWarmFailures(n.log)
	conns := db.AcquireAllIdle(ctx)
	for want := int(db.Config().MinConns); len(conns) < want; {
		c, err := db.Acquire(ctx)
		if err != nil {
			failures.Failed(err)
			break
		}
		conns = append(conns, c)
	}
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() { warmLogged(ctx, c.Conn(), failures) })
	}
	wg.Wait()
	warm := 0
	for _, c := range conns {
		if warmed(c.Conn()) {
			warm++
		}
		c.Release()
	}
	n.log.Info("hourglass: pool warmed", "connections", strconv.Itoa(warm)+"/"+strconv.Itoa(len(conns)),
		"took", time.Since(start).Round(time.Millisecond).String())
}
