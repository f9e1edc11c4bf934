package bench

import (
	"cmp"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"
)

// historyScenario checks that the history of finished tasks (`hourglass
// serve --history D`) keeps the store's size flat under steady load: a
// server is run with a short retention (--history-retention, 2m by
// default) so that the pruning reaches its plateau early, and tasks are
// put, reserved and acked at a steady rate (--history-rate, 5,000/s by
// default) for a while (--history-for, 30m by default). Every
// --history-sample (30 s) it records the store's size: on the embedded
// store the sum of the lengths of the files in the data directory, on a
// cluster (one `serve --postgres` node on a PostgreSQL the bench starts)
// pg_total_relation_size of every hourglass_ table (tasks, attempts,
// history, ...), and the server's RSS. Its rows, one per engine
// (--history-engine embedded, cluster or both):
//
//   - put/s and acked/s: the rates sustained over the run (if the machine
//     cannot keep the asked rate, these say what it kept);
//   - plateau: the size at the first sample one retention and one
//     sample after the start, by when the pruning removes as much as the
//     load adds; end: the size at the last sample, and end/plateau;
//   - growth/min: the slope of the least-squares line through the
//     samples of the second half of the run;
//   - the most RSS and the RSS at the end; backlog: tasks put and not
//     yet acked at the end.
//
// Each sample also says how many tasks were acked over the last
// retention (kept: the tasks whose history the store holds) and the
// size per such task (B/kept): where the machine's pace varies, the
// size follows it, and B/kept is what stays flat or not.
//
// The verdict (the row's note) is "flat" when end/plateau is at most
// historyFlatRatio and the second half's growth, over the second half,
// is at most historyFlatRatio−1 of the plateau; "flat per task kept"
// when the size fails that but the bytes per task kept (below) pass it
// (a machine whose pace changed); else "grows". The series
// itself is written as it is sampled, one Markdown table row per sample,
// to [HistorySeries] (standard error by default). The scenario runs only
// when named (--scenario history).
var historyScenario = Scenario{
	Name: "history",
	Doc: "the store's size under steady load with the history on: `hourglass serve --history R` (R = --history-retention, 2m) with tasks put, reserved and acked at --history-rate (5k/s) by batches and 64 worker handlers for --history-for (30m); " +
		"every --history-sample (30s) the size of the store (embedded: the data directory's files; cluster, one node on a PostgreSQL the bench starts: pg_total_relation_size of the hourglass_ tables) and the server's RSS, written as table rows to standard error; " +
		"plateau = the size at the first sample after R + one sample, end = at the last, growth/min = the slope over the second half; verdict flat when end/plateau ≤ 1.25 and the second half grew by at most a quarter of the plateau",
	jobs: historyJobs,
}

// HistoryOptions are the settings of the history scenario, which its
// flags (see [HistoryFlags]) set.
type HistoryOptions struct {
	Rate      int           // tasks put (and reserved, acked) per second
	Retention time.Duration // the server's --history
	For       time.Duration // how long the load runs
	Sample    time.Duration // the interval between two samples
	Engine    string        // "embedded", "cluster" or "both"
}

// History is the history scenario's settings; hourglass-bench sets it
// from its flags. It is read when the scenario's jobs run.
var History = HistoryOptions{
	Rate:      5000,
	Retention: 2 * time.Minute,
	For:       30 * time.Minute,
	Sample:    30 * time.Second,
	Engine:    "both",
}

// HistorySeries receives the history scenario's samples as they are
// taken, one Markdown table row each.
var HistorySeries io.Writer = os.Stderr

// historyFlatRatio bounds end/plateau for a flat verdict: Pebble's
// compactions and PostgreSQL's free space make the size a sawtooth, not a
// line.
const historyFlatRatio = 1.25

