package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/hourglass-go/hourglass/cluster"
	"github.com/hourglass-go/hourglass/service"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// postgresOptions are the flags of `hourglass serve` that run the node
// as one of a cluster on a PostgreSQL database (package cluster) instead
// of on the embedded store in --data.
type postgresOptions struct {
	url   string        // --postgres; "" for the embedded store
	node  string        // --node; "" for host name and process id
	lease time.Duration // --lease
	// dbTimeout bounds each call to the database (--db-timeout), and
	// the opening of a connection unless the URL sets connect_timeout.
	dbTimeout time.Duration
}

// maxDBTimeout bounds --db-timeout: a call that may take longer holds a
// connection, and a request, for longer than any client waits.
const maxDBTimeout = 5 * time.Minute

// postgresPoolConns is the pool size when the URL does not set
// pool_max_conns: enough for 64 concurrent requests on a node to share
// without each waiting for a connection long (a statement holds one for
// a round trip), well under PostgreSQL's default max_connections of 100
// for a few nodes.
const postgresPoolConns = 24

// postgresPoolMinConns is how many connections the pool opens at start
// and keeps open when the URL does not set pool_min_conns: those a
// light load uses at once (a put, a reserve, an ack, the notifications,
// the lease loop), each warmed before the node says it is ready
// (cluster.ConfigurePool), so that its first requests find no
// connection to open nor statement to plan cold.
const postgresPoolMinConns = 6

// postgresFlags defines --postgres, --node, --lease and --db-timeout on
// fs.
func postgresFlags(fs *flag.FlagSet, o *postgresOptions) {
	fs.StringVar(&o.url, "postgres", "", "serve as a node of a cluster on this PostgreSQL database (URL or key=value DSN) instead of --data")
	fs.StringVar(&o.node, "node", "", "with --postgres: this node's name, unique among live nodes (default host name and process id)")
	fs.DurationVar(&o.lease, "lease", cluster.DefaultLease, "with --postgres: partition lease; a dead node's partitions are taken over within about one")
	fs.DurationVar(&o.dbTimeout, "db-timeout", cluster.DefaultDBTimeout, "with --postgres: the most a call to the database may take (and the opening of a connection, unless the URL sets connect_timeout); a request the database does not answer in time is answered 503")
}

// checkPostgres refuses --data with --postgres, and the cluster's flags
// without --postgres.
func checkPostgres(fs *flag.FlagSet, o postgresOptions) error {
	switch {
	case o.url != "" && flagSet(fs, "data"):
		return errors.New("--data and --postgres exclude each other: a node keeps its tasks in one store")
	case o.url != "" && flagSet(fs, "cache"):
		return errors.New("--cache is the embedded store's and does nothing with --postgres")
	case o.url == "" && (flagSet(fs, "node") || flagSet(fs, "lease") || flagSet(fs, "db-timeout")):
		return errors.New("--node, --lease and --db-timeout need --postgres")
	case o.lease < 100*time.Millisecond:
		return fmt.Errorf("invalid value %q for flag --lease: want 100ms or more", o.lease)
	case o.dbTimeout < 100*time.Millisecond || o.dbTimeout > maxDBTimeout:
		return fmt.Errorf("invalid value %q for flag --db-timeout: want 100ms to %v", o.dbTimeout, maxDBTimeout)
	}
	return nil
}

// openPostgres connects a pool to the database and joins the cluster as a
// node: what serve's recovery does for --postgres. Closing the result
// closes the node (its partitions released to the others) and then the
// pool.
func openPostgres(o serveOptions, log *slog.Logger, reg prometheus.Registerer) opened {
	start := time.Now()
	cfg, err := pgxpool.ParseConfig(o.pg.url)
	if err != nil {
		// The parse error may quote the URL, password included.
		return opened{err: errors.New("hourglass: --postgres: cannot parse the connection string")}
	}
	if !poolSizeGiven(o.pg.url) {
		cfg.MaxConns = postgresPoolConns
	}
	if !strings.Contains(o.pg.url, "pool_min_conns") {
		cfg.MinConns = min(postgresPoolMinConns, cfg.MaxConns)
	}
	if !strings.Contains(o.pg.url, "connect_timeout") {
		cfg.ConnConfig.ConnectTimeout = o.pg.dbTimeout
	}
	cluster.ConfigurePoolLogger(cfg, log)
	// Open may wait up to two leases for a previous process under the
	// same name to be declared dead.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return opened{err: fmt.Errorf("hourglass: --postgres: %w", err)}
	}
	n, err := cluster.Open(ctx, pool, cluster.Options{
		Node:       o.pg.node,
		Lease:      o.pg.lease,
		DBTimeout:  o.pg.dbTimeout,
		MaxDelay:   o.maxDelay,
		MaxPayload: o.maxPayload,
		DefaultTTR: o.defaultTTR,
		History:    engineHistory(o.history),
		Logger:     log,
		Registerer: reg,
	})
	if err != nil {
		pool.Close()
		return opened{err: err}
	}
	log.Info("ready", "node", n.Name(), "partitions", n.Partitions(), "join", time.Since(start).Round(time.Millisecond).String())
	return opened{b: service.New(n), close: func() error {
		err := n.Close()
		closePool(pool, o.pg.dbTimeout, log)
		return err
	}}
}

// closePool closes pool, waiting up to d for it. pgx gives each
// connection that broke (a statement cut short by its deadline) up to
// 15 s to say goodbye to the server, and Close waits for them: with the
// database out of reach, a shutdown would outlast serve's. Past d the
// process exits without waiting: the connections close with it.
func closePool(pool *pgxpool.Pool, d time.Duration, log *slog.Logger) {
	done := make(chan struct{})
	go func() {
		pool.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
		log.Warn("hourglass: the database's connections did not close in time; exiting without them", "waited", d.String())
	}
}

// poolSizeGiven reports whether the connection string sets
// pool_max_conns (pgxpool's own parameter, in a URL or a key=value DSN).
func poolSizeGiven(dsn string) bool { return strings.Contains(dsn, "pool_max_conns") }
