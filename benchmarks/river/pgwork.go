package riverbench

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PostgreSQL's work, measured around a phase of a side (its insert, its
// work) from the server's own counters, read by a connection of the
// harness's own:
//
//   - statements and their rows, WAL bytes and blocks: pg_stat_statements,
//     when the server loaded it (shared_preload_libraries), for the
//     side's database only; BEGIN and COMMIT count as statements;
//   - transactions and tuples inserted, updated, deleted, returned (by
//     scans) and fetched (heap rows by index scans): pg_stat_database for
//     the side's database; HOT updates from pg_stat_user_tables;
//   - index scans and index blocks touched (hit or read, by reads and
//     writes): pg_stat_user_indexes and pg_statio_user_indexes;
//   - WAL bytes: the difference of pg_current_wal_lsn(), the whole
//     server's (the other sides' databases are dropped when they end, so
//     that their autovacuum does not run into the next side);
//   - CPU: the utime and stime of the postmaster and its children from
//     /proc, the exited children's included (the postmaster's cutime and
//     cstime), so backends, autovacuum, the WAL writer and checkpointer.
//
// PostgreSQL publishes a backend's table and database counters when it
// goes idle at most once a second, and at its exit: a phase's end is
// therefore marked by closing the side's pooled connections (pgxpool's
// Reset, or Close at the side's end) and waiting until their backends
// have left, which flushes their counters first. The harness's own
// reading statements are in the side's database too (a few per phase).

// PGWork is PostgreSQL's work over one phase of a side. A field is -1
// where the server could not say (Statements and Rows without
// pg_stat_statements, CPU without /proc).
type PGWork struct {
	Statements int64 // statements executed (pg_stat_statements calls)
	Rows       int64 // rows returned or affected (pg_stat_statements)
	Commits    int64 // transactions committed
	Inserted   int64 // tuples inserted
	Updated    int64 // tuples updated, HOT ones included
	HOTUpdated int64 // tuples updated without touching an index (heap-only)
	Deleted    int64 // tuples deleted
	Returned   int64 // tuples returned by sequential and index scans
	Fetched    int64 // heap tuples fetched by index scans
	IdxScans   int64 // index scans
	IdxBlocks  int64 // index blocks hit or read
	Blocks     int64 // shared blocks hit or read, tables and indexes
	WALBytes   int64 // WAL written by the whole server
	CPU        time.Duration
	// ByProcess is PostgreSQL's CPU by kind of process (client backend,
	// autovacuum worker, walwriter, ...) from the workers' start to their
	// stop, read before the side's connections close: the part of CPU the
	// backends spend on their work. Nil where not measured.
	ByProcess map[string]time.Duration
	// GoCPU is this process's CPU (getrusage): the side's workers, its
	// client and, for hourglass, the node and its HTTP server; not
	// PostgreSQL's, a child process.
	GoCPU time.Duration
	// Stmts holds the statements of the side's database, by total time.
	Stmts []Statement
	// Indexes holds each index touched: scans and blocks.
	Indexes []IndexWork
}

// Statement is one normalised statement's work in a phase.
type Statement struct {
	Query    string
	Calls    int64
	TimeMS   float64 // total execution time, milliseconds
	Rows     int64
	Blocks   int64 // shared blocks hit or read
	WALBytes int64
}

// IndexWork is one index's work in a phase.
type IndexWork struct {
	Table, Index string
	Scans        int64
	TupRead      int64 // index entries returned by its scans
	Blocks       int64 // blocks hit or read, for reads and writes
}

// Server is the PostgreSQL server a throughput comparison runs on.
type Server struct {
	// NewDatabase creates an empty database and returns its URL.
	NewDatabase func() string
	// URL is the server's maintenance database (postgres), where the
	// harness creates the pg_stat_statements extension and drops the
	// sides' databases. "" measures nothing.
	URL string
	// Dir is the data directory, whose postmaster.pid names the server's
	// process for the CPU figures; "" measures no CPU.
	Dir string
}

// probe reads one server's counters for one side's database.
type probe struct {
	admin *pgx.Conn // to the maintenance database
	db    *pgx.Conn // to the side's database
	name  string    // the side's database
	pid   int       // the postmaster's, 0 when unknown
	pgss  bool      // pg_stat_statements can be read
}

// counters is one reading of a probe.
type counters struct {
	self                                      time.Duration
	cpu                                       time.Duration
	lsn                                       int64
	commits, ins, upd, del, returned, fetched int64
	blocks, hot                               int64
	stmts                                     map[string]Statement
	indexes                                   map[string]IndexWork
}