// HistoryFlags defines the history scenario's flags on fs, storing into
// [History].
func HistoryFlags(fs *flag.FlagSet) {
	fs.IntVar(&History.Rate, "history-rate", History.Rate, "history scenario: tasks put, reserved and acked per second")
	fs.DurationVar(&History.Retention, "history-retention", History.Retention, "history scenario: the server's --history")
	fs.DurationVar(&History.For, "history-for", History.For, "history scenario: how long the load runs")
	fs.DurationVar(&History.Sample, "history-sample", History.Sample, "history scenario: the interval between two samples of the store's size")
	fs.Func("history-engine", "history scenario: embedded, cluster or both (default both)", func(s string) error {
		if !slices.Contains([]string{"embedded", "cluster", "both"}, s) {
			return fmt.Errorf("want embedded, cluster or both")
		}
		History.Engine = s
		return nil
	})
}

// historyOptIn is the note of the history scenario in a run that does not
// name it.
const historyOptIn = "skipped: runs only when named (--scenario history): it loads hourglass serve for --history-for (30m by default)"

// historyJobs plans the history scenario: a row per engine.
func historyJobs(c *Config, _ []Structure) []Job {
	if !slices.Contains(c.Scenarios, "history") {
		return []Job{{Scenario: "history", Structure: beanstalkHourglass, run: func() Result {
			return Result{Note: historyOptIn}
		}}}
	}
	var jobs []Job
	add := func(structure string, nodes int) {
		jobs = append(jobs, Job{Scenario: "history", Structure: structure, Case: "steady load", run: func() Result {
			bin, skip := serveCommand()
			if skip != "" {
				return Result{Note: skip}
			}
			o := History
			if o.Rate < 1 || o.For <= 0 || o.Sample <= 0 || o.Retention < 0 {
				return failed(fmt.Errorf("bench: history: bad settings %+v", o))
			}
			r, err := historyRun(bin, nodes, o)
			if err != nil {
				return failed(err)
			}
			return r
		}})
	}
	if History.Engine != "cluster" {
		add(beanstalkHourglass, 0)
	}
	if History.Engine != "embedded" {
		add("1 node", 1)
	}
	return jobs
}

// historySample is one sample of a run.
type historySample struct {
	at            time.Duration // since the load started
	put, acked    int64         // tasks so far
	size, rss     int64         // bytes; -1 if unknown
	tables        string        // the cluster's tables' sizes, biggest first
	putRate, acks float64       // per second since the previous sample
	// kept is the tasks acked over the last retention (since the start,
	// before one has passed): those whose history the store holds.
	kept int64
}

// historyKept sets x.kept from the samples before it: the tasks acked
// since the sample nearest to one retention before x (all of them
// before one retention has passed).
func historyKept(x *historySample, before []historySample, retention time.Duration) {
	x.kept = x.acked
	from := x.at - retention
	best := time.Duration(-1)
	for _, b := range before {
		if d := max(b.at-from, from-b.at); from >= 0 && (best < 0 || d < best) {
			best, x.kept = d, x.acked-b.acked
		}
	}
}

// historyRow returns s as a Markdown table row.
func historyRow(engine string, s historySample) string {
	rss := "?"
	if s.rss >= 0 {
		rss = fmt.Sprintf("%.1f", float64(s.rss)/(1<<20))
	}
	perTask := "?"
	if s.kept > 0 {
		perTask = fmt.Sprintf("%.0f", float64(s.size)/float64(s.kept))
	}
	row := fmt.Sprintf("| %s | %s | %d | %d | %.0f | %.0f | %d | %d | %.1f | %s | %s |", engine, s.at.Round(10*time.Millisecond), s.put, s.acked, s.putRate, s.acks, s.put-s.acked, s.kept, float64(s.size)/(1<<20), perTask, rss)
	if s.tables != "" {
		row += " " + s.tables + " |"
	}
	return row
}

// historyHeader is the header of the series' table; a cluster's rows
// add the tables' sizes (historyTablesHeader).
const (
	historyHeader       = "| engine | time | put | acked | put/s | acked/s | backlog | kept | size MiB | B/kept | RSS MiB |\n|---|---|---|---|---|---|---|---|---|---|---|"
	historyTablesHeader = "| engine | time | put | acked | put/s | acked/s | backlog | kept | size MiB | B/kept | RSS MiB | tables MiB |\n|---|---|---|---|---|---|---|---|---|---|---|---|"
)

