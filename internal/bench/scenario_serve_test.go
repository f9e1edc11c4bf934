package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestServeScenario builds the hourglass binary and runs the serve
// scenario in a tiny configuration: 1000 tasks pending, then 10,000,
// and a fifth of a second of each load.
func TestServeScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("builds hourglass and runs its server")
	}
	if runtime.GOOS == "windows" {
		t.Skip("the scenario stops its server with SIGTERM")
	}
	useBuiltServer(t)

	c := tiny()
	c.Scenarios = []string{"serve"}
	results, err := Run(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	var cases []string
	for _, r := range results {
		cases = append(cases, r.Case)
	}
	if want := []string{"put ×64", "batch 100 ×8", "pending", "lateness 10k/s", "lateness 10k/s, at rest", "pending"}; !slices.Equal(cases, want) {
		t.Fatalf("cases %q, want %q", cases, want)
	}
	if n := results[2].N; n != c.Sizes[0] || results[5].N != 10*n {
		t.Errorf("pending rows at n=%d and n=%d, want %d and %d", n, results[5].N, c.Sizes[0], 10*c.Sizes[0])
	}
	positive := map[string][]string{
		"put ×64":                 {"tasks/s", "tasks/fsync", "req p50", "req p99"},
		"batch 100 ×8":            {"tasks/s", "tasks/fsync", "req p50", "req p99"},
		"pending":                 {"tasks/s", "tasks/fsync", "disk B/task", "restart"},
		"lateness 10k/s":          {"tasks/s", "late max", "samples"},
		"lateness 10k/s, at rest": {"tasks/s", "late max", "samples"},
	}
	if runtime.GOOS == "linux" {
		positive["pending"] = append(positive["pending"], "RSS MiB")
	}
	for _, r := range results {
		if r.Err != "" || strings.HasPrefix(r.Note, "skipped:") {
			t.Errorf("%s n=%d: error %q, note %q", r.Case, r.N, r.Err, r.Note)
			continue
		}
		for _, name := range positive[r.Case] {
			if v, ok := r.Value(name); !ok || !(v > 0) {
				t.Errorf("%s n=%d: %s = %v (present %v), want > 0", r.Case, r.N, name, v, ok)
			}
		}
	}
	for _, late := range results[3:5] {
		if early, _ := late.Value("early"); early != 0 {
			t.Errorf("%s: %v tasks delivered before their due time", late.Case, early)
		}
		if got, _ := late.Value("samples"); got != float64(serveDueRate)*max(5*c.StreamFor.Seconds(), 0.2) {
			t.Errorf("%s: lateness samples %v, want the due rate times the stream's length", late.Case, got)
		}
	}
	if _, ok := results[4].Value("rest after"); !ok {
		t.Errorf("the at-rest lateness row has no rest after column")
	}
}

// TestServeScenario_SkipsInTestBinary checks that without a binary to run
// the scenario says why in a note and runs nothing: a test binary cannot
// serve.
func TestServeScenario_SkipsInTestBinary(t *testing.T) {
	c := tiny()
	c.Scenarios = []string{"serve"}
	jobs, err := Plan(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 6 {
		t.Fatalf("%d jobs, want 6", len(jobs))
	}
	for _, j := range jobs {
		if r := j.Run(); !strings.HasPrefix(r.Note, "skipped:") || len(r.Metrics) != 0 || r.Err != "" {
			t.Errorf("%s: note %q, %d metrics, error %q; want a skip", j.Label(), r.Note, len(r.Metrics), r.Err)
		}
	}
}

// TestServeScenario_OptIn checks that a run of every scenario skips serve
// with a note instead of starting servers.
func TestServeScenario_OptIn(t *testing.T) {
	serveBinary = "/nonexistent/hourglass"
	t.Cleanup(func() { serveBinary = "" })
	jobs, err := Plan(tiny())
	if err != nil {
		t.Fatal(err)
	}
	var serve []Job
	for _, j := range jobs {
		if j.Scenario == "serve" {
			serve = append(serve, j)
		}
	}
	if len(serve) != 1 {
		t.Fatalf("%d serve jobs in a run of every scenario, want 1", len(serve))
	}
	if r := serve[0].Run(); r.Note != serveOptIn || len(r.Metrics) != 0 || r.Err != "" {
		t.Errorf("note %q, %d metrics, error %q; want %q", r.Note, len(r.Metrics), r.Err, serveOptIn)
	}
}

// useBuiltServer builds the hourglass binary into a temporary directory
// and makes the serve scenarios run it, until the test ends; it skips
// the test where no go command is at hand.
func useBuiltServer(t *testing.T) {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to build hourglass with: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "hourglass")
	if out, err := exec.Command(goCmd, "build", "-o", bin, "github.com/hourglass-go/hourglass/cmd/hourglass").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	serveBinary = bin
	t.Cleanup(func() { serveBinary = "" })
}

// TestFindServer checks where the scenarios of the service find the
// hourglass binary outside tests: next to the running executable, else
// built by go build from the working directory's module (here, a test
// of this module), once per run and removed at its end.
func TestFindServer(t *testing.T) {
	dir := t.TempDir()
	exe, sibling := filepath.Join(dir, "hourglass-bench"), filepath.Join(dir, "hourglass")
	if runtime.GOOS == "windows" {
		exe, sibling = exe+".exe", sibling+".exe"
	}
	for _, f := range []string{exe, sibling} {
		if err := os.WriteFile(f, nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if bin, skip := findServer(exe); bin != sibling || skip != "" {
		t.Errorf("with a sibling: %q, %q; want %q", bin, skip, sibling)
	}

	if testing.Short() {
		t.Skip("builds hourglass")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("no go command to build hourglass with: %v", err)
	}
	t.Cleanup(removeBuilt)
	alone := filepath.Join(t.TempDir(), "hourglass-bench")
	bin, skip := findServer(alone)
	if bin == "" || skip != "" {
		t.Fatalf("without a sibling: %q, %q; want a binary built", bin, skip)
	}
	if again, _ := findServer(alone); again != bin {
		t.Errorf("second lookup %q, want the same build %q", again, bin)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "hourglass ") {
		t.Errorf("%s version: %v: %s", bin, err, out)
	}
	removeBuilt()
	if _, err := os.Stat(bin); !os.IsNotExist(err) {
		t.Errorf("after the run the built binary is still there: %v", err)
	}
}
