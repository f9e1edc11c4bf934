// Command hourglass-bench runs hourglass's benchmarks:
//
//	hourglass-bench [--quick] [--json] [--scenario a,b] [--structures a,b] [--max 1e6] [--runs 5] [--chart FILE] [--hourglass BIN]
//
// It measures a Timer over each of hourglass's structures next to Go's
// runtime timers in the scenarios of package internal/bench, prints a
// Markdown table per scenario (or JSON with --json) on standard output,
// and draws schedule+cancel cost and memory per timer against the number
// of pending timers into an SVG or PNG chart. The scenarios of the
// service (serve, beanstalk, worker, push, history, and cluster, which
// starts PostgreSQL) run only when named with --scenario; they run
// `hourglass serve` from the binary --hourglass names, else the hourglass
// next to this executable, else one built with `go build` from the module
// in the working directory (so that `go run ./cmd/hourglass-bench` works
// from a checkout). Progress goes to standard error.
//
// The harness is a command of its own so that the server binary,
// cmd/hourglass, links none of it: no chart library, no PostgreSQL
// launcher, no load generators.
//
// Usage errors exit with status 2, failed runs with 1.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/hourglass-go/hourglass/internal/bench"
)

const usage = "usage: hourglass-bench [--quick] [--json] [--scenario a,b] [--structures a,b] [--max 1e6] [--runs 5] [--chart FILE] [--hourglass BIN]"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole command, for tests: it returns the exit status, 2 for
// a usage error and 1 for a failed run.
func run(args []string, stdout, stderr io.Writer) int {
	o, help, err := parseBench(args)
	if help {
		printHelp(stdout)
		return 0
	}
	if err != nil {
		return usageError(stderr, err)
	}
	cfg := o.config()
	started := time.Now()
	p := newProgress(stderr)
	results, err := bench.Run(cfg, p.update)
	if err != nil {
		return usageError(stderr, err)
	}
	took := time.Since(started)

	status := 0
	for _, r := range results {
		if r.Err != "" {
			fmt.Fprintf(stderr, "hourglass: %s %s n=%d: %s\n", r.Scenario, r.Structure, r.N, r.Err)
			status = 1
		}
	}
	if err := report(stdout, o, cfg, results, took); err != nil {
		fmt.Fprintln(stderr, errorLine(err))
		return 1
	}
	if o.chart != "" {
		switch err := writeChart(o.chart, results); {
		case errors.Is(err, bench.ErrNoChartData):
			fmt.Fprintf(stderr, "hourglass: no chart written: run schedule-cancel or memory for one\n")
		case err != nil:
			fmt.Fprintln(stderr, errorLine(err))
			return 1
		default:
			fmt.Fprintf(stderr, "hourglass: chart written to %s\n", o.chart)
		}
	}
	return status
}

// errorLine returns err's message with one "hourglass: " prefix.
func errorLine(err error) string {
	msg := err.Error()
	if !strings.HasPrefix(msg, "hourglass: ") {
		msg = "hourglass: " + msg
	}
	return msg
}

// usageError reports err and the usage line on stderr and returns 2.
func usageError(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "%s\n%s\n", errorLine(err), usage)
	return 2
}

// options are the parsed flags of hourglass-bench.
type options struct {
	quick      bool
	json       bool
	scenarios  []string
	structures []string
	max        int // 0: the default for quick or full
	runs       int
	chart      string
}

// parseBench parses the flags of hourglass-bench and checks every name
// and value, so that a bad one fails before anything runs. help is true
// for -h.
func parseBench(args []string) (o options, help bool, err error) {
	fs := benchFlags(&o)
	scenarios, structures := fs.Lookup("scenario").Value, fs.Lookup("structures").Value
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, true, nil
		}
		return o, false, err
	}
	if fs.NArg() > 0 {
		return o, false, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if o.scenarios, err = names("scenario", scenarios.String(), bench.ScenarioNames()); err != nil {
		return o, false, err
	}
	if o.structures, err = names("structure", structures.String(), bench.StructureNames()); err != nil {
		return o, false, err
	}
	if o.chart != "" {
		if _, err := bench.ChartFormat(o.chart); err != nil {
			return o, false, fmt.Errorf("invalid value %q for flag --chart: name must end in .svg or .png", o.chart)
		}
	}
	return o, false, nil
}

