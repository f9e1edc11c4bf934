package riverbench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/client"
	"github.com/hourglass-go/hourglass/cluster"
	"github.com/hourglass-go/hourglass/httpapi"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/worker"
)

// The throughput comparison: how many ready jobs a worker works per
// second on one PostgreSQL server, hourglass's Go worker (package worker)
// through one cluster node against river's worker. Each side, in turn,
// on a fresh database of the same server, in this process:
//
//   - hourglass: one node (a pool of 68 connections, as
//     internal/clusterbench sizes it) behind its HTTP API (package
//     httpapi) on a loopback port; Jobs ready tasks of a 200-byte payload
//     put by batches of 1000 from 4 clients; then worker.New(c,
//     Options{Concurrency: Workers}) with a handler that returns nil
//     (each task acked, batched through POST /v1/acks). With Nodes, that
//     many nodes, each its own pool and port, the batches put through
//     them in turn and a worker on each, Workers split between them;
//   - river: river's schema migrated, Jobs available jobs of the same
//     payload inserted by InsertManyFast (COPY FROM) in batches of 1000
//     from 4 goroutines; then a client (a pool of 68 connections) with
//     MaxWorkers Workers whose Work returns nil (river completes jobs in
//     batches too), once with river's defaults and once with
//     FetchCooldown at its least, 1 ms: river fetches at most MaxWorkers
//     jobs per fetch and at most once per FetchCooldown (100 ms by
//     default), which caps 64 workers at 640 jobs/s with its defaults.
//     With Nodes, that many clients, each its own pool (as many
//     processes would run), MaxWorkers split between them.
//
// A side works from the moment its workers start until every job is done
// or Duration has passed; jobs/s is the jobs its handlers returned from
// over that time.
//
// Around each side's insert and its work the harness reads PostgreSQL's
// counters (pgwork.go): the work of the insert is reported per job put,
// that of the work phase (from the workers' start until their
// connections are closed) per job worked, so that neither pays for the
// other. Each side's database is dropped when the side ends.

// ThroughputConfig sizes a throughput comparison. Zero fields take the
// defaults named.
type ThroughputConfig struct {
	Jobs     int           // ready jobs put before the workers start; default 100k
	Workers  int           // the hourglass worker's Concurrency, river's MaxWorkers; default 64
	Duration time.Duration // the longest a side works; default 10 s
	Rounds   int           // each side runs once per round, a different one first each round; default 1
	// Nodes is how many hourglass nodes (each a pool and an HTTP server
	// of its own, a Go worker on each) and river clients (each a pool of
	// its own) a side runs, Workers split between them; default 1.
	Nodes int
	// Analyze has each side ANALYZE its database after the insert,
	// before its workers start, as autovacuum's autoanalyze does on its
	// own about a minute after a bulk load: the workers then run on
	// plans made with the statistics of a full table.
	Analyze bool
	// CPUProfile, when not "", is a directory where the hourglass side
	// writes a CPU profile of each round's work phase
	// (hourglass-work-N.pprof), its samples labelled by role: "node"
	// (the node's HTTP server and its background work), "worker" (the
	// Go worker and its client); the runtime's own (GC, scheduler)
	// carry none.
	CPUProfile string
	// HourglassOnly runs hourglass's side alone, to measure a change of
	// hourglass in less time; a ratio to river needs every side.
	HourglassOnly bool
}

func (c *ThroughputConfig) defaults() {
	if c.Jobs <= 0 {
		c.Jobs = 100_000
	}
	if c.Workers <= 0 {
		c.Workers = 64
	}
	if c.Duration <= 0 {
		c.Duration = 10 * time.Second
	}
	if c.Rounds <= 0 {
		c.Rounds = 1
	}
	if c.Nodes <= 0 {
		c.Nodes = 1
	}
}

