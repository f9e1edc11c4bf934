package clusterbench

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// hopMetrics are the nodes' per-hop histograms (cluster/metrics.go) that
// a due stream reports, with their short names; the delivered one is
// reported by path.
var hopMetrics = []struct{ metric, name string }{
	{"hourglass_cluster_hop_due_to_fired_seconds", "due→fired"},
	{"hourglass_cluster_hop_fired_to_flushing_seconds", "fired→flushing"},
	{"hourglass_cluster_flush_seconds", "flush"},
	{"hourglass_cluster_hop_due_to_flushed_seconds", "due→flushed"},
	{"hourglass_cluster_hop_flushed_to_notified_seconds", "flushed→notify"},
	{"hourglass_cluster_hop_notified_to_reserved_seconds", "notify→reserved"},
	{"hourglass_cluster_hop_due_to_delivered_seconds", "due→delivered"},
}

// Hop is one of the nodes' histograms over a due stream: how many
// observations it had and its p50, p99 and largest bucket's bound,
// estimated from the buckets summed over the nodes (as Prometheus's
// histogram_quantile does), and, per node, its p99.
type Hop struct {
	Name          string
	Count         uint64
	P50, P99, Top time.Duration
	NodeP99       []time.Duration
}

func (h Hop) String() string {
	per := make([]string, len(h.NodeP99))
	for i, d := range h.NodeP99 {
		per[i] = round(d).String()
	}
	return fmt.Sprintf("%s n=%d p50 %v p99 %v top bucket ≤%v (p99 by node %s)",
		h.Name, h.Count, round(h.P50), round(h.P99), round(h.Top), strings.Join(per, " "))
}

// round rounds d to 10 µs, for reading.
func round(d time.Duration) time.Duration { return d.Round(10 * time.Microsecond) }

// Process is what the bench's process (the nodes, the load and the
// reservers: one Go runtime) went through during a due stream: its GC
// cycles, its goroutines' stop-the-world pauses, and how long goroutines
// that were ready to run waited for a CPU (the runtime's
// /sched/latencies), p99 and worst bucket. A wait there delays a node's
// wheel, flusher or reserve and the bench's reservers alike.
//
// CPU is the CPU time this process used over the stream, Server the
// bench's PostgreSQL server's (serverCPU; a floor), Machine the
// machine's (all processes: this one, PostgreSQL's, and whatever else
// runs), and Wall the stream's length: Machine less CPU and Server is
// what other work on the machine took. Vacuums (the nodes', cluster/vacuum.go),
// Autovacuums and Autoanalyzes count those run on hourglass_tasks over
// the stream, and Live and Dead are its live and dead tuples at the
// stream's start, as the server's statistics had them.
type Process struct {
	GCCycles                      uint64
	PauseP99, PauseMax            time.Duration
	SchedP99, SchedP999, SchedMax time.Duration
	CPU, Server, Machine, Wall    time.Duration
	Vacuums, Autovacuums          int64
	Autoanalyzes, Live, Dead      int64
	// Deadlocks is how many deadlocks PostgreSQL detected in the
	// database over the stream (pg_stat_database): each cost a
	// statement deadlock_timeout (1 s) before one was cancelled.
	Deadlocks int64
	// Handed and GivenBack are the tasks the nodes' flushes reserved for
	// their waiting reservers and handed to them, and those they
	// reserved for waiters gone meanwhile and made ready again
	// (hourglass_cluster_flush_handed_total, _given_back_total).
	Handed, GivenBack int64
}

func (p Process) String() string {
	return fmt.Sprintf("%d GC cycles, stop-the-world pauses p99 %v max ≤%v, goroutines waiting to run p99 %v p99.9 %v max ≤%v; "+
		"CPU over %v: this process %v, PostgreSQL %v, the machine %v (others %v); hourglass_tasks at the start %d live %d dead tuples, then vacuums %d, autovacuums %d, autoanalyzes %d; deadlocks %d; flushes handed %d tasks, gave back %d",
		p.GCCycles, round(p.PauseP99), round(p.PauseMax), round(p.SchedP99), round(p.SchedP999), round(p.SchedMax),
		p.Wall.Round(time.Millisecond), p.CPU.Round(time.Millisecond), p.Server.Round(time.Millisecond), p.Machine.Round(time.Millisecond),
		(p.Machine - p.CPU - p.Server).Round(time.Millisecond), p.Live, p.Dead, p.Vacuums, p.Autovacuums, p.Autoanalyzes, p.Deadlocks, p.Handed, p.GivenBack)
}

