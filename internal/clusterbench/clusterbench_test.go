package clusterbench_test

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/internal/clusterbench"
	"github.com/hourglass-go/hourglass/internal/pgtest"
)

// TestRun runs a short measurement over a throwaway server. With
// HOURGLASS_CLUSTERBENCH=1 it runs the full sizes (seconds per phase,
// 100k pending) and logs the figures; otherwise a quick check. These
// variables change the full run:
//
//	HOURGLASS_CLUSTERBENCH_NODES=3        only this many nodes (default: 1, then 3)
//	HOURGLASS_CLUSTERBENCH_PENDING=1000000
//	HOURGLASS_CLUSTERBENCH_RATE=5000      tasks/s falling due
//	HOURGLASS_CLUSTERBENCH_LATENESS=1     skip the put phases
//	HOURGLASS_CLUSTERBENCH_WAITS=1        sample what PostgreSQL's backends wait on
//	HOURGLASS_CLUSTERBENCH_LOG=1          the nodes' warnings and errors on stderr
//	HOURGLASS_CLUSTERBENCH_TRACE=FILE     the Go execution trace around the first stall, to FILE
//
// The full run logs, for the lateness phase, the nodes' per-hop
// histograms and what the bench's process went through (GC, goroutines
// waiting for a CPU, CPU time against the machine's).
func TestRun(t *testing.T) {
	srv := pgtest.Start(t, pgtest.Set("max_connections", "400"))
	cfg := clusterbench.Config{Duration: 500 * time.Millisecond, Pending: 2000, Rate: 200, Clients: 16, Takeover: true}
	nodeCounts := []int{1, 3}
	full, _ := strconv.ParseBool(os.Getenv("HOURGLASS_CLUSTERBENCH"))
	if full {
		cfg = clusterbench.Config{Takeover: true}
		cfg.Pending, _ = strconv.Atoi(os.Getenv("HOURGLASS_CLUSTERBENCH_PENDING"))
		cfg.Rate, _ = strconv.Atoi(os.Getenv("HOURGLASS_CLUSTERBENCH_RATE"))
		cfg.LatenessOnly, _ = strconv.ParseBool(os.Getenv("HOURGLASS_CLUSTERBENCH_LATENESS"))
		cfg.SampleWaits, _ = strconv.ParseBool(os.Getenv("HOURGLASS_CLUSTERBENCH_WAITS"))
		cfg.TraceTo = os.Getenv("HOURGLASS_CLUSTERBENCH_TRACE")
		if k, err := strconv.Atoi(os.Getenv("HOURGLASS_CLUSTERBENCH_NODES")); err == nil {
			nodeCounts = []int{k}
		}
		if on, _ := strconv.ParseBool(os.Getenv("HOURGLASS_CLUSTERBENCH_LOG")); on {
			cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		}
	}
	for _, nodes := range nodeCounts {
		cfg.Nodes = nodes
		res, err := clusterbench.Run(context.Background(), srv.CreateDatabase(t), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Log(res)
		if full {
			t.Logf("bench process during the lateness phase: %v", res.Lateness.Process)
			for _, h := range res.Lateness.Hops {
				t.Logf("hop %v", h)
			}
			for i, p := range res.Lateness.Pools {
				t.Logf("pool of bench-%d during the lateness phase: %v", i, p)
			}
			if cfg.SampleWaits {
				t.Logf("PostgreSQL during the lateness phase: %v", res.Lateness.Waits)
			}
			t.Logf("tasks more than 10 ms late, by half second of the stream: %v", res.Lateness.Over10ms)
			if res.Lateness.Stalls != "" {
				t.Logf("%s", res.Lateness.Stalls)
			}
		}
		if res.Lateness.Early > 0 || res.Takeover.Lateness.Early > 0 {
			t.Fatalf("tasks delivered early: %v", res)
		}
		if res.Lateness.Delivered != res.Lateness.Due || res.Lateness.StatementsPerTask <= 0 || len(res.Lateness.Hops) == 0 {
			t.Fatalf("lateness phase: %v", res.Lateness)
		}
		if nodes > 1 && (res.Takeover.Partitions == 0 || res.Takeover.Time <= 0 ||
			res.Takeover.Lateness.Delivered != res.Takeover.Lateness.Due) {
			t.Fatalf("takeover phase: %v", res.Takeover)
		}
		if nodes > 1 {
			t.Logf("takeover: %s", res.Takeover.Timeline())
			if res.Takeover.LastRenewal.IsZero() || res.Takeover.FromRenewal <= 0 || len(res.Takeover.Rounds) == 0 {
				t.Fatalf("takeover phase: no last renewal or no round that took partitions over: %s", res.Takeover.Timeline())
			}
		}
	}
}

// TestSteady runs a queue at a steady state and logs, per window, the
// tasks completed per second and the size of the tasks table: does a
// long run keep its throughput as dead rows come and go? A few seconds
// by default; HOURGLASS_CLUSTERBENCH_STEADY=10m runs that long (30 s
// windows), and HOURGLASS_CLUSTERBENCH_PENDING=1000000 keeps that many
// tasks pending a day ahead throughout, and
// HOURGLASS_CLUSTERBENCH_NAPTIME=10s sets the server's autovacuum_naptime
// (default 1 min: how often autovacuum looks at each database).
func TestSteady(t *testing.T) {
	cfg := clusterbench.SteadyConfig{Duration: 2 * time.Second, Window: time.Second}
	if d, err := time.ParseDuration(os.Getenv("HOURGLASS_CLUSTERBENCH_STEADY")); err == nil && d > 0 {
		cfg = clusterbench.SteadyConfig{Duration: d}
		cfg.Pending, _ = strconv.Atoi(os.Getenv("HOURGLASS_CLUSTERBENCH_PENDING"))
	}
	var opts []pgtest.Option
	if v := os.Getenv("HOURGLASS_CLUSTERBENCH_NAPTIME"); v != "" {
		opts = append(opts, pgtest.Set("autovacuum_naptime", v))
	}
	srv := pgtest.Start(t, opts...)
	windows := 0
	err := clusterbench.Steady(context.Background(), srv.CreateDatabase(t), cfg, func(w clusterbench.Window) {
		t.Log(w)
		windows++
	})
	if err != nil {
		t.Fatal(err)
	}
	if windows == 0 {
		t.Fatal("no window reported")
	}
}