// Sizes of the throughput comparison's fill.
const (
	throughputBatch   = 1000 // jobs per batch put
	throughputPutters = 4    // goroutines putting batches at once
	throughputPayload = 200  // bytes of a job's payload, as JSON
	throughputQueue   = "bench_throughput"
)

// Rate holds one side's figures of one round.
type Rate struct {
	System       string
	Jobs         int
	InsertPerSec float64 // the Jobs put before the workers start
	Worked       int     // jobs whose handler returned nil
	PerSec       float64 // Worked per second of work
	// Insert and Work are PostgreSQL's work while the Jobs were put and
	// while they were worked; zero when the server was not measured.
	Insert, Work PGWork
}

// String formats r on one line.
func (r Rate) String() string {
	return fmt.Sprintf("%s: %d ready put at %.0f/s; %d worked at %.0f/s", r.System, r.Jobs, r.InsertPerSec, r.Worked, r.PerSec)
}

// ThroughputResult holds every round of every side: hourglass, river,
// river with FetchCooldown 1 ms, in that order whichever ran first.
type ThroughputResult struct {
	Config ThroughputConfig
	Rounds [][]Rate
}

// CompareThroughput runs cfg.Rounds rounds of the three sides, each on a
// database of its own that srv.NewDatabase creates on the same server,
// measuring PostgreSQL's work (pgwork.go) where srv.URL is set. log, if
// not nil, receives a line per side and round.
func CompareThroughput(ctx context.Context, srv Server, cfg ThroughputConfig, log func(string)) (ThroughputResult, error) {
	cfg.defaults()
	res := ThroughputResult{Config: cfg}
	sides := []func(url string, p *probe, round int) (Rate, error){
		func(url string, p *probe, round int) (Rate, error) {
			return hourglassThroughput(ctx, url, p, cfg, round)
		},
		func(url string, p *probe, _ int) (Rate, error) { return riverThroughput(ctx, url, p, cfg, 0) },
		func(url string, p *probe, _ int) (Rate, error) {
			return riverThroughput(ctx, url, p, cfg, river.FetchCooldownMin)
		},
	}
	if cfg.HourglassOnly {
		sides = sides[:1]
	}
	for k := range cfg.Rounds {
		// Round k starts with side k (mod 3), so that no side always
		// runs first or last; a round keeps the sides in their order.
		round := make([]Rate, len(sides))
		for j := range sides {
			i := (k + j) % len(sides)
			url := srv.NewDatabase()
			p, err := openProbe(ctx, srv, url)
			if err != nil {
				return res, fmt.Errorf("hourglass: riverbench: %w", err)
			}
			r, err := sides[i](url, p, k)
			if p != nil {
				err = errors.Join(err, p.drop(ctx))
			}
			if err != nil {
				return res, fmt.Errorf("%s: %w", r.System, err)
			}
			if log != nil {
				log(r.String())
			}
			round[i] = r
		}
		res.Rounds = append(res.Rounds, round)
	}
	return res, nil
}