// snapshot is the nodes' histograms and the process's runtime metrics at
// one moment, to subtract (hops).
type snapshot struct {
	// nodes[i][name]: node i's buckets (cumulative counts by upper
	// bound) of each hop; the delivered one under "due→delivered <path>".
	nodes   []map[string][]bucket
	runtime []metrics.Sample
	// at, cpu (this process's), machine (all CPUs busy), and the
	// autovacuum and autoanalyze counts of hourglass_tasks.
	at                                         time.Time
	cpu, server, machine                       time.Duration
	vacuums, autovacuums, analyzes, live, dead int64
	deadlocks                                  int64
	// counters: the nodes' counterMetrics, summed over the nodes.
	counters map[string]float64
}

// counterMetrics are the nodes' counters a due stream reports (Process).
var counterMetrics = []string{"hourglass_cluster_flush_handed_total", "hourglass_cluster_flush_given_back_total"}

// bucket is a cumulative histogram bucket.
type bucket struct {
	le    float64
	count uint64
}

var runtimeNames = []string{"/gc/cycles/total:gc-cycles", "/sched/pauses/total/gc:seconds", "/sched/latencies:seconds"}

// snap reads every node's registry and the runtime's metrics. A registry
// that fails to gather counts as empty.
func (c *Cluster) snap() snapshot {
	var s snapshot
	s.counters = map[string]float64{}
	for _, r := range c.regs {
		m := map[string][]bucket{}
		fams, _ := r.Gather()
		for _, f := range fams {
			if slices.Contains(counterMetrics, f.GetName()) {
				for _, mt := range f.GetMetric() {
					s.counters[f.GetName()] += mt.GetCounter().GetValue()
				}
			}
			for _, hm := range hopMetrics {
				if f.GetName() != hm.metric {
					continue
				}
				for _, mt := range f.GetMetric() {
					name := hm.name
					for _, l := range mt.GetLabel() {
						if l.GetName() == "path" {
							name += " " + l.GetValue()
						}
					}
					m[name] = buckets(mt.GetHistogram())
				}
			}
		}
		s.nodes = append(s.nodes, m)
	}
	s.runtime = make([]metrics.Sample, len(runtimeNames))
	for i, n := range runtimeNames {
		s.runtime[i].Name = n
	}
	metrics.Read(s.runtime)
	if c.srv.find(c) {
		c.srv.refresh()
		s.server = c.srv.read()
	}
	s.at, s.cpu, s.machine = time.Now(), processCPU(), machineCPU()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Missing (no such table yet, or an error): zeros, which the
	// difference shows as nothing run.
	_ = c.admin.QueryRow(ctx, `SELECT vacuum_count, autovacuum_count, autoanalyze_count, n_live_tup, n_dead_tup
		FROM pg_stat_all_tables WHERE relname = 'hourglass_tasks'`).Scan(&s.vacuums, &s.autovacuums, &s.analyzes, &s.live, &s.dead)
	_ = c.admin.QueryRow(ctx, `SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`).Scan(&s.deadlocks)
	return s
}

// processCPU returns the CPU time (user and system) this process has
// used; 0 where it cannot be read.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// machineCPU returns the CPU time every CPU of the machine has been busy
// (/proc/stat's total less idle and iowait); 0 where it cannot be read.
func machineCPU() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return 0
	}
	var busy int64
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return time.Duration(busy) * time.Second / 100 // USER_HZ
}

// buckets returns h's cumulative buckets, +Inf last.
func buckets(h *dto.Histogram) []bucket {
	var out []bucket
	for _, b := range h.GetBucket() {
		out = append(out, bucket{b.GetUpperBound(), b.GetCumulativeCount()})
	}
	return append(out, bucket{math.Inf(1), h.GetSampleCount()})
}