// historyVerdict adds to r the figures of the series and the verdict,
// for a run of retention with one sample every sample.
func historyVerdict(r *Result, series []historySample, retention, sample time.Duration) {
	if len(series) == 0 {
		r.Note = "no samples"
		return
	}
	last := series[len(series)-1]
	r.add("put/s", unitRate, float64(last.put)/last.at.Seconds())
	r.add("acked/s", unitRate, float64(last.acked)/last.at.Seconds())
	plateau := series[len(series)-1]
	for _, s := range series {
		if s.at >= retention+sample {
			plateau = s
			break
		}
	}
	r.add("plateau", unitMiB, float64(plateau.size)/(1<<20))
	r.add("plateau at", unitSec, plateau.at.Seconds())
	r.add("end", unitMiB, float64(last.size)/(1<<20))
	ratio := float64(last.size) / math.Max(float64(plateau.size), 1)
	r.add("end/plateau", unitRatio, ratio)
	half := series[len(series)/2:]
	size := func(s historySample) float64 { return float64(s.size) }
	slope := historySlope(half, size) // bytes per second
	r.add("growth/min", unitMiB, slope*60/(1<<20))
	var most int64 = -1
	for _, s := range series {
		most = max(most, s.rss)
	}
	if most >= 0 {
		r.add("max RSS", unitMiB, float64(most)/(1<<20))
		r.add("end RSS", unitMiB, float64(last.rss)/(1<<20))
	}
	r.add("backlog", unitCount, float64(last.put-last.acked))
	span := (half[len(half)-1].at - half[0].at).Seconds()
	grew := slope * span
	// The same judgement of the bytes per task kept, which do not follow
	// the machine's pace.
	perTask := func(s historySample) float64 { return float64(s.size) / float64(max(s.kept, 1)) }
	flatPerTask := false
	if plateau.kept > 0 && last.kept > 0 {
		r.add("B/kept plateau", unitBytes, perTask(plateau))
		r.add("B/kept end", unitBytes, perTask(last))
		grewPerTask := historySlope(half, perTask) * span
		flatPerTask = perTask(last) <= historyFlatRatio*perTask(plateau) && grewPerTask <= (historyFlatRatio-1)*perTask(plateau)
	}
	switch {
	case plateau.at == last.at:
		r.Note = fmt.Sprintf("no verdict: the run ended before the plateau (retention %v + a sample)", retention)
	case ratio <= historyFlatRatio && grew <= (historyFlatRatio-1)*float64(plateau.size):
		r.Note = fmt.Sprintf("flat: end %.2f× the plateau, %+.1f MiB over the second half", ratio, grew/(1<<20))
	case flatPerTask:
		r.Note = fmt.Sprintf("flat per task kept: the size follows the pace (end %.2f× the plateau, %+.1f MiB over the second half), the bytes per task kept do not (%.0f B at the plateau, %.0f B at the end)", ratio, grew/(1<<20), perTask(plateau), perTask(last))
	default:
		r.Note = fmt.Sprintf("grows: end %.2f× the plateau, %+.1f MiB over the second half", ratio, grew/(1<<20))
	}
}

// historySlope returns the slope, per second, of the least-squares line
// through the samples' values (value of each); 0 for fewer than two.
func historySlope(series []historySample, value func(historySample) float64) float64 {
	if len(series) < 2 {
		return 0
	}
	var sx, sy, sxx, sxy float64
	for _, s := range series {
		x, y := s.at.Seconds(), value(s)
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	n := float64(len(series))
	d := n*sxx - sx*sx
	if d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}

// historyTables formats the sizes of tables, biggest first, as
// "name size MiB" pairs.
func historyTables(sizes map[string]int64) string {
	names := make([]string, 0, len(sizes))
	for n := range sizes {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(cmp.Compare(sizes[b], sizes[a]), strings.Compare(a, b))
	})
	var parts []string
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s %.1f", strings.TrimPrefix(n, "hourglass_"), float64(sizes[n])/(1<<20)))
	}
	return strings.Join(parts, ", ")
}
