package bench

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hourglass-go/hourglass/client"
	"github.com/hourglass-go/hourglass/internal/pgtest"
)

// The history scenario's server and load: one `hourglass serve` with
// --history, on the embedded store or as one node of a cluster on a
// PostgreSQL the bench starts; putters that keep a steady rate; one
// worker (workerPool) that reserves and acks; and a sampler.

// Shape of the history scenario's load.
const (
	// historyTick is the putters' pace: each tick's tasks go as one
	// batch, rate × historyTick tasks (100 at 5k/s).
	historyTick = 20 * time.Millisecond
	// historyPutters put batches at once, so that one slow answer does
	// not hold the rate back.
	historyPutters = 4
	// historyQueue is the queue the load runs on.
	historyQueue = "bench-history"
	// historyLag is how far behind their schedule the putters may fall
	// before they drop what they missed.
	historyLag = time.Second
	// historyMinBacklog is the least backlog (tasks put and not acked)
	// the putters wait at.
	historyMinBacklog = 1000
)

// historyServer is the server of one run, a client of it, and what
// samples the store's size. close stops it and removes what it stored.
type historyServer struct {
	proc   *serveProcess
	client *client.Client
	calls  callCounts
	dir    string         // the embedded store's data directory; "" on a cluster
	db     *pgxpool.Pool  // the cluster's database; nil on the embedded store
	pg     *pgtest.Server // nil on the embedded store
	close  func()
}

// startHistoryServer starts `hourglass serve --history retention`: with
// nodes = 0 on the embedded store in a temporary directory, otherwise as
// one node of a cluster on a database of a PostgreSQL server it starts.
// A missing PostgreSQL is a note, not an error.
func startHistoryServer(bin string, nodes int, retention time.Duration) (_ *historyServer, note string, err error) {
	s := &historyServer{}
	var cleanup []func()
	s.close = func() {
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
	}
	defer func() {
		if err != nil || note != "" {
			s.close()
		}
	}()
	if nodes == 0 {
		dir, err := os.MkdirTemp("", "hourglass-bench-history-")
		if err != nil {
			return nil, "", err
		}
		cleanup = append(cleanup, func() { os.RemoveAll(dir) })
		s.dir = filepath.Join(dir, "data")
		s.proc = newServeProcess(bin, s.dir)
	} else {
		pg, err := pgtest.Launch(pgtest.Set("max_connections", "400"))
		if errors.Is(err, pgtest.ErrNoBinaries) {
			return nil, "skipped: " + err.Error(), nil
		}
		if err != nil {
			return nil, "", err
		}
		s.pg = pg
		cleanup = append(cleanup, pg.Close)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		url, err := pg.NewDatabase(ctx)
		if err != nil {
			return nil, "", err
		}
		if s.db, err = pgxpool.New(ctx, url); err != nil {
			return nil, "", err
		}
		cleanup = append(cleanup, s.db.Close)
		s.proc = newNodeProcess(bin, url, "bench-history-1")
	}
	s.proc.store = append(s.proc.store, "--history", retention.String())
	cleanup = append(cleanup, s.proc.stop)
	if _, err := s.proc.start(); err != nil {
		return nil, "", err
	}
	hc := &http.Client{Transport: countingTransport{next: s.proc.hc.Transport, counts: &s.calls}}
	if s.client, err = client.New("http://"+s.proc.addr, client.Options{HTTPClient: hc}); err != nil {
		return nil, "", err
	}
	return s, "", nil
}

// size returns the store's size in bytes: the sum of the lengths of the
// files in the data directory, or the total relation size (indexes and
// TOAST included) of every hourglass_ table with each one's.
func (s *historyServer) size() (int64, map[string]int64, error) {
	if s.db == nil {
		n, err := filesLength(s.dir)
		return n, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := s.db.Query(ctx, `SELECT c.relname::text, pg_total_relation_size(c.oid)
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind IN ('r', 'p') AND c.relname LIKE 'hourglass\_%' AND n.nspname = current_schema()`)
	if err != nil {
		return 0, nil, err
	}
	defer rows.Close()
	tables := map[string]int64{}
	var total int64
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			return 0, nil, err
		}
		tables[name] = n
		total += n
	}
	return total, tables, rows.Err()
}

// rows describes, on a cluster, what PostgreSQL says of the tables that
// churn: live and dead rows and autovacuums of hourglass_tasks,
// hourglass_history and hourglass_attempts (pg_stat_user_tables, which
// lags by a moment), and the age of the oldest history row, which stays
// near the retention while the pruning keeps up. "" on the embedded
// store.
func (s *historyServer) rows() (string, error) {
	if s.db == nil {
		return "", nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := s.db.Query(ctx, `SELECT relname::text, n_live_tup, n_dead_tup, autovacuum_count FROM pg_stat_user_tables
		WHERE relname IN ('hourglass_tasks', 'hourglass_history', 'hourglass_attempts') ORDER BY relname`)
	if err != nil {
		return "", err
	}
	var parts []string
	for rows.Next() {
		var name string
		var live, dead, vacuums int64
		if err := rows.Scan(&name, &live, &dead, &vacuums); err != nil {
			rows.Close()
			return "", err
		}
		parts = append(parts, fmt.Sprintf("%s %d live %d dead %d autovacuums", strings.TrimPrefix(name, "hourglass_"), live, dead, vacuums))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return "", err
	}
	var oldest float64
	if err := s.db.QueryRow(ctx, `SELECT coalesce((hourglass_now() - min(finished)) / 1e9, 0)::float8 FROM hourglass_history`).Scan(&oldest); err != nil {
		return "", err
	}
	parts = append(parts, fmt.Sprintf("oldest history row %.0f s", oldest))
	return strings.Join(parts, "; "), nil
}

// filesLength returns the sum of the lengths of the files under dir.
func filesLength(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // a file Pebble removed while we walked
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		total += info.Size()
		return nil
	})
	return total, err
}

