// Package bench holds the scenarios behind the command hourglass-bench
// (cmd/hourglass-bench): measurements of hourglass's Timer over each of
// its structures, side by side with Go's own runtime timers
// (time.AfterFunc), and of the pure structures of package queue on their
// own, and of the service through the server binary.
//
// A run is planned first and then executed: [Plan] turns a [Config] into a
// list of [Job]s, one per scenario × structure × size, so a caller knows
// the total before anything runs and can show progress; each [Job.Run]
// returns one [Result]. [Run] does both. The scenarios are one file each
// (scenario_*.go); [Scenarios] lists them in the order they run.
//
// Every measurement here runs against the wall clock and the real
// scheduler, so numbers vary from run to run and machine to machine; they
// are for comparing structures within one run. Nothing in this package is
// safe for concurrent use: run one Job at a time, since each one measures
// the whole process (allocations, CPU time, GC).
package bench

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Config says what to run and how long to spend on each measurement. The
// zero Config runs nothing useful; start from [DefaultConfig] or
// [QuickConfig].
type Config struct {
	// Scenarios and Structures select by name; empty means all, in the
	// order of [Scenarios] and [Structures].
	Scenarios  []string
	Structures []string

	// Sizes are the numbers of pending timers the size-dependent scenarios
	// run at, in increasing order.
	Sizes []int

	// ListMax is the largest size the sorted list runs at where deadlines
	// are random: its schedule is O(n), so filling it is O(n²).
	ListMax int

	// Budget is the time spent on each ops-per-second measurement
	// (schedule-cancel, parallel, structures).
	Budget time.Duration

	// FireSpread is the window the fire scenario's deadlines fall in.
	FireSpread time.Duration

	// Idle is the idle scenario's measuring window. Its wake-ups per
	// second come in steps of one over the window: 0.5 for 2 s.
	Idle time.Duration

	// StreamRate and StreamFor make the lateness scenario's stream of
	// firing timeouts: StreamRate per second for StreamFor.
	StreamRate int
	StreamFor  time.Duration

	// Rates are the purgatory scenario's arrival rates per second, in
	// increasing order, each held for Step.
	Rates []int
	Step  time.Duration

	// GCMinOps is the least number of schedule+cancel operations in the gc
	// scenario's workload; it runs 5 per pending timer if that is more.
	GCMinOps int

	// SeedTimers timers due within SeedSpread make the seed-demo.
	SeedTimers int
	SeedSpread time.Duration

	// Runs is how many times each job runs; each figure reported is the
	// median of its runs. The runs of a scenario take turns: every job of
	// the scenario once, then every job again, so that a slow stretch of
	// the machine falls on all structures alike. 0 means 1.
	Runs int

	// Peers is the directory of the module benchmarks/peers, which adds
	// other Go timer libraries to the schedule-cancel scenario's one-call
	// comparison: the scenario runs the comparison there, with `go run`,
	// since those libraries are not this module's dependencies. "" runs
	// it here, without them. [DefaultConfig] and [QuickConfig] find the
	// directory from the working directory (see FindPeers).
	Peers string
}

// DefaultMax is the largest size of a default run, and QuickMax of a quick
// one.
const (
	DefaultMax = 1_000_000
	QuickMax   = 100_000
	minSize    = 10_000 // sizes start here (or at max, if that is smaller)
)

// DefaultConfig returns the configuration of a full run: sizes 10^4 to
// 10^6, one-second measurements, the seed-demo's six million timers. It
// takes a few minutes.
func DefaultConfig() Config {
	return Config{
		Sizes:      Sizes(DefaultMax),
		ListMax:    10_000,
		Budget:     time.Second,
		FireSpread: 200 * time.Millisecond,
		Idle:       2 * time.Second,
		StreamRate: 100_000,
		StreamFor:  2 * time.Second,
		Rates:      []int{100_000, 250_000, 500_000, 1_000_000, 2_000_000, 4_000_000, 8_000_000},
		Step:       time.Second,
		GCMinOps:   1_000_000,
		SeedTimers: 6_000_000,
		SeedSpread: time.Second,
		Peers:      FindPeers(),
	}
}