// benchFlags defines the flags of hourglass-bench, storing into o.
func benchFlags(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("hourglass-bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.BoolVar(&o.quick, "quick", false, "small sizes and short measurements: under a minute on 2 cores")
	fs.BoolVar(&o.json, "json", false, "print results as JSON instead of Markdown tables")
	fs.String("scenario", "", "scenarios to run, comma-separated: "+strings.Join(bench.ScenarioNames(), ","))
	fs.String("structures", "", "structures to run, comma-separated: "+strings.Join(bench.StructureNames(), ","))
	fs.Func("max", "largest number of pending timers, like 1e7 or 10000000", func(s string) error {
		n, err := parseCount(s)
		o.max = n
		return err
	})
	fs.Func("runs", "run each measurement this many times, taking turns, and report medians (default 1)", func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxRuns {
			return fmt.Errorf("want a whole number from 1 to %d", maxRuns)
		}
		o.runs = n
		return nil
	})
	fs.StringVar(&o.chart, "chart", "hourglass-bench.svg", "chart file, .svg or .png; empty for none")
	bench.HistoryFlags(fs)
	bench.WorkerFlags(fs)
	bench.ClusterFlags(fs)
	bench.KeysFlags(fs)
	bench.ServeFlags(fs)
	return fs
}

// printHelp writes the usage line and every flag with its description.
func printHelp(w io.Writer) {
	fmt.Fprintln(w, usage)
	fmt.Fprintln(w)
	fs := benchFlags(&options{})
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// maxRuns bounds --runs.
const maxRuns = 101

// maxCount bounds --max: ten times the largest documented size.
const maxCount = 100_000_000

// parseCount parses a positive whole number written plainly (10000000)
// or in e-notation (1e7).
func parseCount(s string) (int, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != math.Trunc(f) {
		return 0, fmt.Errorf("want a whole number like 1e6 or 1000000")
	}
	if f < 1 || f > maxCount {
		return 0, fmt.Errorf("want a number from 1 to %g", float64(maxCount))
	}
	return int(f), nil
}

// names splits a comma-separated list and checks each name against known.
func names(what, list string, known []string) ([]string, error) {
	if list == "" {
		return nil, nil
	}
	var out []string
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		found := false
		for _, k := range known {
			found = found || k == n
		}
		if !found {
			return nil, fmt.Errorf("unknown %s %q (want one of %s)", what, n, strings.Join(known, ", "))
		}
		out = append(out, n)
	}
	return out, nil
}

// config turns options into a bench.Config.
func (o options) config() bench.Config {
	c := bench.DefaultConfig()
	if o.quick {
		c = bench.QuickConfig()
	}
	if o.max > 0 {
		c.Sizes = bench.Sizes(o.max)
	}
	c.Scenarios, c.Structures = o.scenarios, o.structures
	c.Runs = o.runs
	return c
}

// report prints results as JSON or Markdown.
func report(w io.Writer, o options, cfg bench.Config, results []bench.Result, took time.Duration) error {
	if o.json {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Go         string         `json:"go"`
			GOOS       string         `json:"goos"`
			GOARCH     string         `json:"goarch"`
			GOMAXPROCS int            `json:"gomaxprocs"`
			Quick      bool           `json:"quick"`
			Sizes      []int          `json:"sizes"`
			Runs       int            `json:"runs"`
			Seconds    float64        `json:"seconds"`
			Results    []bench.Result `json:"results"`
		}{runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), o.quick, cfg.Sizes, max(cfg.Runs, 1), took.Seconds(), results})
	}
	runs := "one run"
	if cfg.Runs > 1 {
		runs = fmt.Sprintf("medians of %d runs", cfg.Runs)
	}
	fmt.Fprintf(w, "# hourglass-bench\n\n%s %s/%s, GOMAXPROCS=%d, sizes %v, quick=%v, %s, took %v.\n\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), cfg.Sizes, o.quick, runs, took.Round(100*time.Millisecond))
	return bench.WriteMarkdown(w, results)
}

// writeChart writes the chart to the file name, in the format its
// extension names. The file is written only if the chart could be drawn.
func writeChart(name string, results []bench.Result) error {
	format, err := bench.ChartFormat(name)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := bench.WriteChart(&buf, format, results); err != nil {
		return err
	}
	return os.WriteFile(name, buf.Bytes(), 0o644)
}
