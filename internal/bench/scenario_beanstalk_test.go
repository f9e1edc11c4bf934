package bench

import (
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestBeanstalkScenario builds the hourglass binary and runs the
// beanstalk scenario in a tiny configuration against beanstalkd: 1000
// delayed jobs, 500 ready ones, 200 due in the same second, a fifth of a
// second of puts.
func TestBeanstalkScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("builds hourglass and runs it and beanstalkd")
	}
	if _, err := exec.LookPath("beanstalkd"); err != nil {
		t.Skip("beanstalkd is not installed (Debian package beanstalkd)")
	}
	if runtime.GOOS == "windows" {
		t.Skip("the scenario runs hourglass serve through sh")
	}
	useBuiltServer(t)

	c := tiny()
	c.Scenarios = []string{"beanstalk"}
	results, err := Run(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, r := range results {
		rows = append(rows, r.Case+" "+r.Structure)
	}
	want := []string{
		"puts ×64 beanstalkd", "puts ×64 hourglass",
		"RSS, delayed beanstalkd", "RSS, delayed hourglass",
		"reserve→delete ×64 beanstalkd", "reserve→delete ×64 hourglass",
		"lateness, same second beanstalkd", "lateness, same second hourglass",
		"fsync 4 KiB disk",
	}
	if !slices.Equal(rows, want) {
		t.Fatalf("rows %q, want %q", rows, want)
	}
	positive := map[string][]string{
		"puts ×64":              {"ops/s"},
		"RSS, delayed":          {"RSS MiB"},
		"reserve→delete ×64":    {"ops/s"},
		"lateness, same second": {"late max"},
		"fsync 4 KiB":           {"ops/s", "fsync p50", "fsync p99"},
	}
	for _, r := range results {
		if r.Err != "" || r.Note != "" {
			t.Errorf("%s %s: error %q, note %q", r.Case, r.Structure, r.Err, r.Note)
			continue
		}
		names := positive[r.Case]
		if r.Structure == beanstalkHourglass && r.Case != "lateness, same second" {
			names = append(names, "× beanstalkd")
		}
		if r.Structure == beanstalkHourglass && (r.Case == "puts ×64" || r.Case == "reserve→delete ×64") {
			names = append(names, "tasks/commit")
		}
		// Present, not positive: /proc/PID/stat counts in 10 ms ticks, and
		// a quick round of beanstalkd may take less.
		for _, name := range []string{"CPU/op", "client CPU/op"} {
			if v, ok := r.Value(name); runtime.GOOS == "linux" && (r.Case == "puts ×64" || r.Case == "reserve→delete ×64") && (!ok || v < 0) {
				t.Errorf("%s %s: %s = %v, %v; want a figure", r.Case, r.Structure, name, v, ok)
			}
		}
		if runtime.GOOS != "linux" && r.Case == "RSS, delayed" {
			names = nil
		}
		for _, name := range names {
			if v, ok := r.Value(name); !ok || !(v > 0) {
				t.Errorf("%s %s: %s = %v (present %v), want > 0", r.Case, r.Structure, name, v, ok)
			}
		}
		if v, ok := r.Value("late p50"); ok && v < 0 {
			t.Errorf("%s: jobs handed out %v s before their due time", r.Structure, -v)
		}
	}
}

// TestBeanstalkScenario_Skips checks that without a binary to run, or in
// a run that does not name it, the scenario says why in a note and runs
// nothing.
func TestBeanstalkScenario_Skips(t *testing.T) {
	c := tiny()
	c.Scenarios = []string{"beanstalk"}
	jobs, err := Plan(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 9 {
		t.Fatalf("%d jobs, want 9", len(jobs))
	}
	for _, j := range jobs {
		if r := j.Run(); !strings.HasPrefix(r.Note, "skipped:") || len(r.Metrics) != 0 || r.Err != "" {
			t.Errorf("%s: note %q, %d metrics, error %q; want a skip", j.Label(), r.Note, len(r.Metrics), r.Err)
		}
	}

	serveBinary = "/nonexistent/hourglass"
	t.Cleanup(func() { serveBinary = "" })
	jobs, err = Plan(tiny())
	if err != nil {
		t.Fatal(err)
	}
	var ours []Job
	for _, j := range jobs {
		if j.Scenario == "beanstalk" {
			ours = append(ours, j)
		}
	}
	if len(ours) != 1 {
		t.Fatalf("%d beanstalk jobs in a run of every scenario, want 1", len(ours))
	}
	if r := ours[0].Run(); r.Note != beanstalkOptIn || len(r.Metrics) != 0 || r.Err != "" {
		t.Errorf("note %q, %d metrics, error %q; want %q", r.Note, len(r.Metrics), r.Err, beanstalkOptIn)
	}
}
