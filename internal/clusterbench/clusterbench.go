// Package clusterbench measures a cluster of nodes (package cluster) on
// one PostgreSQL database: durable puts per second through single puts
// and batches, delivery lateness from due to delivered with tasks pending
// and falling due at a steady rate, the statements the nodes send per
// task, and the takeover of a node's partitions when it dies. The nodes
// run in this process, each on a pool of its own, as separate processes
// would.
//
// `hourglass-bench --scenario cluster` (internal/bench) runs the phases
// one by one through a [Cluster]; [Run] runs them all, for the go test
// of this package.
package clusterbench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"
)

// Config sizes a run. Zero fields take the defaults named.
type Config struct {
	Nodes    int           // default 3
	Clients  int           // concurrent putters; default 64
	Duration time.Duration // of each put phase and of the due stream; default 5 s
	Batch    int           // tasks per batch; default 100
	// Pending tasks put far in the future before the lateness phase, and
	// the rate (tasks/s) falling due during it; defaults 100k and 1000/s.
	Pending int
	Rate    int
	// LatenessOnly skips the put phases.
	LatenessOnly bool
	// Takeover adds the takeover phase (needs 2 nodes or more): the
	// first node is cut off in this process (Cluster.Cut).
	Takeover bool
	// SampleWaits samples what PostgreSQL's backends wait on during the
	// lateness phase (Lateness.Waits; a query every 10 ms).
	SampleWaits bool
	// TraceTo, if set, is where the lateness phase writes the Go
	// runtime's execution trace around its first stall (Cluster.TraceTo).
	TraceTo string
	Logger  *slog.Logger // default: discard
}

// Result holds the figures of one run.
type Result struct {
	Nodes             int
	SinglePutsPerSec  float64 // one task per call, Clients concurrent
	BatchPutsPerSec   float64 // Batch tasks per call, Clients/8 concurrent
	Pending           int
	PendingPutsPerSec float64 // the Pending tasks put in batches of 1000, a putter per node
	Rate              int
	Lateness          Lateness
	Takeover          Takeover // zero unless Config.Takeover
}

// String formats r as a few lines of text.
func (r Result) String() string {
	s := fmt.Sprintf("nodes %d: single puts %.0f/s, batch puts %.0f/s; lateness with %d pending, %d/s due: %v",
		r.Nodes, r.SinglePutsPerSec, r.BatchPutsPerSec, r.Pending, r.Rate, r.Lateness)
	if r.Takeover.Partitions > 0 {
		s += fmt.Sprintf("; takeover: %v", r.Takeover)
	}
	return s
}

// withDefaults fills cfg's zero fields.
func (cfg Config) withDefaults() Config {
	if cfg.Nodes <= 0 {
		cfg.Nodes = 3
	}
	if cfg.Clients <= 0 {
		cfg.Clients = 64
	}
	if cfg.Duration <= 0 {
		cfg.Duration = 5 * time.Second
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 100
	}
	if cfg.Pending <= 0 {
		cfg.Pending = 100_000
	}
	if cfg.Rate <= 0 {
		cfg.Rate = 1000
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return cfg
}

// Run starts cfg.Nodes nodes on the database at url (which it fills with
// tasks in queues named bench-*) and measures: the put phases, the
// lateness phase with cfg.Pending pending, then, with cfg.Takeover, the
// takeover phase. It closes the nodes before returning.
func Run(ctx context.Context, url string, cfg Config) (Result, error) {
	cfg = cfg.withDefaults()
	c, err := Start(ctx, url, cfg.Nodes, cfg.Clients, cfg.Logger)
	if err != nil {
		return Result{}, err
	}
	defer c.Close()
	c.SampleWaits, c.TraceTo = cfg.SampleWaits, cfg.TraceTo
	res := Result{Nodes: cfg.Nodes, Pending: cfg.Pending, Rate: cfg.Rate}
	if !cfg.LatenessOnly {
		if res.SinglePutsPerSec, err = c.Puts(ctx, "bench-single", cfg.Clients, 1, cfg.Duration); err != nil {
			return res, err
		}
		if res.BatchPutsPerSec, err = c.Puts(ctx, "bench-batch", max(1, cfg.Clients/8), cfg.Batch, cfg.Duration); err != nil {
			return res, err
		}
	}
	if res.PendingPutsPerSec, err = c.Fill(ctx, "bench-late", cfg.Pending); err != nil {
		return res, err
	}
	if res.Lateness, err = c.Lateness(ctx, "bench-due", cfg.Rate, cfg.Duration); err != nil {
		return res, err
	}
	if cfg.Takeover && cfg.Nodes > 1 {
		if res.Takeover, err = c.Takeover(ctx, "bench-takeover", cfg.Rate, c.Cut(0)); err != nil {
			return res, err
		}
	}
	return res, nil
}