// QuickConfig returns the configuration of a quick run, which finishes in
// under a minute on two cores: sizes 10^4 and 10^5, measurements of a
// fraction of a second, and a tenth of the seed-demo. The idle window is
// a second, not less: a hashed wheel holding one far timeout wakes about
// twice a second (once per 512 ms turn), and a shorter window would count
// it as 0 or 1 wake-up.
func QuickConfig() Config {
	c := DefaultConfig()
	c.Sizes = Sizes(QuickMax)
	c.Budget = 150 * time.Millisecond
	c.Idle = time.Second
	c.StreamFor = 300 * time.Millisecond
	c.Step = 300 * time.Millisecond
	c.GCMinOps = 200_000
	c.SeedTimers = 600_000
	return c
}

// Sizes returns the sizes up to max: the powers of ten from 10^4 below
// max, then max itself. Sizes(1e6) is [1e4 1e5 1e6]; Sizes(5e5) is
// [1e4 1e5 5e5]; Sizes(1000) is [1000].
func Sizes(max int) []int {
	var out []int
	for n := minSize; n < max; n *= 10 {
		out = append(out, n)
	}
	return append(out, max)
}

// Result is one measurement: a scenario run on one structure at one size.
type Result struct {
	Scenario  string `json:"scenario"`
	Structure string `json:"structure"`
	// N is the number of pending timers (or timers fired, for fire and
	// seed-demo); 0 where the scenario has no size.
	N int `json:"n,omitempty"`
	// Case tells rows of one structure apart where N does not (idle).
	Case    string   `json:"case,omitempty"`
	Metrics []Metric `json:"metrics,omitempty"`
	// Note says why a result is missing or partial (a skipped structure).
	Note string `json:"note,omitempty"`
	// Err is set if the run failed.
	Err string `json:"error,omitempty"`
	// Runs is the number of runs each metric is the median of, if more
	// than one.
	Runs int `json:"runs,omitempty"`
}

// Metric is one named number of a [Result]. Times are in seconds (unit
// "s") except per-operation costs, which are in nanoseconds (unit "ns").
type Metric struct {
	Name  string  `json:"name"`
	Unit  string  `json:"unit"`
	Value float64 `json:"value"`
}

// Metric units, which decide how a value is printed.
const (
	unitNs     = "ns"     // nanoseconds per operation
	unitSec    = "s"      // a duration, printed like time.Duration
	unitBytes  = "B"      // bytes
	unitMiB    = "MiB"    // mebibytes
	unitCount  = "count"  // a whole number
	unitRate   = "1/s"    // events per second, printed with k and M
	unitHz     = "Hz"     // rare events per second, printed with decimals
	unitRatio  = "x"      // a ratio
	unitPct    = "%"      // a percentage
	unitCores  = "cores"  // CPU seconds per second
	unitPerSec = "µs/s"   // CPU microseconds per second
	unitAllocs = "allocs" // allocations per operation
)

// Value returns the value of the metric called name, and false if r has
// none.
func (r Result) Value(name string) (float64, bool) {
	for _, m := range r.Metrics {
		if m.Name == name {
			return m.Value, true
		}
	}
	return 0, false
}

func (r *Result) add(name, unit string, v float64) {
	r.Metrics = append(r.Metrics, Metric{Name: name, Unit: unit, Value: v})
}

// Job is one planned measurement. Run it with [Job.Run].
type Job struct {
	Scenario  string
	Structure string
	N         int
	Case      string
	// Round is which run of the job this is, from 1, and Rounds how many
	// there are (see Config.Runs).
	Round, Rounds int
	run           func() Result
	// runAll is set instead of run for a job that measures several rows
	// side by side in one process (the one-call comparison): each of its
	// results carries its own structure and case.
	runAll func() []Result
}

// Label names the job for progress reports: "schedule-cancel heap
// n=100000".
func (j Job) Label() string {
	s := j.Scenario + " " + j.Structure
	if j.N > 0 {
		s += fmt.Sprintf(" n=%d", j.N)
	}
	if j.Case != "" {
		s += " " + j.Case
	}
	if j.Rounds > 1 {
		s += fmt.Sprintf(" (run %d/%d)", j.Round, j.Rounds)
	}
	return s
}

// Run runs the job and returns its result, with the job's scenario,
// structure, size and case filled in. For a job of several rows it
// returns the first: see [Job.Results].
func (j Job) Run() Result {
	if j.runAll != nil {
		return j.Results()[0]
	}
	r := j.run()
	r.Scenario, r.Structure, r.N, r.Case = j.Scenario, j.Structure, j.N, j.Case
	return r
}