// hops returns the hops observed between before and after, in the order
// of hopMetrics, the delivered one by path; and what the process went
// through.
func hops(before, after snapshot) ([]Hop, Process) {
	var names []string
	seen := map[string]bool{}
	for _, hm := range hopMetrics {
		for _, m := range after.nodes {
			for name := range m {
				if (name == hm.name || strings.HasPrefix(name, hm.name+" ")) && !seen[name] {
					seen[name] = true
					names = append(names, name)
				}
			}
		}
	}
	var out []Hop
	for _, name := range names {
		var sum []bucket
		h := Hop{Name: name}
		for i, m := range after.nodes {
			d := diff(m[name], before.nodes[i][name])
			h.NodeP99 = append(h.NodeP99, seconds(quantile(d, 0.99)))
			if sum == nil {
				sum = d
			} else {
				for k := range min(len(sum), len(d)) {
					sum[k].count += d[k].count
				}
			}
		}
		if len(sum) == 0 || sum[len(sum)-1].count == 0 {
			continue
		}
		h.Count = sum[len(sum)-1].count
		h.P50, h.P99 = seconds(quantile(sum, 0.5)), seconds(quantile(sum, 0.99))
		for k, b := range sum {
			if b.count == h.Count {
				h.Top = seconds(b.le)
				if math.IsInf(b.le, 1) && k > 0 {
					h.Top = seconds(sum[k-1].le) // beyond the last bound
				}
				break
			}
		}
		out = append(out, h)
	}
	var p Process
	p.GCCycles = after.runtime[0].Value.Uint64() - before.runtime[0].Value.Uint64()
	pauses := runtimeDiff(after.runtime[1].Value.Float64Histogram(), before.runtime[1].Value.Float64Histogram())
	p.PauseP99, p.PauseMax = seconds(quantile(pauses, 0.99)), seconds(quantile(pauses, 1))
	p.CPU, p.Machine, p.Wall = after.cpu-before.cpu, after.machine-before.machine, after.at.Sub(before.at)
	p.Server = after.server - before.server
	p.Vacuums, p.Autovacuums = after.vacuums-before.vacuums, after.autovacuums-before.autovacuums
	p.Autoanalyzes, p.Live, p.Dead = after.analyzes-before.analyzes, before.live, before.dead
	p.Deadlocks = after.deadlocks - before.deadlocks
	p.Handed = int64(after.counters[counterMetrics[0]] - before.counters[counterMetrics[0]])
	p.GivenBack = int64(after.counters[counterMetrics[1]] - before.counters[counterMetrics[1]])
	sched := runtimeDiff(after.runtime[2].Value.Float64Histogram(), before.runtime[2].Value.Float64Histogram())
	p.SchedP99, p.SchedP999, p.SchedMax = seconds(quantile(sched, 0.99)), seconds(quantile(sched, 0.999)), seconds(quantile(sched, 1))
	return out, p
}

// diff returns a's counts less b's, bucket by bucket (b nil: a).
func diff(a, b []bucket) []bucket {
	out := make([]bucket, len(a))
	copy(out, a)
	for k := range min(len(a), len(b)) {
		out[k].count -= b[k].count
	}
	return out
}

// runtimeDiff returns the cumulative buckets of a runtime histogram's
// counts in a less those in b (the same bounds), each bucket bounded
// above by its upper bound.
func runtimeDiff(a, b *metrics.Float64Histogram) []bucket {
	var out []bucket
	var cum uint64
	for i, n := range a.Counts {
		if i < len(b.Counts) {
			n -= b.Counts[i]
		}
		cum += n
		out = append(out, bucket{a.Buckets[i+1], cum})
	}
	return out
}

// quantile estimates the q-quantile of cumulative buckets, interpolating
// linearly within the bucket that holds it; q = 1 gives the upper bound
// of the last bucket with an observation (its lower one if it is +Inf).
func quantile(bs []bucket, q float64) float64 {
	if len(bs) == 0 || bs[len(bs)-1].count == 0 {
		return 0
	}
	total := float64(bs[len(bs)-1].count)
	rank := q * total
	lo, below := 0.0, 0.0
	for _, b := range bs {
		if float64(b.count) >= rank && b.count > 0 {
			if math.IsInf(b.le, 1) {
				return lo
			}
			if q == 1 || float64(b.count) == below {
				return b.le
			}
			return lo + (b.le-lo)*(rank-below)/(float64(b.count)-below)
		}
		if !math.IsInf(b.le, -1) {
			lo = b.le
		}
		below = float64(b.count)
	}
	return lo
}

// seconds converts s seconds to a duration.
func seconds(s float64) time.Duration {
	if math.IsInf(s, 0) || math.IsNaN(s) {
		return 0
	}
	return time.Duration(s * float64(time.Second))
}

// Waits is what PostgreSQL's backends of a database were doing over a
// due stream, sampled from pg_stat_activity every waitEvery: per sample
// of an active backend (this bench's sampler left out), its type, its
// wait (none: on a CPU or waiting for one) and the start of its
// statement, counted. It costs the server a query per sample, so it is
// taken only when asked (Cluster.SampleWaits).
//
// Stats is hourglass_tasks's statistics every 10 samples: the time since
// the first sample, its live and dead tuples and its vacuums (the nodes'
// and autovacuum's).
type Waits struct {
	Samples int
	Counts  map[string]int
	Stats   []string
	// timeline is every sample in order, each backend not idle in full
	// (its node, how long its statement and transaction had run), for
	// the stalls (describeStalls).
	timeline []waitSample
}