// Table formats r as markdown tables of medians over the rounds: a row
// per side with its jobs/s, its ratio to hourglass's, and per worked job
// PostgreSQL's CPU, this process's CPU (Go CPU: the workers and, for
// hourglass, the node and its HTTP server too), statements and WAL bytes;
// then, when the server was measured, PostgreSQL's work per worked job
// and per job put in detail.
func (r ThroughputResult) Table() string {
	var b strings.Builder
	analyzed := ""
	if r.Config.Analyze {
		analyzed = ", tables analyzed before the work"
	}
	nodes := ""
	if r.Config.Nodes > 1 {
		nodes = fmt.Sprintf(" over %d hourglass nodes or river clients", r.Config.Nodes)
	}
	fmt.Fprintf(&b, "%d ready jobs, %d workers%s, at most %v per side%s, %d round(s), medians\n\n",
		r.Config.Jobs, r.Config.Workers, nodes, r.Config.Duration, analyzed, r.Config.Rounds)
	b.WriteString("| system | jobs/s | / hourglass | worked | insert rate (jobs/s) | PG CPU µs/job | Go CPU µs/job | PG statements/job | WAL bytes/job |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	if len(r.Rounds) == 0 {
		return b.String()
	}
	var base float64
	for i, s := range r.Rounds[0] {
		col := r.column(i)
		perSec := col(func(r Rate) float64 { return r.PerSec })
		if i == 0 {
			base = perSec
		}
		ratio := "–"
		if base > 0 {
			ratio = fmt.Sprintf("%.2f×", perSec/base)
		}
		work := func(f func(PGWork) float64) string {
			return perJob(col(func(r Rate) float64 { return perTask(f(r.Work), r.Worked) }))
		}
		fmt.Fprintf(&b, "| %s | %.0f | %s | %.0f | %.0f | %s | %s | %s | %s |\n", s.System, perSec, ratio,
			col(func(r Rate) float64 { return float64(r.Worked) }), col(func(r Rate) float64 { return r.InsertPerSec }),
			work(cpuMicros), work(func(w PGWork) float64 { return float64(w.GoCPU) / float64(time.Microsecond) }),
			work(func(w PGWork) float64 { return float64(w.Statements) }),
			work(func(w PGWork) float64 { return float64(w.WALBytes) }))
	}
	if r.Rounds[0][0].Work.Commits == 0 && r.Rounds[0][0].Insert.Commits == 0 {
		return b.String()
	}
	for _, phase := range []struct {
		title string
		of    func(Rate) (PGWork, int)
	}{
		{"PostgreSQL's work per worked job (work phase)", func(r Rate) (PGWork, int) { return r.Work, r.Worked }},
		{"PostgreSQL's work per job put (insert phase)", func(r Rate) (PGWork, int) { return r.Insert, r.Jobs }},
	} {
		fmt.Fprintf(&b, "\n%s, medians\n\n", phase.title)
		b.WriteString("| system | CPU µs | statements | commits | rows | tup ins | tup upd | of which HOT | tup del | tup returned | tup fetched | idx scans | idx blocks | blocks | WAL bytes |\n")
		b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for i, s := range r.Rounds[0] {
			col := r.column(i)
			cell := func(f func(PGWork) float64) string {
				return perJob(col(func(r Rate) float64 { w, n := phase.of(r); return perTask(f(w), n) }))
			}
			fmt.Fprintf(&b, "| %s |", s.System)
			for _, f := range []func(PGWork) float64{
				cpuMicros,
				func(w PGWork) float64 { return float64(w.Statements) },
				func(w PGWork) float64 { return float64(w.Commits) },
				func(w PGWork) float64 { return float64(w.Rows) },
				func(w PGWork) float64 { return float64(w.Inserted) },
				func(w PGWork) float64 { return float64(w.Updated) },
				func(w PGWork) float64 { return float64(w.HOTUpdated) },
				func(w PGWork) float64 { return float64(w.Deleted) },
				func(w PGWork) float64 { return float64(w.Returned) },
				func(w PGWork) float64 { return float64(w.Fetched) },
				func(w PGWork) float64 { return float64(w.IdxScans) },
				func(w PGWork) float64 { return float64(w.IdxBlocks) },
				func(w PGWork) float64 { return float64(w.Blocks) },
				func(w PGWork) float64 { return float64(w.WALBytes) },
			} {
				fmt.Fprintf(&b, " %s |", cell(f))
			}
			b.WriteString("\n")
		}
	}
	b.WriteString(r.byProcess())
	return b.String()
}