// openProbe connects to srv's maintenance database and to the side's
// database at dbURL. A nil probe and no error when srv.URL is "".
func openProbe(ctx context.Context, srv Server, dbURL string) (*probe, error) {
	if srv.URL == "" {
		return nil, nil
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		return nil, err
	}
	p := &probe{name: strings.TrimPrefix(u.Path, "/")}
	if p.admin, err = pgx.Connect(ctx, srv.URL); err != nil {
		return nil, err
	}
	if p.db, err = pgx.Connect(ctx, dbURL); err != nil {
		p.admin.Close(ctx)
		return nil, err
	}
	var loaded bool
	if err := p.admin.QueryRow(ctx,
		`SELECT 'pg_stat_statements' = ANY(string_to_array(current_setting('shared_preload_libraries'), ','))`).Scan(&loaded); err != nil {
		p.close(ctx)
		return nil, err
	}
	if loaded {
		if _, err := p.admin.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
			p.close(ctx)
			return nil, err
		}
		p.pgss = true
	}
	if srv.Dir != "" {
		b, err := os.ReadFile(filepath.Join(srv.Dir, "postmaster.pid"))
		if err == nil {
			p.pid, _ = strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
		}
	}
	return p, nil
}

// close closes p's connections.
func (p *probe) close(ctx context.Context) {
	p.db.Close(ctx)
	p.admin.Close(ctx)
}

// drop closes p and drops the side's database, so that nothing of it
// (autovacuum) runs on during the next side.
func (p *probe) drop(ctx context.Context) error {
	p.db.Close(ctx)
	defer p.admin.Close(ctx)
	_, err := p.admin.Exec(ctx, "DROP DATABASE "+pgx.Identifier{p.name}.Sanitize()+" WITH (FORCE)")
	return err
}

