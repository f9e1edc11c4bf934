package bench

import (
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestPushScenario builds the hourglass binary and runs the push
// scenario's rows on the embedded store in a tiny configuration: 1000
// tasks pending, a second of tasks falling due at 1,000/s, and 1000
// ready tasks pushed. The cluster's rows, which start PostgreSQL, are
// left to a named run.
func TestPushScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("builds hourglass and runs its server")
	}
	if runtime.GOOS == "windows" {
		t.Skip("the scenario stops its server with SIGTERM")
	}
	useBuiltServer(t)

	c := tiny()
	c.Scenarios = []string{"push"}
	jobs, err := Plan(c)
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, j := range jobs {
		rows = append(rows, j.Structure+" "+j.Case)
		if j.Structure != beanstalkHourglass {
			continue
		}
		start := time.Now()
		r := j.Run()
		t.Logf("%s, %v: %v %s %s", j.Label(), time.Since(start).Round(time.Millisecond), r.Metrics, r.Note, r.Err)
		label := j.Structure + " " + j.Case
		if r.Err != "" || r.Note != "" {
			t.Errorf("%s: error %q, note %q", label, r.Err, r.Note)
			continue
		}
		if v, ok := r.Value("early"); !ok || v != 0 {
			t.Errorf("%s: early = %v (present %v), want 0", label, v, ok)
		}
		if v, _ := r.Value("pushed"); v < 1 || v > float64(c.Sizes[0]) {
			t.Errorf("%s: %v tasks pushed, want 1 to %d", label, v, c.Sizes[0])
		}
		names := []string{"p50", "p99", "max"}
		if j.Case == "throughput" {
			names = []string{"pushes/s"}
		}
		for _, name := range names {
			if v, ok := r.Value(name); !ok || !(v > 0) {
				t.Errorf("%s: %s = %v (present %v), want > 0", label, name, v, ok)
			}
		}
	}
	want := []string{"hourglass due→first byte 1k/s", "hourglass throughput", "1 node due→first byte 1k/s", "1 node throughput"}
	if !slices.Equal(rows, want) {
		t.Fatalf("rows %q, want %q", rows, want)
	}
}

// TestPushScenario_Skips checks that in a run that does not name it the
// scenario says why in a note and runs nothing.
func TestPushScenario_Skips(t *testing.T) {
	jobs, err := Plan(tiny())
	if err != nil {
		t.Fatal(err)
	}
	var ours []Job
	for _, j := range jobs {
		if j.Scenario == "push" {
			ours = append(ours, j)
		}
	}
	if len(ours) != 1 {
		t.Fatalf("%d push jobs in a run of every scenario, want 1", len(ours))
	}
	if r := ours[0].Run(); r.Note != pushOptIn || len(r.Metrics) != 0 || r.Err != "" {
		t.Errorf("note %q, %d metrics, error %q; want %q", r.Note, len(r.Metrics), r.Err, pushOptIn)
	}
	if !strings.HasPrefix(pushOptIn, "skipped:") {
		t.Errorf("opt-in note %q does not begin with skipped:", pushOptIn)
	}
}
