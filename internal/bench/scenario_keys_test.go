package bench

import (
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestKeysScenario builds the hourglass binary and runs the keys
// scenario's rows in a tiny configuration (1000 ready tasks, 300 ms of
// throughput, a second of the small key's stream), on the embedded store
// and on one cluster node (PostgreSQL from internal/pgtest), checking
// only that each row produces its figures: timing is not asserted.
func TestKeysScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("builds hourglass and runs its server")
	}
	if runtime.GOOS == "windows" {
		t.Skip("the scenario stops its server with SIGTERM")
	}
	useBuiltServer(t)

	c := tiny()
	c.Scenarios = []string{"keys"}
	jobs, err := Plan(c)
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, j := range jobs {
		rows = append(rows, j.Structure+" "+j.Case)
		start := time.Now()
		r := j.Run()
		t.Logf("%s, %v: %v %s %s", j.Label(), time.Since(start).Round(time.Millisecond), r.Metrics, r.Note, r.Err)
		label := j.Structure + " " + j.Case
		if r.Err != "" {
			t.Errorf("%s: %s", label, r.Err)
			continue
		}
		var names []string
		switch {
		case strings.HasPrefix(j.Case, "reserve→ack"):
			names = []string{"tasks/s", "handled"}
		case strings.HasPrefix(j.Case, "memory"):
			names = []string{"heap MiB", "heap B/task"}
		default:
			names = []string{"p50", "p99", "max", "server p99", "small handled"}
		}
		if j.Case == "reserve→ack 10k keys" {
			names = append(names, "× no keys")
		}
		if j.Case == "small key, flooded" {
			names = append(names, "big handled")
		}
		for _, name := range names {
			if v, ok := r.Value(name); !ok || !(v > 0) {
				t.Errorf("%s: %s = %v (present %v), want > 0", label, name, v, ok)
			}
		}
		if strings.HasPrefix(j.Case, "small key") {
			// What the machine did meanwhile: present, possibly 0.
			want := []string{"stalls", "longest stall"}
			if runtime.GOOS == "linux" {
				want = append(want, "server runq s/s", "bench runq s/s")
			}
			for _, name := range want {
				if v, ok := r.Value(name); !ok || v < 0 {
					t.Errorf("%s: %s = %v (present %v), want ≥ 0", label, name, v, ok)
				}
			}
		}
		if j.Case == "small key, flooded" {
			for _, name := range []string{"+ p99", "+ server p99"} {
				if _, ok := r.Value(name); !ok {
					t.Errorf("%s: no %s", label, name)
				}
			}
		}
		if j.Case == "memory, a key a task" {
			if _, ok := r.Value("heap B/key"); !ok {
				t.Errorf("%s: no heap B/key", label)
			}
		}
	}
	want := []string{"hourglass reserve→ack no keys", "hourglass reserve→ack 10k keys", "hourglass small key, empty queue", "hourglass small key, flooded",
		"1 node reserve→ack no keys", "1 node reserve→ack 10k keys", "1 node small key, empty queue", "1 node small key, flooded",
		"hourglass memory, no keys", "hourglass memory, a key a task"}
	if !slices.Equal(rows, want) {
		t.Fatalf("rows %q, want %q", rows, want)
	}
}

// TestKeysScenario_Skips checks that in a run that does not name it the
// scenario says why in a note and runs nothing.
func TestKeysScenario_Skips(t *testing.T) {
	jobs, err := Plan(tiny())
	if err != nil {
		t.Fatal(err)
	}
	var ours []Job
	for _, j := range jobs {
		if j.Scenario == "keys" {
			ours = append(ours, j)
		}
	}
	if len(ours) != 1 {
		t.Fatalf("%d keys jobs in a run of every scenario, want 1", len(ours))
	}
	if r := ours[0].Run(); r.Note != keysOptIn || len(r.Metrics) != 0 || r.Err != "" {
		t.Errorf("note %q, %d metrics, error %q; want %q", r.Note, len(r.Metrics), r.Err, keysOptIn)
	}
}