// backends returns the process ids of the backends connected to the
// side's database, p's own excepted.
func (p *probe) backends(ctx context.Context) (map[int32]bool, error) {
	rows, err := p.admin.Query(ctx,
		`SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> $2`, p.name, p.db.PgConn().PID())
	if err != nil {
		return nil, err
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	out := make(map[int32]bool, len(pids))
	for _, pid := range pids {
		out[pid] = true
	}
	return out, err
}

// settle ends a phase: it closes the pooled connections of pools (Reset:
// the busy ones when released) or, with pools nil, expects every other
// backend of the side's database to have left, and waits, at most 10 s,
// until those backends have exited, which publishes their counters.
func (p *probe) settle(ctx context.Context, pools ...*pgxpool.Pool) error {
	// leaving is how many of before must go: the pools' connections, or
	// all of them. The pools are counted before the backends are listed:
	// a connection a pool opens in between (a node's loop needing one)
	// is then listed and not counted, and is not waited for; counted and
	// not listed, the wait would never end (a run of three nodes failed
	// so: "1 of 6 backends still connected").
	leaving := 0
	for _, pool := range pools {
		st := pool.Stat()
		leaving += int(st.IdleConns() + st.AcquiredConns())
	}
	before, err := p.backends(ctx)
	if err != nil {
		return err
	}
	if pools == nil {
		leaving = len(before)
	}
	leaving = min(leaving, len(before))
	for _, pool := range pools {
		pool.Reset()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		now, err := p.backends(ctx)
		if err != nil {
			return err
		}
		stay := 0
		for pid := range before {
			if now[pid] {
				stay++
			}
		}
		if stay <= len(before)-leaving {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("hourglass: riverbench: %d of %d backends still connected 10 s after their pool closed", stay-(len(before)-leaving), leaving)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// read takes a reading of every counter.
func (p *probe) read(ctx context.Context) (counters, error) {
	c := counters{cpu: -1, stmts: map[string]Statement{}, indexes: map[string]IndexWork{}}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		c.self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if p.pid > 0 {
		if cpu, err := processCPU(p.pid); err == nil {
			c.cpu = cpu
		}
	}
	if err := p.admin.QueryRow(ctx, `SELECT pg_current_wal_lsn() - '0/0'`).Scan(&c.lsn); err != nil {
		return c, err
	}
	if err := p.admin.QueryRow(ctx, `SELECT xact_commit, tup_inserted, tup_updated, tup_deleted, tup_returned, tup_fetched,
		blks_hit + blks_read FROM pg_stat_database WHERE datname = $1`, p.name).Scan(
		&c.commits, &c.ins, &c.upd, &c.del, &c.returned, &c.fetched, &c.blocks); err != nil {
		return c, err
	}
	if err := p.db.QueryRow(ctx, `SELECT coalesce(sum(n_tup_hot_upd), 0)::bigint FROM pg_stat_user_tables`).Scan(&c.hot); err != nil {
		return c, err
	}
	rows, err := p.db.Query(ctx, `SELECT s.relname, s.indexrelname, s.idx_scan, s.idx_tup_read, io.idx_blks_hit + io.idx_blks_read
		FROM pg_stat_user_indexes s JOIN pg_statio_user_indexes io USING (indexrelid)`)
	if err != nil {
		return c, err
	}
	var iw IndexWork
	if _, err := pgx.ForEachRow(rows, []any{&iw.Table, &iw.Index, &iw.Scans, &iw.TupRead, &iw.Blocks}, func() error {
		c.indexes[iw.Index] = iw
		return nil
	}); err != nil {
		return c, err
	}
	if !p.pgss {
		return c, nil
	}
	// The harness's own readings are left out by their text.
	rows, err = p.admin.Query(ctx, `SELECT query, calls, total_exec_time, rows, shared_blks_hit + shared_blks_read, wal_bytes::bigint
		FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = $1)
		AND query NOT LIKE '%pg\_stat\_user\_%' AND query NOT LIKE '%pg\_stat\_statements%'`, p.name)
	if err != nil {
		return c, err
	}
	var st Statement
	_, err = pgx.ForEachRow(rows, []any{&st.Query, &st.Calls, &st.TimeMS, &st.Rows, &st.Blocks, &st.WALBytes}, func() error {
		// A statement's text can appear under more than one query id
		// (the same text from different search paths): summed.
		q := strings.Join(strings.Fields(st.Query), " ")
		s := c.stmts[q]
		s.Query = q
		s.Calls += st.Calls
		s.TimeMS += st.TimeMS
		s.Rows += st.Rows
		s.Blocks += st.Blocks
		s.WALBytes += st.WALBytes
		c.stmts[q] = s
		return nil
	})
	return c, err
}

// since returns the work from the reading a to c.
func (c counters) since(a counters) PGWork {
	w := PGWork{
		Statements: -1, Rows: -1, CPU: -1,
		Commits: c.commits - a.commits, Inserted: c.ins - a.ins, Updated: c.upd - a.upd, HOTUpdated: c.hot - a.hot,
		Deleted: c.del - a.del, Returned: c.returned - a.returned, Fetched: c.fetched - a.fetched,
		Blocks: c.blocks - a.blocks, WALBytes: c.lsn - a.lsn, GoCPU: c.self - a.self,
	}
	if c.cpu >= 0 && a.cpu >= 0 {
		w.CPU = c.cpu - a.cpu
	}
	for name, ic := range c.indexes {
		ia := a.indexes[name]
		d := IndexWork{Table: ic.Table, Index: name, Scans: ic.Scans - ia.Scans, TupRead: ic.TupRead - ia.TupRead, Blocks: ic.Blocks - ia.Blocks}
		w.IdxScans += d.Scans
		w.IdxBlocks += d.Blocks
		if d.Scans != 0 || d.Blocks != 0 {
			w.Indexes = append(w.Indexes, d)
		}
	}
	slices.SortFunc(w.Indexes, func(x, y IndexWork) int { return int(y.Blocks - x.Blocks) })
	if len(c.stmts) > 0 || len(a.stmts) > 0 {
		w.Statements, w.Rows = 0, 0
	}
	for q, sc := range c.stmts {
		sa := a.stmts[q]
		d := Statement{Query: q, Calls: sc.Calls - sa.Calls, TimeMS: sc.TimeMS - sa.TimeMS, Rows: sc.Rows - sa.Rows,
			Blocks: sc.Blocks - sa.Blocks, WALBytes: sc.WALBytes - sa.WALBytes}
		if d.Calls == 0 {
			continue
		}
		w.Statements += d.Calls
		w.Rows += d.Rows
		w.Stmts = append(w.Stmts, d)
	}
	slices.SortFunc(w.Stmts, func(x, y Statement) int {
		switch {
		case x.TimeMS > y.TimeMS:
			return -1
		case x.TimeMS < y.TimeMS:
			return 1
		}
		return strings.Compare(x.Query, y.Query)
	})
	return w
}

// processCPU returns the CPU time of process pid and of its children,
// live (from their /proc/PID/stat) and exited (pid's cutime and cstime).
func processCPU(pid int) (time.Duration, error) {
	own, children, err := treeCPU(pid)
	if err != nil {
		return 0, err
	}
	for _, d := range children {
		own += d
	}
	return own, nil
}

// treeCPU returns the CPU time of process pid with that of its exited
// children (its cutime and cstime), and that of each live child by
// process id.
func treeCPU(pid int) (time.Duration, map[int]time.Duration, error) {
	self, err := procStat(pid)
	if err != nil {
		return 0, nil, err
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, nil, err
	}
	children := map[int]time.Duration{}
	for _, e := range ents {
		child, err := strconv.Atoi(e.Name())
		if err != nil || child == pid {
			continue
		}
		st, err := procStat(child)
		if err != nil || st.ppid != pid {
			continue // gone, or not the server's
		}
		children[child] = ticks(st.utime + st.stime)
	}
	return ticks(self.utime + self.stime + self.cutime + self.cstime), children, nil
}

// ticks converts /proc's clock ticks, USER_HZ (100 a second on every
// Linux build), to a duration.
func ticks(n int64) time.Duration { return time.Duration(n) * (time.Second / 100) }

// cpuByProcess is a reading of the server's CPU by process: each live
// child's with its kind, and the postmaster's own with its exited
// children's.
type cpuByProcess struct {
	ok    bool
	own   time.Duration
	pids  map[int]time.Duration
	types map[int]string
}

// exitedType names, in a breakdown, the CPU of the processes that exited
// between two readings (after the first) and the postmaster's own.
const exitedType = "exited, and the postmaster"

// serverProcesses are the kinds of the server's processes other than
// the client backends, as their titles name them.
var serverProcesses = []string{"autovacuum worker", "autovacuum launcher", "checkpointer", "background writer",
	"walwriter", "logical replication launcher", "parallel worker", "archiver", "logger", "startup", "walsender"}

// kindOf returns the kind of the server's process pid from its title
// (update_process_title, on by default): "postgres: walwriter", or
// "postgres: USER DB HOST(PORT) STATE" for a client backend.
func kindOf(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return "other"
	}
	title := strings.TrimPrefix(strings.TrimRight(string(b), "\x00"), "postgres: ")
	for _, k := range serverProcesses {
		if strings.HasPrefix(title, k) {
			return k
		}
	}
	return "client backend"
}

// readByProcess takes a reading of the server's CPU by process; one with
// ok false where /proc cannot be read.
func (p *probe) readByProcess(context.Context) (cpuByProcess, error) {
	var r cpuByProcess
	if p.pid <= 0 {
		return r, nil
	}
	own, children, err := treeCPU(p.pid)
	if err != nil {
		return r, nil
	}
	r.ok, r.own, r.pids, r.types = true, own, children, map[int]string{}
	for pid := range children {
		r.types[pid] = kindOf(pid)
	}
	return r, nil
}

// since returns the CPU from reading a to r by kind of process; nil when
// either reading lacks /proc.
func (r cpuByProcess) since(a cpuByProcess) map[string]time.Duration {
	if !r.ok || !a.ok {
		return nil
	}
	out := map[string]time.Duration{}
	for pid, d := range r.pids {
		out[r.types[pid]] += d - a.pids[pid]
	}
	// A child that exited since a adds all its time to the postmaster's
	// cutime: only what it spent after a is this interval's.
	exited := r.own - a.own
	for pid, d := range a.pids {
		if _, live := r.pids[pid]; !live {
			exited -= d
		}
	}
	out[exitedType] += exited
	return out
}

// stat holds the fields of /proc/PID/stat that processCPU needs.
type stat struct {
	ppid                         int
	utime, stime, cutime, cstime int64
}

// procStat reads /proc/pid/stat.
func procStat(pid int) (stat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return stat{}, err
	}
	// The command name, in parentheses, may hold spaces: the fields
	// start after its last ')'. They are then state, ppid, and utime,
	// stime, cutime, cstime as the 12th to 15th (proc(5)'s 14 to 17).
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return stat{}, errors.New("hourglass: riverbench: malformed /proc stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 15 {
		return stat{}, errors.New("hourglass: riverbench: short /proc stat")
	}
	var s stat
	s.ppid, _ = strconv.Atoi(f[1])
	for k, p := range []*int64{&s.utime, &s.stime, &s.cutime, &s.cstime} {
		*p, _ = strconv.ParseInt(f[11+k], 10, 64)
	}
	return s, nil
}
