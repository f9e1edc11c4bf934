// Package riverbench measures delivery lateness of delayed jobs on one
// PostgreSQL server, side by side: a cluster of hourglass nodes (package
// cluster, driven by internal/clusterbench) and river
// (github.com/riverqueue/river) scheduling the same jobs. It is a module
// of its own so that hourglass's go.mod never depends on river.
//
// Each side, in turn, on a fresh database of the same server:
//
//   - puts Pending jobs due a day later, in batches of 1000, one inserter
//     per node (hourglass: PutBatch; river: InsertManyFast, which is COPY
//     FROM), and reports the insert rate;
//   - then puts a stream of Rate jobs/s for Duration, in batches of 100,
//     each batch a second ahead of its first due time, with consumers
//     waiting (hourglass: 4 reservers and 16 ackers per node; river: a
//     client per node with MaxWorkers 1000, see [Config]), and reports the lateness
//     of each delivery: the time a reserve returned it (hourglass) or its
//     worker started (river), minus its due time.
//
// River runs with its default configuration. Its scheduler moves jobs
// from scheduled to available every 5 s
// (maintenance.JobSchedulerIntervalDefault, not settable through
// river.Config), taking those due within the next 5 s; a producer then
// fetches available jobs whose scheduled_at has passed when notified (the
// scheduler notifies only for jobs already due) or every
// FetchPollInterval (default 1 s).
package riverbench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hourglass-go/hourglass/internal/clusterbench"
)

// Config sizes a comparison. Zero fields take the defaults named.
type Config struct {
	Nodes    int           // hourglass nodes, and river clients; default 1
	Pending  int           // jobs put a day ahead before the stream; default 100k
	Rate     int           // jobs/s falling due during the stream; default 1000
	Duration time.Duration // of the stream; default 20 s
	Rounds   int           // each side runs once per round, alternating which goes first; default 1
	// Workers is river's MaxWorkers per client; default 1000. A producer
	// fetches at most MaxWorkers jobs per fetch and fetches at most once
	// per FetchCooldown (100 ms), so MaxWorkers 100 would cap a client at
	// 1000 jobs/s: the limit would be this setting, not river's schedule.
	Workers int
}

func (c *Config) defaults() {
	if c.Nodes <= 0 {
		c.Nodes = 1
	}
	if c.Pending <= 0 {
		c.Pending = 100_000
	}
	if c.Rate <= 0 {
		c.Rate = 1000
	}
	if c.Duration <= 0 {
		c.Duration = 20 * time.Second
	}
	if c.Rounds <= 0 {
		c.Rounds = 1
	}
	if c.Workers <= 0 {
		c.Workers = 1000
	}
}

// Side holds one system's figures of one round, or the medians of several.
type Side struct {
	System       string
	Pending      int
	InsertPerSec float64 // the Pending jobs, in batches of 1000
	Rate         int
	Due          int // jobs in the stream
	Delivered    int
	Early        int
	P50, P99     time.Duration
	Max          time.Duration
}

// String formats s on one line.
func (s Side) String() string {
	return fmt.Sprintf("%s: %d pending inserted at %.0f/s; %d/s due: %d of %d delivered, %d early, lateness p50 %v p99 %v max %v",
		s.System, s.Pending, s.InsertPerSec, s.Rate, s.Delivered, s.Due, s.Early, s.P50, s.P99, s.Max)
}

// Result holds every round of both sides.
type Result struct {
	Config    Config
	Hourglass []Side
	River     []Side
}