// Results runs the job and returns its results: one for most jobs, a row
// per side for one that measures several side by side.
func (j Job) Results() []Result {
	if j.runAll == nil {
		return []Result{j.Run()}
	}
	rs := j.runAll()
	if len(rs) == 0 {
		rs = []Result{{Note: "no results"}}
	}
	for i := range rs {
		rs[i].Scenario, rs[i].N = j.Scenario, j.N
		if rs[i].Structure == "" {
			rs[i].Structure, rs[i].Case = j.Structure, j.Case
		}
	}
	return rs
}

// ErrUnknown is wrapped by the errors of [Plan] for a scenario or structure
// name it does not know.
var ErrUnknown = errors.New("bench: unknown name")

// Plan checks c and returns the jobs it asks for, in the order they should
// run: scenario by scenario, structure by structure, size by size.
func Plan(c Config) ([]Job, error) {
	scs, err := pick("scenario", c.Scenarios, ScenarioNames())
	if err != nil {
		return nil, err
	}
	sts, err := pick("structure", c.Structures, StructureNames())
	if err != nil {
		return nil, err
	}
	if len(c.Sizes) == 0 {
		return nil, errors.New("bench: no sizes")
	}
	for _, n := range c.Sizes {
		if n < 1 {
			return nil, fmt.Errorf("bench: size %d, need at least 1", n)
		}
	}
	if c.Runs < 0 {
		return nil, fmt.Errorf("bench: %d runs, need at least 1", c.Runs)
	}
	runs := max(c.Runs, 1)
	var chosen []Structure
	for _, s := range Structures() {
		if slices.Contains(sts, s.Name) {
			chosen = append(chosen, s)
		}
	}
	var jobs []Job
	for _, sc := range Scenarios() {
		if !slices.Contains(scs, sc.Name) {
			continue
		}
		once := sc.jobs(&c, chosen)
		for r := range runs {
			for _, j := range once {
				j.Round, j.Rounds = r+1, runs
				jobs = append(jobs, j)
			}
		}
	}
	return jobs, nil
}

// pick checks that every name in want is known and returns want, or all
// of known if want is empty.
func pick(what string, want, known []string) ([]string, error) {
	if len(want) == 0 {
		return known, nil
	}
	for _, w := range want {
		if !slices.Contains(known, w) {
			return nil, fmt.Errorf("%w: %s %q (want one of %s)", ErrUnknown, what, w, strings.Join(known, ", "))
		}
	}
	return want, nil
}

// Run plans c and runs every job, calling progress (if not nil) before
// each job with the number done so far, the total and the job, and once
// more at the end with a zero Job.
func Run(c Config, progress func(done, total int, j Job)) ([]Result, error) {
	jobs, err := Plan(c)
	if err != nil {
		return nil, err
	}
	defer removeBuilt()
	out := make([]Result, 0, len(jobs))
	for i, j := range jobs {
		if progress != nil {
			progress(i, len(jobs), j)
		}
		out = append(out, j.Results()...)
	}
	if progress != nil {
		progress(len(jobs), len(jobs), Job{})
	}
	return Medians(out), nil
}

// Medians merges the results of repeated runs of a job (same scenario,
// structure, size and case) into one, in the order each job first
// appears: each metric becomes the median of its values (the mean of the
// middle two for an even count), and Runs the number of results merged.
// A failed run makes the merged result fail with its error; a note is
// kept. Results of jobs run once come back unchanged.
func Medians(results []Result) []Result {
	type key struct {
		scenario, structure, c string
		n                      int
	}
	var order []key
	groups := make(map[key][]Result)
	for _, r := range results {
		k := key{r.Scenario, r.Structure, r.Case, r.N}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	out := make([]Result, 0, len(order))
	for _, k := range order {
		g := groups[k]
		if len(g) == 1 {
			out = append(out, g[0])
			continue
		}
		m := g[0]
		m.Metrics = nil
		m.Runs = len(g)
		for _, r := range g {
			if r.Err != "" && m.Err == "" {
				m.Err = r.Err
			}
		}
		for _, metric := range g[0].Metrics {
			var vs []float64
			for _, r := range g {
				if v, ok := r.Value(metric.Name); ok {
					vs = append(vs, v)
				}
			}
			m.add(metric.Name, metric.Unit, median(vs))
		}
		out = append(out, m)
	}
	return out
}

// median returns the median of vs, which must not be empty.
func median(vs []float64) float64 {
	slices.Sort(vs)
	h := len(vs) / 2
	if len(vs)%2 == 1 {
		return vs[h]
	}
	return (vs[h-1] + vs[h]) / 2
}