// historyPuts puts tasks into historyQueue at rate per second, a batch
// per historyTick, from historyPutters goroutines, until stop. A putter
// behind its schedule puts at once, but never more than historyLag
// behind: what a slow stretch of the machine missed is dropped, not made
// up in a burst (which ran at twice the rate asked once a loaded machine
// quietened). None puts while more than a second's worth of
// tasks (rate, at least historyMinBacklog) are put and not yet acked:
// a machine that cannot reserve and ack at rate would otherwise grow the
// store with ready tasks, which is not what the scenario measures. The
// rates then say what the machine sustained. put counts the tasks put.
type historyPuts struct {
	put    atomic.Int64
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	err    error // the first put that failed
}

// startHistoryPuts starts the putters on p; acked says how many tasks
// have been acked so far.
func startHistoryPuts(p *serveProcess, rate int, acked func() int64) *historyPuts {
	ctx, cancel := context.WithCancel(context.Background())
	h := &historyPuts{cancel: cancel}
	per := max(1, int(float64(rate)*historyTick.Seconds()))
	tick := time.Duration(float64(per) / float64(rate) * float64(time.Second))
	bodies := workerBodyset()
	body := serveBatchJSON(bodies.tasks[:per])
	begin := time.Now()
	var next atomic.Int64
	for range historyPutters {
		h.wg.Go(func() {
			for {
				// At most historyLag behind: what a slower stretch missed
				// is dropped, not made up in a burst.
				late := int64((time.Since(begin) - historyLag) / tick)
				for cur := next.Load(); cur < late && !next.CompareAndSwap(cur, late); cur = next.Load() {
				}
				i := next.Add(1) - 1
				if d := time.Until(begin.Add(time.Duration(i) * tick)); d > 0 {
					select {
					case <-ctx.Done():
						return
					case <-time.After(d):
					}
				}
				for h.put.Load()-acked() > int64(max(rate, historyMinBacklog)) {
					select {
					case <-ctx.Done():
						return
					case <-time.After(historyTick):
					}
				}
				if ctx.Err() != nil {
					return
				}
				if err := p.putBatch(ctx, historyQueue, body); err != nil {
					if ctx.Err() == nil {
						h.mu.Lock()
						if h.err == nil {
							h.err = err
						}
						h.mu.Unlock()
						cancel()
					}
					return
				}
				h.put.Add(int64(per))
			}
		})
	}
	return h
}

// failed returns the first put that failed, if any.
func (h *historyPuts) failed() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// stop stops the putters and waits for them.
func (h *historyPuts) stop() {
	h.cancel()
	h.wg.Wait()
}

// historyRun is one row: a server on the engine (nodes = 0 embedded,
// else one cluster node) loaded as o says, sampled every o.Sample.
func historyRun(bin string, nodes int, o HistoryOptions) (Result, error) {
	s, note, err := startHistoryServer(bin, nodes, o.Retention)
	if err != nil || note != "" {
		return Result{Note: note}, err
	}
	defer s.close()
	engine, header := "embedded", historyHeader
	if nodes > 0 {
		engine, header = "cluster", historyTablesHeader
	}
	fmt.Fprintf(HistorySeries, "\nhistory scenario, %s: %d tasks/s for %v, --history %v, a sample every %v\n\n%s\n", engine, o.Rate, o.For, o.Retention, o.Sample, header)

	begin := time.Now()
	work := startWorkers([]*client.Client{s.client}, historyQueue, 0, func(context.Context) error { return nil })
	puts := startHistoryPuts(s.proc, o.Rate, work.handled.Load)
	var series []historySample
	var prev historySample
	sample := func() error {
		// acked first: a task is put, then acked
		x := historySample{at: time.Since(begin), acked: work.handled.Load(), rss: -1}
		x.put = puts.put.Load()
		size, tables, err := s.size()
		if err != nil {
			return fmt.Errorf("bench: history: the store's size: %w", err)
		}
		x.size, x.tables = size, historyTables(tables)
		state, err := s.rows()
		if err != nil {
			return fmt.Errorf("bench: history: the tables' rows: %w", err)
		}
		if state != "" {
			x.tables += "; " + state
		}
		if rss, err := s.proc.rss(); err == nil {
			x.rss = rss
		}
		if dt := (x.at - prev.at).Seconds(); dt > 0 {
			x.putRate, x.acks = float64(x.put-prev.put)/dt, float64(x.acked-prev.acked)/dt
		}
		historyKept(&x, series, o.Retention)
		prev = x
		series = append(series, x)
		fmt.Fprintln(HistorySeries, historyRow(engine, x))
		return nil
	}
	t := time.NewTicker(o.Sample)
	defer t.Stop()
	samples := max(1, int((o.For+o.Sample-1)/o.Sample))
	for err == nil && len(series) < samples {
		select {
		case <-t.C:
			err = sample()
		case err = <-work.failed:
		}
		if err == nil {
			if err = puts.failed(); err == nil {
				err = s.proc.alive()
			}
		}
	}
	puts.stop()
	if stopErr := work.stop(); err == nil {
		err = stopErr
	}
	if err != nil {
		return Result{}, s.proc.withState(err)
	}
	var r Result
	historyVerdict(&r, series, o.Retention, o.Sample)
	return r, nil
}