// Compare runs cfg.Rounds rounds, each running both sides in turn, each
// side on a database of its own that newDatabase creates (and returns the
// URL of) on the same server. log, if not nil, receives a line per side
// and round.
func Compare(ctx context.Context, newDatabase func() string, cfg Config, log func(string)) (Result, error) {
	cfg.defaults()
	res := Result{Config: cfg}
	hourglass := func() error {
		r, err := clusterbench.Run(ctx, newDatabase(), clusterbench.Config{
			Nodes: cfg.Nodes, Pending: cfg.Pending, Rate: cfg.Rate, Duration: cfg.Duration, LatenessOnly: true,
		})
		if err != nil {
			return fmt.Errorf("hourglass: %w", err)
		}
		s := Side{
			System: "hourglass", Pending: r.Pending, InsertPerSec: r.PendingPutsPerSec, Rate: r.Rate,
			Due: r.Lateness.Due, Delivered: r.Lateness.Delivered, Early: r.Lateness.Early,
			P50: r.Lateness.P50, P99: r.Lateness.P99, Max: r.Lateness.Max,
		}
		res.Hourglass = append(res.Hourglass, s)
		if log != nil {
			log(s.String())
		}
		return nil
	}
	river := func() error {
		s, err := runRiver(ctx, newDatabase(), cfg)
		if err != nil {
			return fmt.Errorf("river: %w", err)
		}
		res.River = append(res.River, s)
		if log != nil {
			log(s.String())
		}
		return nil
	}
	for round := range cfg.Rounds {
		turns := []func() error{hourglass, river}
		if round%2 == 1 {
			slices.Reverse(turns)
		}
		for _, turn := range turns {
			if err := turn(); err != nil {
				return res, err
			}
		}
	}
	return res, nil
}

// Median returns the median of each figure of sides, separately.
func Median(sides []Side) Side {
	if len(sides) == 0 {
		return Side{}
	}
	m := sides[0]
	m.InsertPerSec = median(sides, func(s Side) float64 { return s.InsertPerSec })
	m.Delivered = int(median(sides, func(s Side) float64 { return float64(s.Delivered) }))
	m.Early = int(median(sides, func(s Side) float64 { return float64(s.Early) }))
	m.P50 = time.Duration(median(sides, func(s Side) float64 { return float64(s.P50) }))
	m.P99 = time.Duration(median(sides, func(s Side) float64 { return float64(s.P99) }))
	m.Max = time.Duration(median(sides, func(s Side) float64 { return float64(s.Max) }))
	return m
}

// median of f over sides; the mean of the middle two for an even count.
func median(sides []Side, f func(Side) float64) float64 {
	v := make([]float64, len(sides))
	for i, s := range sides {
		v[i] = f(s)
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// Table formats r as a markdown table: a row per system (medians over
// the rounds), and a row of ratios river / hourglass.
func (r Result) Table() string {
	h, v := Median(r.Hourglass), Median(r.River)
	var b strings.Builder
	fmt.Fprintf(&b, "%d pending, %d/s due for %v, %d node(s) / river client(s), %d round(s), medians\n\n",
		r.Config.Pending, r.Config.Rate, r.Config.Duration, r.Config.Nodes, r.Config.Rounds)
	b.WriteString("| system | lateness p50 | p99 | max | early | delivered | insert rate (pending, jobs/s) |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	for _, s := range []Side{h, v} {
		fmt.Fprintf(&b, "| %s | %v | %v | %v | %d | %d of %d | %.0f |\n",
			s.System, round(s.P50), round(s.P99), round(s.Max), s.Early, s.Delivered, s.Due, s.InsertPerSec)
	}
	ratio := func(a, b float64) string {
		if b == 0 {
			return "–"
		}
		return fmt.Sprintf("%.1f×", a/b)
	}
	fmt.Fprintf(&b, "| river / hourglass | %s | %s | %s | | | %s |\n",
		ratio(float64(v.P50), float64(h.P50)), ratio(float64(v.P99), float64(h.P99)),
		ratio(float64(v.Max), float64(h.Max)), ratio(v.InsertPerSec, h.InsertPerSec))
	return b.String()
}

// round shortens d for a table: milliseconds with one decimal below 10 ms,
// whole milliseconds above.
func round(d time.Duration) time.Duration {
	if d < 10*time.Millisecond {
		return d.Round(100 * time.Microsecond)
	}
	return d.Round(time.Millisecond)
}