// waitEvery is how often sampleWaits looks.
const waitEvery = 10 * time.Millisecond

// String lists the most frequent states first, each with its share of
// the samples taken.
func (w Waits) String() string {
	type kv struct {
		k string
		n int
	}
	var all []kv
	for k, n := range w.Counts {
		all = append(all, kv{k, n})
	}
	slices.SortFunc(all, func(a, b kv) int { return b.n - a.n })
	var b strings.Builder
	fmt.Fprintf(&b, "%d samples (every %v); hourglass_tasks: %s; active backends per sample:", w.Samples, waitEvery, strings.Join(w.Stats, ", "))
	for i, e := range all {
		if i == 25 {
			break
		}
		fmt.Fprintf(&b, "\n  %6.3f  %s", float64(e.n)/float64(max(w.Samples, 1)), e.k)
	}
	return b.String()
}

// sqlWaits reads the backends of the database that are not idle, and
// the server's background processes that are not in their main loop's
// wait (a checkpoint writing, the WAL writer flushing, an autovacuum):
// their node (application_name), pid, state, wait, how long their
// statement and transaction have run, the pids holding a lock they wait
// for, and the start of their statement.
const sqlWaits = `SELECT backend_type, coalesce(application_name, ''), pid, coalesce(state, '-'),
		coalesce(wait_event_type, '-'), coalesce(wait_event, 'CPU'),
		coalesce(extract(epoch FROM clock_timestamp() - query_start) * 1000, 0)::float8,
		coalesce(extract(epoch FROM clock_timestamp() - xact_start) * 1000, 0)::float8,
		CASE WHEN wait_event_type = 'Lock' THEN pg_blocking_pids(pid)::text ELSE '' END,
		left(regexp_replace(coalesce(query, ''), '\s+', ' ', 'g'), 40)
	FROM pg_stat_activity
	WHERE pid <> pg_backend_pid() AND (
		(datname = current_database() AND state IS DISTINCT FROM 'idle')
		OR (backend_type <> 'client backend' AND coalesce(wait_event_type, '') <> 'Activity'))`

// sampleWaits samples the backends until ctx is done and returns what
// it saw. A sample that fails is skipped.
func (c *Cluster) sampleWaits(ctx context.Context) Waits {
	w := Waits{Counts: map[string]int{}}
	srv := serverCPU{postmaster: c.srv.postmaster} // its own: snap reads c.srv meanwhile
	tick := time.NewTicker(waitEvery)
	defer tick.Stop()
	start := time.Now()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return w
		case <-tick.C:
		}
		qctx, cancel := context.WithTimeout(context.Background(), time.Second)
		if i%10 == 0 {
			var live, dead, vac, avac int64
			if c.admin.QueryRow(qctx, `SELECT n_live_tup, n_dead_tup, vacuum_count, autovacuum_count
				FROM pg_stat_all_tables WHERE relname = 'hourglass_tasks'`).Scan(&live, &dead, &vac, &avac) == nil {
				w.Stats = append(w.Stats, fmt.Sprintf("%.1fs %d/%d v%d+%d", time.Since(start).Seconds(), live, dead, vac, avac))
			}
		}
		if i%10 == 0 && srv.postmaster != 0 {
			srv.refresh()
		}
		at := time.Now()
		ws := waitSample{at: at, machine: machineCPU(), ours: processCPU()}
		if srv.postmaster != 0 {
			ws.ours += srv.read()
		}
		rows, err := c.admin.Query(qctx, sqlWaits)
		if err == nil {
			w.Samples++
			for rows.Next() {
				var typ, app, state, wt, we, blockers, q string
				var pid int32
				var ms, xms float64
				if rows.Scan(&typ, &app, &pid, &state, &wt, &we, &ms, &xms, &blockers, &q) != nil {
					continue
				}
				ws.rows = append(ws.rows, fmt.Sprintf("%s %s %d %s %s:%s stmt %.1fms xact %.1fms %s| %s",
					typ, app, pid, state, wt, we, ms, xms, blockers, q))
				if state == "active" && typ == "client backend" {
					w.Counts[typ+" | "+wt+":"+we+" | "+q]++
				} else if typ != "client backend" {
					w.Counts[typ+" | "+wt+":"+we]++
				}
			}
			rows.Close()
			ws.took = time.Since(at)
			w.timeline = append(w.timeline, ws)
		}
		cancel()
	}
}
