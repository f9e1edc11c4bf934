package bench

import (
	"bytes"
	"errors"
	"fmt"
	"image/png"
	"slices"
	"strings"
	"testing"
	"time"
)

// tiny is a configuration that runs every scenario in well under a second
// per structure, even under the race detector.
func tiny() Config {
	return Config{
		Sizes:      []int{1000},
		ListMax:    1000,
		Budget:     5 * time.Millisecond,
		FireSpread: 20 * time.Millisecond,
		Idle:       10 * time.Millisecond,
		StreamRate: 5000,
		StreamFor:  40 * time.Millisecond,
		Rates:      []int{1000, 2000},
		Step:       30 * time.Millisecond,
		GCMinOps:   2000,
		SeedTimers: 2000,
		SeedSpread: 20 * time.Millisecond,
	}
}

// positive lists, per scenario, the metrics that must be above zero in
// every result that ran. Metrics not listed must be at least zero: GC
// share, idle CPU and the like can round to nothing in a tiny run, and
// purgatory's rates depend on how fast the machine is.
var positive = map[string][]string{
	"schedule-cancel": {"ns/op", "ops"},
	"memory":          {"B/timer", "objects/timer"},
	"fire":            {"fires/s", "wall", "schedule ns/op", "fired"},
	"parallel":        {"ops/s 1 goroutine", "speedup"},
	"idle":            nil,
	"lateness":        {"late max", "stream/s", "samples"},
	"burst":           {"late max", "schedule ns/op", "fires/s"},
	"structures":      {"ns/op", "ops"},
	"purgatory":       nil,
	"gc":              {"GC cycles", "ops"},
	"seed-demo":       {"wall", "fires/s", "peak heap MiB", "fired"},
}

