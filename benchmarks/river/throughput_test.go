package riverbench_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/benchmarks/river"
	"github.com/hourglass-go/hourglass/internal/pgtest"
)

// TestThroughput runs the throughput comparison over a throwaway
// PostgreSQL server: by default one tiny round (2000 jobs, at most 5 s a
// side), so that it keeps compiling and running; with
// HOURGLASS_RIVERBENCH=1 the full sizes (100k ready jobs, 64 workers, at
// most 10 s a side), printing the markdown table. These variables change
// the full run:
//
//	HOURGLASS_RIVERBENCH_JOBS=1000000
//	HOURGLASS_RIVERBENCH_WORKERS=64
//	HOURGLASS_RIVERBENCH_SECONDS=10     the longest a side works
//	HOURGLASS_RIVERBENCH_ROUNDS=3       rounds, each side once per round
func TestThroughput(t *testing.T) {
	srv := pgtest.Start(t, pgtest.Set("max_connections", "400"))
	cfg := riverbench.ThroughputConfig{Jobs: 2000, Duration: 5 * time.Second}
	if full, _ := strconv.ParseBool(os.Getenv("HOURGLASS_RIVERBENCH")); full {
		env := func(name string) int {
			n, _ := strconv.Atoi(os.Getenv("HOURGLASS_RIVERBENCH_" + name))
			return n
		}
		cfg = riverbench.ThroughputConfig{
			Jobs: env("JOBS"), Workers: env("WORKERS"), Duration: time.Duration(env("SECONDS")) * time.Second, Rounds: env("ROUNDS"),
		}
	}
	res, err := riverbench.CompareThroughput(context.Background(), func() string { return srv.CreateDatabase(t) }, cfg,
		func(line string) { t.Log(line) })
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + res.Table())
	for _, round := range res.Rounds {
		for _, r := range round {
			if r.Worked <= 0 || r.Worked > r.Jobs || !(r.PerSec > 0) {
				t.Errorf("%s: %d of %d jobs worked, %v/s", r.System, r.Worked, r.Jobs, r.PerSec)
			}
		}
	}
}
