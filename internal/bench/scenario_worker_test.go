package bench

import (
	"flag"
	"io"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestWorkerScenario builds the hourglass binary and runs the worker
// scenario's rows on the embedded store (and beanstalkd's beside them,
// where it is installed) in a tiny configuration: 1000 ready tasks, a
// time budget of 300 ms, and a second for each policy row. The cluster's
// rows, which start PostgreSQL, are left to a named run.
func TestWorkerScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("builds hourglass and runs its server")
	}
	if runtime.GOOS == "windows" {
		t.Skip("the scenario stops its server with SIGTERM")
	}
	useBuiltServer(t)

	c := tiny()
	c.Scenarios = []string{"worker"}
	jobs, err := Plan(c)
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	var results []Result
	for _, j := range jobs {
		rows = append(rows, j.Structure+" "+j.Case)
		if j.Structure == beanstalkd || j.Structure == beanstalkHourglass {
			start := time.Now()
			r := j.Run()
			t.Logf("%s, %v: %v %s %s", j.Label(), time.Since(start).Round(time.Millisecond), r.Metrics, r.Note, r.Err)
			results = append(results, r)
		}
	}
	want := []string{
		"beanstalkd reserve→delete ×64", "hourglass worker ×64", "1 node worker ×64",
		"hourglass rate 1k/s", "3 nodes rate 1k/s", "hourglass concurrency 10", "3 nodes concurrency 10",
	}
	if !slices.Equal(rows, want) {
		t.Fatalf("rows %q, want %q", rows, want)
	}
	for _, r := range results {
		label := r.Structure + " " + r.Case
		if r.Err != "" {
			t.Errorf("%s: %s", label, r.Err)
			continue
		}
		switch {
		case r.Structure == beanstalkd && strings.HasPrefix(r.Note, "skipped:"):
			continue // no beanstalkd here
		case strings.HasPrefix(r.Note, "skipped: the server refused the policy"):
			t.Logf("%s: %s", label, r.Note)
			continue // the engine has no such limit yet
		case r.Note != "":
			t.Errorf("%s: note %q", label, r.Note)
		}
		if v, ok := r.Value("tasks/s"); !ok || !(v > 0) {
			t.Errorf("%s: tasks/s = %v (present %v), want > 0", label, v, ok)
		}
		if runtime.GOOS == "linux" && r.Case == "worker ×64" {
			for _, name := range []string{"CPU/task", "client CPU/task"} {
				if v, ok := r.Value(name); !ok || v < 0 {
					t.Errorf("%s: %s = %v (present %v), want a figure", label, name, v, ok)
				}
			}
		}
		if r.Case == "worker ×64" {
			if v, _ := r.Value("handled"); v < 1 || v > float64(c.Sizes[0]) {
				t.Errorf("%s: %v tasks handled of %d", label, v, c.Sizes[0])
			}
		}
		if r.Case == "concurrency 10" {
			if v, _ := r.Value("max running"); v < 1 || v > workerConcurrency {
				t.Errorf("%s: at most %v handlers running at once, want 1 to %d", label, v, workerConcurrency)
			}
		}
	}
}

// TestWorkerScenario_Skips checks that without a binary to run, or in a
// run that does not name it, the scenario says why in a note and runs
// nothing.
func TestWorkerScenario_Skips(t *testing.T) {
	c := tiny()
	c.Scenarios = []string{"worker"}
	jobs, err := Plan(c)
	if err != nil {
		t.Fatal(err)
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
		if j.Scenario == "worker" {
			ours = append(ours, j)
		}
	}
	if len(ours) != 1 {
		t.Fatalf("%d worker jobs in a run of every scenario, want 1", len(ours))
	}
	if r := ours[0].Run(); r.Note != workerOptIn || len(r.Metrics) != 0 || r.Err != "" {
		t.Errorf("note %q, %d metrics, error %q; want %q", r.Note, len(r.Metrics), r.Err, workerOptIn)
	}
}

// TestWorkerFlags checks that --worker-engine and --worker-limits select
// the worker scenario's rows.
func TestWorkerFlags(t *testing.T) {
	saved := Worker
	t.Cleanup(func() { Worker = saved })
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{nil, []string{
			"beanstalkd reserve→delete ×64", "hourglass worker ×64", "1 node worker ×64",
			"hourglass rate 1k/s", "3 nodes rate 1k/s", "hourglass concurrency 10", "3 nodes concurrency 10",
		}},
		{[]string{"--worker-engine", "embedded", "--worker-limits=false"}, []string{
			"beanstalkd reserve→delete ×64", "hourglass worker ×64",
		}},
		{[]string{"--worker-engine", "cluster"}, []string{
			"1 node worker ×64", "3 nodes rate 1k/s", "3 nodes concurrency 10",
		}},
	} {
		Worker = saved
		fs := flag.NewFlagSet("bench", flag.ContinueOnError)
		WorkerFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if rows := plannedRows(t, "worker"); !slices.Equal(rows, tc.want) {
			t.Errorf("%q: rows %q, want %q", tc.args, rows, tc.want)
		}
	}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	WorkerFlags(fs)
	if err := fs.Parse([]string{"--worker-engine", "sqlite"}); err == nil {
		t.Error("--worker-engine sqlite: no error")
	}
}

// plannedRows returns the rows (structure and case) a tiny configuration
// of scenario plans, in order.
func plannedRows(t *testing.T, scenario string) []string {
	t.Helper()
	c := tiny()
	c.Scenarios = []string{scenario}
	jobs, err := Plan(c)
	if err != nil {
		t.Fatal(err)
	}
	rows := make([]string, len(jobs))
	for i, j := range jobs {
		rows[i] = j.Structure + " " + j.Case
	}
	return rows
}