func TestRunEveryScenario(t *testing.T) {
	c := tiny()
	results, err := Run(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range results {
		seen[r.Scenario] = true
		if r.Err != "" {
			t.Errorf("%s %s n=%d: %s", r.Scenario, r.Structure, r.N, r.Err)
			continue
		}
		if strings.HasPrefix(r.Note, "skipped:") {
			if len(r.Metrics) != 0 {
				t.Errorf("%s %s: note %q with metrics %v", r.Scenario, r.Structure, r.Note, r.Metrics)
			}
			continue
		}
		if r.Note != "" && r.Scenario != "idle" {
			t.Errorf("%s %s: note %q on a result that ran", r.Scenario, r.Structure, r.Note)
		}
		if len(r.Metrics) == 0 {
			t.Errorf("%s %s n=%d: no metrics", r.Scenario, r.Structure, r.N)
		}
		for _, m := range r.Metrics {
			if !(m.Value >= 0) { // also catches NaN
				t.Errorf("%s %s n=%d: %s = %v, want ≥ 0", r.Scenario, r.Structure, r.N, m.Name, m.Value)
			}
		}
		for _, name := range positive[r.Scenario] {
			if v, ok := r.Value(name); !ok || v <= 0 {
				t.Errorf("%s %s n=%d: %s = %v (present %v), want > 0", r.Scenario, r.Structure, r.N, name, v, ok)
			}
		}
		checkCounts(t, c, r)
	}
	for _, name := range ScenarioNames() {
		if !seen[name] {
			t.Errorf("scenario %s produced no result", name)
		}
	}
}

// TestIdleWakeups checks that the idle scenario counts the wake-ups of
// hourglass's drivers and says why it cannot for the runtime's timers.
func TestIdleWakeups(t *testing.T) {
	c := tiny()
	c.Scenarios = []string{"idle"}
	results, err := Run(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(results), 2*len(Structures()); got != want {
		t.Fatalf("%d results, want %d", got, want)
	}
	for _, r := range results {
		_, hasRate := r.Value("wakeups/s")
		_, hasCount := r.Value("wakeups")
		_, hasCPU := r.Value("CPU µs/s")
		if !hasCPU {
			t.Errorf("%s %s: no CPU µs/s", r.Structure, r.Case)
		}
		if r.Structure == "runtime" {
			if hasRate || hasCount || r.Note != noWakeups {
				t.Errorf("runtime %s: wakeups/s %v, wakeups %v, note %q; want neither and the note", r.Case, hasRate, hasCount, r.Note)
			}
			continue
		}
		if !hasRate || !hasCount || r.Note != "" {
			t.Errorf("%s %s: wakeups/s %v, wakeups %v, note %q; want both and no note", r.Structure, r.Case, hasRate, hasCount, r.Note)
		}
	}
}

// checkCounts checks the counts a scenario knows in advance.
func checkCounts(t *testing.T, c Config, r Result) {
	t.Helper()
	want := map[string]map[string]float64{
		"fire":      {"fired": float64(r.N)},
		"seed-demo": {"fired": float64(c.SeedTimers)},
		"lateness":  {"samples": float64(int(float64(c.StreamRate) * c.StreamFor.Seconds()))},
		// The pure structures must not allocate per operation.
		"structures": {"allocs/op": 0},
		// A schedule allocates the handle and nothing else.
		"schedule-cancel": {"allocs/op": 1},
	}[r.Scenario]
	if r.Scenario == "schedule-cancel" && r.Case == oneCallCase && r.Structure == "hierarchical Arm" {
		want = map[string]float64{"allocs/op": 0} // a Handle is a value
	}
	for name, w := range want {
		got, _ := r.Value(name)
		if name == "allocs/op" {
			// The whole process's allocations, averaged: round.
			got = float64(int(got + 0.5))
		}
		if got != w {
			t.Errorf("%s %s n=%d: %s = %v, want %v", r.Scenario, r.Structure, r.N, name, got, w)
		}
	}
}

func TestSkips(t *testing.T) {
	c := tiny()
	c.Sizes = []int{1000, 2000}
	c.Scenarios = []string{"structures"}
	jobs, err := Plan(c)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(jobs), len(Structures())*2; got != want {
		t.Fatalf("%d jobs, want %d", got, want)
	}
	for _, j := range jobs {
		if j.Structure == "runtime" || (j.Structure == "list" && j.N > c.ListMax) {
			if r := j.Run(); !strings.HasPrefix(r.Note, "skipped:") {
				t.Errorf("%s: note %q, want a skip", j.Label(), r.Note)
			}
		}
	}
}

func TestPlanErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"unknown scenario", func(c *Config) { c.Scenarios = []string{"nope"} }, `scenario "nope"`},
		{"unknown structure", func(c *Config) { c.Structures = []string{"tree"} }, `structure "tree"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tiny()
			tc.edit(&c)
			_, err := Plan(c)
			if !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Plan: %v, want ErrUnknown mentioning %s", err, tc.want)
			}
		})
	}
	c := tiny()
	c.Sizes = nil
	if _, err := Plan(c); err == nil {
		t.Error("Plan with no sizes: no error")
	}
	c = tiny()
	c.Runs = -1
	if _, err := Plan(c); err == nil {
		t.Error("Plan with -1 runs: no error")
	}
}

// TestRuns checks that Plan repeats a scenario's jobs in turns and that
// Medians merges their results into one per job, each metric the median.
func TestRuns(t *testing.T) {
	c := tiny()
	c.Scenarios, c.Structures, c.Runs = []string{"memory", "schedule-cancel"}, []string{"heap", "runtime"}, 3
	jobs, err := Plan(c)
	if err != nil {
		t.Fatal(err)
	}
	var labels []string
	for _, j := range jobs {
		labels = append(labels, j.Label())
	}
	n := c.Sizes[0]
	want := []string{
		fmt.Sprintf("schedule-cancel heap n=%d (run 1/3)", n), fmt.Sprintf("schedule-cancel runtime n=%d (run 1/3)", n),
		fmt.Sprintf("schedule-cancel heap n=%d (run 2/3)", n), fmt.Sprintf("schedule-cancel runtime n=%d (run 2/3)", n),
		fmt.Sprintf("schedule-cancel heap n=%d (run 3/3)", n), fmt.Sprintf("schedule-cancel runtime n=%d (run 3/3)", n),
		fmt.Sprintf("memory heap n=%d (run 1/3)", n), fmt.Sprintf("memory runtime n=%d (run 1/3)", n),
		fmt.Sprintf("memory heap n=%d (run 2/3)", n), fmt.Sprintf("memory runtime n=%d (run 2/3)", n),
		fmt.Sprintf("memory heap n=%d (run 3/3)", n), fmt.Sprintf("memory runtime n=%d (run 3/3)", n),
	}
	if !slices.Equal(labels, want) {
		t.Fatalf("jobs:\n%s\nwant:\n%s", strings.Join(labels, "\n"), strings.Join(want, "\n"))
	}

	r := func(structure string, v float64, err string) Result {
		res := Result{Scenario: "s", Structure: structure, N: 10, Err: err}
		res.add("ns/op", unitNs, v)
		res.add("ops", unitCount, 1000-v)
		return res
	}
	merged := Medians([]Result{r("a", 5, ""), r("b", 1, ""), r("a", 1, ""), r("b", 2, ""), r("a", 3, ""), r("b", 4, "boom"), r("b", 3, "")})
	if len(merged) != 2 || merged[0].Structure != "a" || merged[1].Structure != "b" {
		t.Fatalf("Medians merged into %+v", merged)
	}
	for _, tc := range []struct {
		got  Result
		ns   float64
		runs int
		err  string
	}{{merged[0], 3, 3, ""}, {merged[1], 2.5, 4, "boom"}} {
		ns, _ := tc.got.Value("ns/op")
		ops, _ := tc.got.Value("ops")
		if ns != tc.ns || ops != 1000-tc.ns || tc.got.Runs != tc.runs || tc.got.Err != tc.err {
			t.Errorf("%s: ns/op %v, ops %v, runs %d, err %q; want %v, %v, %d, %q", tc.got.Structure, ns, ops, tc.got.Runs, tc.got.Err, tc.ns, 1000-tc.ns, tc.runs, tc.err)
		}
	}
}

func TestSizes(t *testing.T) {
	for _, tc := range []struct {
		max  int
		want []int
	}{
		{1000, []int{1000}},
		{10_000, []int{10_000}},
		{100_000, []int{10_000, 100_000}},
		{500_000, []int{10_000, 100_000, 500_000}},
		{10_000_000, []int{10_000, 100_000, 1_000_000, 10_000_000}},
	} {
		if got := Sizes(tc.max); !equal(got, tc.want) {
			t.Errorf("Sizes(%d) = %v, want %v", tc.max, got, tc.want)
		}
	}
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestHashedSlots(t *testing.T) {
	for n, want := range map[int]int{0: 512, 1000: 512, 32768: 512, 40_000: 1024, 1_000_000: 16384, 6_000_000: 131072} {
		if got := hashedSlots(n); got != want {
			t.Errorf("hashedSlots(%d) = %d, want %d", n, got, want)
		}
	}
}

// sample is a small set of results shaped like a real run's.
func sample() []Result {
	var rs []Result
	for i, s := range StructureNames() {
		for _, n := range []int{10_000, 100_000} {
			r := Result{Scenario: "schedule-cancel", Structure: s, N: n}
			r.add("ns/op", unitNs, float64(100*(i+1)))
			rs = append(rs, r)
			m := Result{Scenario: "memory", Structure: s, N: n}
			m.add("B/timer", unitBytes, float64(64+8*i))
			rs = append(rs, m)
		}
	}
	rs = append(rs, Result{Scenario: "memory", Structure: "list", N: 1_000_000, Note: "skipped: too big"})
	idle := Result{Scenario: "idle", Structure: "heap", Case: "empty"}
	idle.add("CPU µs/s", unitPerSec, 12)
	return append(rs, idle)
}

func TestWriteMarkdown(t *testing.T) {
	var b strings.Builder
	if err := WriteMarkdown(&b, sample()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"### schedule-cancel\n",
		"| structure | n | ns/op |",
		"| heap | 100,000 | 300 |",
		"| structure | n | B/timer | note |",
		"| list | 1,000,000 | - | skipped: too big |",
		"| structure | case | CPU µs/s |",
		"| heap | empty | 12 |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q:\n%s", want, out)
		}
	}
}

func TestFormatValue(t *testing.T) {
	for _, tc := range []struct {
		unit string
		v    float64
		want string
	}{
		{unitRate, 2_500_000, "2.5M"},
		{unitRate, 250_000, "250k"},
		{unitRate, 999, "999"},
		{unitRate, 999_999, "1M"},
		{unitRate, 99_960, "100k"},
		{unitSec, 0.00102, "1.02ms"},
		{unitSec, 0.000538, "538µs"},
		{unitSec, 2.5, "2.5s"},
		{unitSec, -0.02427, "-24.3ms"},
		{unitCount, 6_000_000, "6,000,000"},
		{unitNs, 42.25, "42.2"},
		{unitPct, 12.34, "12.3%"},
		{unitHz, 0, "0.00"},
		{unitHz, 1.953, "1.95"},
		{unitHz, 2500, "2.5k"},
	} {
		if got := FormatValue(tc.unit, tc.v); got != tc.want {
			t.Errorf("FormatValue(%q, %v) = %q, want %q", tc.unit, tc.v, got, tc.want)
		}
	}
}

func TestWriteChart(t *testing.T) {
	var b bytes.Buffer
	if err := WriteChart(&b, "png", sample()); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&b)
	if err != nil {
		t.Fatal(err)
	}
	if w, h := img.Bounds().Dx(), img.Bounds().Dy(); w <= h {
		t.Errorf("two panels side by side should be wider than tall, got %dx%d", w, h)
	}
	b.Reset()
	if err := WriteChart(&b, "svg", sample()[:2]); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "<svg") {
		t.Error("svg chart has no <svg element")
	}
	if err := WriteChart(&b, "svg", nil); !errors.Is(err, ErrNoChartData) {
		t.Errorf("WriteChart(no results) = %v, want ErrNoChartData", err)
	}
	for name, want := range map[string]string{"a.png": "png", "b.SVG": "svg", "c.jpg": ""} {
		got, err := ChartFormat(name)
		if got != want || (want == "") != (err != nil) {
			t.Errorf("ChartFormat(%q) = %q, %v; want %q", name, got, err, want)
		}
	}
}

func TestPercentile(t *testing.T) {
	xs := []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for p, want := range map[float64]int64{0: 1, 0.5: 5, 0.99: 10, 1: 10} {
		if got := percentile(xs, p); got != want {
			t.Errorf("percentile(%v) = %d, want %d", p, got, want)
		}
	}
	if got := percentile([]int64(nil), 0.5); got != 0 {
		t.Errorf("percentile of nothing = %d", got)
	}
}

// TestCompareOneCall checks the one-call comparison's rows: one per side
// in order, the first side's ratio to itself 1, and a side that cannot
// start reported with its error while the others are measured.
func TestCompareOneCall(t *testing.T) {
	sides := append(OneCallSides(), Side{
		Name: "broken",
		Start: func(int, func() time.Duration) (func(), func(), error) {
			return nil, nil, errors.New("no such timer")
		},
	})
	rs := CompareOneCall(sides, 100, 10*time.Millisecond, 3)
	if len(rs) != len(sides) {
		t.Fatalf("%d results for %d sides", len(rs), len(sides))
	}
	for i, r := range rs {
		if r.Structure != sides[i].Name || r.Case != oneCallCase || r.N != 100 {
			t.Errorf("result %d: %s %q n=%d, want %s %q n=100", i, r.Structure, r.Case, r.N, sides[i].Name, oneCallCase)
		}
	}
	if ratio, ok := rs[0].Value("hierarchical/this"); !ok || ratio != 1 {
		t.Errorf("first side's ratio to itself = %v, %v; want 1", ratio, ok)
	}
	for _, r := range rs[1 : len(rs)-1] {
		if ns, _ := r.Value("ns/op"); ns <= 0 || r.Err != "" {
			t.Errorf("%s: ns/op %v, error %q", r.Structure, ns, r.Err)
		}
	}
	if last := rs[len(rs)-1]; !strings.Contains(last.Err, "no such timer") || len(last.Metrics) != 0 {
		t.Errorf("side that cannot start: error %q, %d metrics", last.Err, len(last.Metrics))
	}
}
