package riverbench_test

import (
	"context"
	"errors"
	"os"
	"runtime"
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
//	HOURGLASS_RIVERBENCH_ANALYZE=1      ANALYZE each side's tables before its workers start
//	HOURGLASS_RIVERBENCH_NODES=3        hourglass nodes and river clients, the workers split between them
//	HOURGLASS_RIVERBENCH_HOURGLASS_ONLY=1 hourglass's side alone
//	HOURGLASS_RIVERBENCH_CPUPROFILE=DIR CPU profiles of hourglass's work phases, labelled by role (node, worker)
func TestThroughput(t *testing.T) {
	srv := startServer(t)
	cfg := riverbench.ThroughputConfig{Jobs: 2000, Duration: 5 * time.Second}
	if full, _ := strconv.ParseBool(os.Getenv("HOURGLASS_RIVERBENCH")); full {
		env := func(name string) int {
			n, _ := strconv.Atoi(os.Getenv("HOURGLASS_RIVERBENCH_" + name))
			return n
		}
		cfg = riverbench.ThroughputConfig{
			Jobs: env("JOBS"), Workers: env("WORKERS"), Duration: time.Duration(env("SECONDS")) * time.Second, Rounds: env("ROUNDS"),
			Analyze: env("ANALYZE") != 0, Nodes: env("NODES"), CPUProfile: os.Getenv("HOURGLASS_RIVERBENCH_CPUPROFILE"),
			HourglassOnly: env("HOURGLASS_ONLY") != 0,
		}
	}
	res, err := riverbench.CompareThroughput(context.Background(), riverbench.Server{
		NewDatabase: func() string { return srv.CreateDatabase(t) },
		URL:         srv.URL("postgres"),
		Dir:         srv.Dir,
	}, cfg, func(line string) { t.Log(line) })
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + res.Table())
	for i := range res.Rounds[0] {
		t.Log(res.Statements(i, 12) + res.Indexes(i))
	}
	for _, round := range res.Rounds {
		for _, r := range round {
			if r.Worked <= 0 || r.Worked > r.Jobs || !(r.PerSec > 0) {
				t.Errorf("%s: %d of %d jobs worked, %v/s", r.System, r.Worked, r.Jobs, r.PerSec)
			}
			// Each phase's counters are its own: the jobs put are
			// counted in the insert, and the work commits and spends
			// CPU and WAL of its own.
			if r.Insert.Inserted < int64(r.Jobs) {
				t.Errorf("%s: insert phase counted %d tuples inserted for %d jobs", r.System, r.Insert.Inserted, r.Jobs)
			}
			if r.Work.Commits <= 0 || r.Work.WALBytes <= 0 || r.Work.Blocks <= 0 {
				t.Errorf("%s: work phase measured %+v", r.System, r.Work)
			}
			if runtime.GOOS == "linux" && r.Work.CPU <= 0 {
				t.Errorf("%s: work phase measured no PostgreSQL CPU", r.System)
			}
			if r.Work.Statements == 0 {
				t.Errorf("%s: %d statements for %d jobs worked", r.System, r.Work.Statements, r.Worked)
			}
		}
	}
}

// startServer starts a PostgreSQL server for t with pg_stat_statements
// loaded, or without it where the server cannot load it.
func startServer(t *testing.T) *pgtest.Server {
	opts := []pgtest.Option{pgtest.Set("max_connections", "400")}
	srv, err := pgtest.Launch(append(opts, pgtest.Set("shared_preload_libraries", "pg_stat_statements"))...)
	if err != nil && !errors.Is(err, pgtest.ErrNoBinaries) {
		t.Logf("without pg_stat_statements: %v", err)
		srv, err = pgtest.Launch(opts...)
	}
	if errors.Is(err, pgtest.ErrNoBinaries) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}
