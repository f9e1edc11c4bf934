package bench

import (
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/internal/hiccup"
)

// TestClusterScenario builds the hourglass binary (the takeover kills a
// node that runs as `hourglass serve --postgres`) and runs the cluster
// scenario in a tiny configuration: 1000 tasks pending, a fifth of a
// second of each load, the takeover (which lasts about a lease, 5 s), and
// the light-load row (3 node processes, 200 tasks due within 2 s).
// It starts PostgreSQL, and skips where PostgreSQL is not installed, as
// the scenario does.
func TestClusterScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("builds hourglass, starts PostgreSQL and waits out a lease")
	}
	if runtime.GOOS == "windows" {
		t.Skip("the takeover kills a node with SIGKILL")
	}
	useBuiltServer(t)
	machine := hiccup.Start()
	defer machine.Stop()
	started := time.Now()
	defer func() {
		if t.Failed() {
			lost, events := machine.Over(started, time.Now())
			t.Logf("the machine lost %v during the test: %v", lost, events)
		}
	}()
	c := tiny()
	c.Scenarios = []string{"cluster"}
	results, err := Run(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	var cases []string
	for _, r := range results {
		cases = append(cases, r.Structure+" "+r.Case)
		if strings.HasPrefix(r.Note, "skipped: ") {
			t.Skip(r.Note)
		}
	}
	want := []string{"1 node put ×64", "1 node batch 100 ×8", "1 node lateness 5k/s",
		"3 nodes put ×64", "3 nodes batch 100 ×8", "3 nodes lateness 5k/s", "3 nodes takeover", "3 nodes light"}
	if !slices.Equal(cases, want) {
		t.Fatalf("rows %q, want %q", cases, want)
	}
	positive := map[string][]string{
		"put ×64":       {"tasks/s"},
		"batch 100 ×8":  {"tasks/s"},
		"lateness 5k/s": {"fill/s", "late max", "samples", "stmts/task"},
		"takeover":      {"takeover", "partitions", "late max", "samples"},
		// The light row's first hop, from the nodes' histograms: every
		// task put with a delay takes it (the others only those made
		// ready where no consumer waited, which a fast machine may not
		// see).
		"light": {"late max", "samples", "due→flushed p99"},
	}
	for _, r := range results {
		if r.Err != "" || r.Note != "" {
			t.Errorf("%s %s: error %q, note %q", r.Structure, r.Case, r.Err, r.Note)
			continue
		}
		for _, name := range positive[r.Case] {
			if v, ok := r.Value(name); !ok || !(v > 0) {
				t.Errorf("%s %s: %s = %v (present %v), want > 0", r.Structure, r.Case, name, v, ok)
			}
		}
		if r.Case == "light" {
			if v, _ := r.Value("samples"); v != lightTasks {
				t.Errorf("light: %v tasks delivered of %d", v, lightTasks)
			}
		}
		if v, _ := r.Value("early"); v != 0 {
			t.Errorf("%s %s: %v tasks delivered early", r.Structure, r.Case, v)
		}
	}
	if n := results[2].N; n != c.Sizes[0] {
		t.Errorf("lateness row at n=%d, want %d", n, c.Sizes[0])
	}
}