// byProcess formats PostgreSQL's CPU per worked job by kind of process, from
// the workers' start to their stop, summed over the rounds, for the types
// that used any: "" where it was not measured.
func (r ThroughputResult) byProcess() string {
	types := map[string]bool{}
	for _, round := range r.Rounds {
		for _, s := range round {
			for t, d := range s.Work.ByProcess {
				types[t] = types[t] || d != 0
			}
		}
	}
	if len(types) == 0 {
		return ""
	}
	var cols []string
	for _, t := range slices.Sorted(maps.Keys(types)) {
		if types[t] {
			cols = append(cols, t) // the types that used the CPU
		}
	}
	var b strings.Builder
	b.WriteString("\nPostgreSQL's CPU per worked job (µs) by process, from the workers' start to their stop, over all rounds\n\n| system |")
	for _, c := range cols {
		fmt.Fprintf(&b, " %s |", c)
	}
	b.WriteString(" all |\n|---|" + strings.Repeat("---|", len(cols)+1) + "\n")
	for i, s := range r.Rounds[0] {
		worked := 0
		sum := map[string]time.Duration{}
		var all time.Duration
		for _, round := range r.Rounds {
			worked += round[i].Worked
			for t, d := range round[i].Work.ByProcess {
				sum[t] += d
				all += d
			}
		}
		fmt.Fprintf(&b, "| %s |", s.System)
		for _, c := range append(cols, "") {
			d := sum[c]
			if c == "" {
				d = all
			}
			fmt.Fprintf(&b, " %s |", perJob(perTask(float64(d)/float64(time.Microsecond), worked)))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// column returns a function that gives the median of f over the rounds of
// side i.
func (r ThroughputResult) column(i int) func(f func(Rate) float64) float64 {
	return func(f func(Rate) float64) float64 {
		v := make([]float64, len(r.Rounds))
		for k, round := range r.Rounds {
			v[k] = f(round[i])
		}
		slices.Sort(v)
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
}

// cpuMicros is w's CPU in microseconds, -1 when unknown.
func cpuMicros(w PGWork) float64 {
	if w.CPU < 0 {
		return -1
	}
	return float64(w.CPU) / float64(time.Microsecond)
}

// perTask divides v by n jobs; NaN for an unknown v (negative) or no jobs.
func perTask(v float64, n int) float64 {
	if v < 0 || n <= 0 {
		return math.NaN()
	}
	return v / float64(n)
}

// perJob formats a figure per job: "–" for NaN, whole from 100 up,
// three significant digits from 0.01 to 100.
func perJob(v float64) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	case v >= 1:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3f", v)
}

// Statements formats the statements of side i (0 hourglass, 1 river, 2
// river with FetchCooldown 1 ms) in the work phase, summed over the
// rounds, as a markdown table of the top n by total time and the top n by
// calls per worked job. Empty without pg_stat_statements.
func (r ThroughputResult) Statements(i, n int) string {
	sum := map[string]Statement{}
	worked := 0
	for _, round := range r.Rounds {
		worked += round[i].Worked
		for _, st := range round[i].Work.Stmts {
			s := sum[st.Query]
			s.Query = st.Query
			s.Calls += st.Calls
			s.TimeMS += st.TimeMS
			s.Rows += st.Rows
			s.Blocks += st.Blocks
			s.WALBytes += st.WALBytes
			sum[st.Query] = s
		}
	}
	if len(sum) == 0 || worked == 0 {
		return ""
	}
	all := slices.Collect(maps.Values(sum))
	var total float64
	for _, s := range all {
		total += s.TimeMS
	}
	var b strings.Builder
	for _, by := range []struct {
		name string
		cmp  func(x, y Statement) int
	}{
		{"total time", func(x, y Statement) int { return cmpFloat(y.TimeMS, x.TimeMS) }},
		{"calls", func(x, y Statement) int { return cmpFloat(float64(y.Calls), float64(x.Calls)) }},
	} {
		slices.SortFunc(all, func(x, y Statement) int {
			if c := by.cmp(x, y); c != 0 {
				return c
			}
			return strings.Compare(x.Query, y.Query)
		})
		fmt.Fprintf(&b, "\n%s, work phase, top %d by %s (%d jobs worked over %d round(s)):\n\n",
			r.Rounds[0][i].System, n, by.name, worked, len(r.Rounds))
		b.WriteString("| calls/job | time µs/job | % time | rows/call | blocks/call | WAL B/job | statement |\n")
		b.WriteString("|---|---|---|---|---|---|---|\n")
		for _, s := range all[:min(n, len(all))] {
			q := s.Query
			if len(q) > 160 {
				q = q[:160] + "…"
			}
			fmt.Fprintf(&b, "| %s | %s | %.1f | %s | %s | %s | `%s` |\n",
				perJob(float64(s.Calls)/float64(worked)), perJob(s.TimeMS*1000/float64(worked)), 100*s.TimeMS/total,
				perJob(float64(s.Rows)/float64(s.Calls)), perJob(float64(s.Blocks)/float64(s.Calls)),
				perJob(float64(s.WALBytes)/float64(worked)), strings.ReplaceAll(q, "|", "\\|"))
		}
	}
	return b.String()
}

// cmpFloat compares x and y.
func cmpFloat(x, y float64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// Indexes formats the indexes side i touched in the work phase, summed
// over the rounds, per worked job, most blocks first.
func (r ThroughputResult) Indexes(i int) string {
	sum := map[string]IndexWork{}
	worked := 0
	for _, round := range r.Rounds {
		worked += round[i].Worked
		for _, ix := range round[i].Work.Indexes {
			s := sum[ix.Index]
			s.Table, s.Index = ix.Table, ix.Index
			s.Scans += ix.Scans
			s.TupRead += ix.TupRead
			s.Blocks += ix.Blocks
			sum[ix.Index] = s
		}
	}
	if len(sum) == 0 || worked == 0 {
		return ""
	}
	all := slices.Collect(maps.Values(sum))
	slices.SortFunc(all, func(x, y IndexWork) int {
		if c := cmpFloat(float64(y.Blocks), float64(x.Blocks)); c != 0 {
			return c
		}
		return strings.Compare(x.Index, y.Index)
	})
	var b strings.Builder
	fmt.Fprintf(&b, "\n%s, work phase, indexes per worked job:\n\n", r.Rounds[0][i].System)
	b.WriteString("| table | index | scans | entries read | blocks |\n|---|---|---|---|---|\n")
	for _, s := range all {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", s.Table, s.Index, perJob(float64(s.Scans)/float64(worked)),
			perJob(float64(s.TupRead)/float64(worked)), perJob(float64(s.Blocks)/float64(worked)))
	}
	return b.String()
}

// payload returns a job's payload: a JSON string of throughputPayload
// bytes, quotes included.
func payload() string {
	return `"` + strings.Repeat("x", throughputPayload-2) + `"`
}

// counter counts the jobs a side's handlers finish and closes done at
// target.
type counter struct {
	n      atomic.Int64
	target int64
	done   chan struct{}
}

func newCounter(target int) *counter {
	return &counter{target: int64(target), done: make(chan struct{})}
}

func (c *counter) add() {
	if c.n.Add(1) == c.target {
		close(c.done)
	}
}

// wait waits until the target is reached or d has passed since start,
// and returns the count and the jobs per second.
func (c *counter) wait(ctx context.Context, start time.Time, d time.Duration) (int, float64, error) {
	t := time.NewTimer(time.Until(start.Add(d)))
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	}
	n := c.n.Load()
	return int(n), float64(n) / time.Since(start).Seconds(), nil
}

// putAll calls put for every batch of [throughputBatch] of n jobs (from,
// count) from throughputPutters goroutines, and returns the rate.
func putAll(n int, put func(from, count int) error) (float64, error) {
	var next atomic.Int64
	errs := make([]error, throughputPutters)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range throughputPutters {
		wg.Go(func() {
			for {
				from := int(next.Add(throughputBatch)) - throughputBatch
				if from >= n {
					return
				}
				if errs[i] = put(from, min(throughputBatch, n-from)); errs[i] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// mark ends a phase on p: it closes pools' connections (every
// connection to the database when pools is empty, which the caller has
// closed) and reads the counters. Nothing, with p nil.
func (p *probe) mark(ctx context.Context, pools ...*pgxpool.Pool) (counters, error) {
	if p == nil {
		return counters{}, nil
	}
	if err := p.settle(ctx, pools...); err != nil {
		return counters{}, err
	}
	return p.read(ctx)
}

// measured sets r's Insert and Work from the readings at the insert's
// start, the work's start and the work's end, and the work's CPU by
// process from the readings at its start and at the workers' stop;
// nothing with p nil.
func (r *Rate) measured(p *probe, insert, work, end counters, started, stopped cpuByProcess) {
	if p != nil {
		r.Insert, r.Work = work.since(insert), end.since(work)
		r.Work.ByProcess = stopped.since(started)
	}
}

// byProcess reads the server's CPU by process; nothing with p nil.
func (p *probe) byProcess(ctx context.Context) (cpuByProcess, error) {
	if p == nil {
		return cpuByProcess{}, nil
	}
	return p.readByProcess(ctx)
}

// hourglassThroughput is hourglass's side on the empty database at url,
// measured by p (when not nil): cfg.Nodes nodes, each with its own pool
// and HTTP server, the jobs put through them in turn, and a Go worker on
// each, the cfg.Workers split between them.
func hourglassThroughput(ctx context.Context, url string, p *probe, cfg ThroughputConfig, round int) (Rate, error) {
	res := Rate{System: "hourglass", Jobs: cfg.Jobs}
	if cfg.Nodes > 1 {
		res.System = fmt.Sprintf("hourglass, %d nodes", cfg.Nodes)
	}
	var nodes []*hourglassNode
	closed := false
	defer func() {
		if !closed {
			for _, n := range nodes {
				n.close()
			}
		}
	}()
	var pools []*pgxpool.Pool
	for i := range cfg.Nodes {
		var n *hourglassNode
		var err error
		pprof.Do(ctx, pprof.Labels("role", "node"), func(ctx context.Context) {
			n, err = startHourglassNode(ctx, url, fmt.Sprintf("bench-%d", i))
		})
		if err != nil {
			return res, err
		}
		nodes = append(nodes, n)
		pools = append(pools, n.pool)
	}

	batch := make([]api.PutRequest, throughputBatch)
	for i := range batch {
		batch[i].Payload = json.RawMessage(payload())
	}
	atInsert, err := p.mark(ctx, pools...)
	if err != nil {
		return res, err
	}
	if res.InsertPerSec, err = putAll(cfg.Jobs, func(from, count int) error {
		c := nodes[from/throughputBatch%len(nodes)].client
		results, err := c.PutBatch(ctx, throughputQueue, batch[:count])
		for _, r := range results {
			if r.Error != "" && err == nil {
				err = errors.New(r.Error)
			}
		}
		return err
	}); err != nil {
		return res, err
	}

	if err := analyze(ctx, pools[0], cfg); err != nil {
		return res, err
	}
	atWork, err := p.mark(ctx, pools...)
	if err != nil {
		return res, err
	}
	started, err := p.byProcess(ctx)
	if err != nil {
		return res, err
	}
	stopProfile, err := startProfile(cfg.CPUProfile, round)
	if err != nil {
		return res, err
	}
	done := newCounter(cfg.Jobs)
	wctx, stop := context.WithCancel(ctx)
	ran := make(chan error, len(nodes))
	start := time.Now()
	for i, n := range nodes {
		w := worker.New(n.client, worker.Options{Concurrency: share(cfg.Workers, len(nodes), i), Logger: slog.New(slog.DiscardHandler)})
		w.Handle(throughputQueue, func(context.Context, *worker.Task) error {
			done.add()
			return nil
		})
		go pprof.Do(wctx, pprof.Labels("role", "worker"), func(wctx context.Context) { ran <- w.Run(wctx) })
	}
	res.Worked, res.PerSec, err = done.wait(ctx, start, cfg.Duration)
	stopProfile()
	stop()
	for range nodes {
		if runErr := <-ran; err == nil {
			err = runErr
		}
	}
	if err != nil {
		return res, err
	}
	stopped, err := p.byProcess(ctx)
	if err != nil {
		return res, err
	}
	for _, n := range nodes {
		n.close()
	}
	closed = true
	atEnd, err := p.mark(ctx)
	res.measured(p, atInsert, atWork, atEnd, started, stopped)
	return res, err
}

// share is the part of total that the i-th of n gets: total/n, and one
// more for the first total%n.
func share(total, n, i int) int {
	k := total / n
	if i < total%n {
		k++
	}
	return max(k, 1)
}

// hourglassNode is one cluster node of hourglass's side, with its pool,
// its HTTP API on a loopback port, and a client of it.
type hourglassNode struct {
	pool   *pgxpool.Pool
	node   *cluster.Node
	hs     *httpapi.Server
	srv    *http.Server
	tr     *http.Transport
	client *client.Client
}

// startHourglassNode opens the node name on the database at url behind
// its HTTP API.
func startHourglassNode(ctx context.Context, url, name string) (*hourglassNode, error) {
	quiet := slog.New(slog.DiscardHandler)
	// The node's pool as internal/clusterbench sizes it for 64 callers
	// (river's below is the same), here so that the phases can close its
	// connections.
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	pc.MaxConns = 64 + 4
	cluster.ConfigurePool(pc)
	n := &hourglassNode{}
	if n.pool, err = pgxpool.NewWithConfig(ctx, pc); err != nil {
		return nil, err
	}
	if n.node, err = cluster.Open(ctx, n.pool, cluster.Options{Node: name, Logger: quiet}); err != nil {
		n.pool.Close()
		return nil, err
	}
	n.hs = httpapi.New(httpapi.Options{Gatherer: prometheus.NewRegistry(), Logger: quiet})
	n.hs.SetService(service.New(n.node))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		n.node.Close()
		n.pool.Close()
		return nil, err
	}
	n.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pprof.Do(r.Context(), pprof.Labels("role", "node"), func(context.Context) { n.hs.ServeHTTP(w, r) })
	})}
	go n.srv.Serve(ln)
	n.tr = &http.Transport{MaxIdleConnsPerHost: 1024, DisableCompression: true}
	if n.client, err = client.New("http://"+ln.Addr().String(), client.Options{HTTPClient: &http.Client{Transport: n.tr}}); err != nil {
		n.close()
		return nil, err
	}
	return n, nil
}

// close stops n's HTTP server, node and pool. Once only.
func (n *hourglassNode) close() {
	n.hs.Drain()
	n.srv.Close()
	n.tr.CloseIdleConnections()
	n.node.Close()
	n.pool.Close()
}

// analyze runs ANALYZE on the side's database when cfg.Analyze.
func analyze(ctx context.Context, pool *pgxpool.Pool, cfg ThroughputConfig) error {
	if !cfg.Analyze {
		return nil
	}
	_, err := pool.Exec(ctx, "ANALYZE")
	return err
}

// workArgs is the throughput comparison's river job.
type workArgs struct {
	Payload string `json:"payload"`
}

// Kind names the job kind to river.
func (workArgs) Kind() string { return "hourglass_bench_work" }

// countWorker completes each job, counting it.
type countWorker struct {
	river.WorkerDefaults[workArgs]
	done *counter
}

// Work counts job.
func (w *countWorker) Work(context.Context, *river.Job[workArgs]) error {
	w.done.add()
	return nil
}

// riverThroughput is river's side on the empty database at url, with
// FetchCooldown cooldown (0: river's default), measured by p (when not
// nil): cfg.Nodes clients, each with its own pool, as processes of
// their own would be, the cfg.Workers split between them, the jobs
// inserted through them in turn.
func riverThroughput(ctx context.Context, url string, p *probe, cfg ThroughputConfig, cooldown time.Duration) (Rate, error) {
	res := Rate{System: "river", Jobs: cfg.Jobs}
	if cfg.Nodes > 1 {
		res.System = fmt.Sprintf("river, %d clients", cfg.Nodes)
	}
	if cooldown > 0 {
		res.System += fmt.Sprintf(", FetchCooldown %v", cooldown)
	}
	var pools []*pgxpool.Pool
	closed := false
	defer func() {
		if !closed {
			for _, pool := range pools {
				pool.Close()
			}
		}
	}()
	done := newCounter(cfg.Jobs)
	workers := river.NewWorkers()
	river.AddWorker(workers, &countWorker{done: done})
	var clients []*river.Client[pgx.Tx]
	for i := range cfg.Nodes {
		pc, err := pgxpool.ParseConfig(url)
		if err != nil {
			return res, err
		}
		pc.MaxConns = 64 + 4 // as clusterbench sizes a node's pool for 64 callers
		pool, err := pgxpool.NewWithConfig(ctx, pc)
		if err != nil {
			return res, err
		}
		pools = append(pools, pool)
		if i == 0 {
			m, err := rivermigrate.New(riverpgxv5.New(pool), nil)
			if err != nil {
				return res, err
			}
			if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
				return res, fmt.Errorf("migrate: %w", err)
			}
		}
		rc := &river.Config{
			Logger:  slog.New(slog.DiscardHandler),
			Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: share(cfg.Workers, cfg.Nodes, i)}},
			Workers: workers,
		}
		if cooldown > 0 {
			rc.FetchCooldown = cooldown
		}
		c, err := river.NewClient(riverpgxv5.New(pool), rc)
		if err != nil {
			return res, err
		}
		clients = append(clients, c)
	}

	args := workArgs{Payload: strings.Repeat("x", throughputPayload-2)}
	batch := make([]river.InsertManyParams, throughputBatch)
	for i := range batch {
		batch[i] = river.InsertManyParams{Args: args}
	}
	atInsert, err := p.mark(ctx, pools...)
	if err != nil {
		return res, err
	}
	if res.InsertPerSec, err = putAll(cfg.Jobs, func(from, count int) error {
		_, err := clients[from/throughputBatch%len(clients)].InsertManyFast(ctx, batch[:count])
		return err
	}); err != nil {
		return res, err
	}
	if err := analyze(ctx, pools[0], cfg); err != nil {
		return res, err
	}
	atWork, err := p.mark(ctx, pools...)
	if err != nil {
		return res, err
	}

	started, err := p.byProcess(ctx)
	if err != nil {
		return res, err
	}
	start := time.Now()
	for _, c := range clients {
		if err := c.Start(ctx); err != nil {
			return res, err
		}
	}
	res.Worked, res.PerSec, err = done.wait(ctx, start, cfg.Duration)
	stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, c := range clients {
		if stopErr := c.Stop(stopCtx); err == nil {
			err = stopErr
		}
	}
	if err != nil {
		return res, err
	}
	stopped, err := p.byProcess(ctx)
	if err != nil {
		return res, err
	}
	for _, pool := range pools {
		pool.Close()
	}
	closed = true
	atEnd, err := p.mark(ctx)
	res.measured(p, atInsert, atWork, atEnd, started, stopped)
	return res, err
}

// startProfile starts a CPU profile into dir/hourglass-work-round.pprof
// and returns what stops it; nothing with dir "".
func startProfile(dir string, round int) (func(), error) {
	if dir == "" {
		return func() {}, nil
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("hourglass-work-%d.pprof", round)))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
