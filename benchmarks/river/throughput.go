package riverbench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/client"
	"github.com/hourglass-go/hourglass/httpapi"
	"github.com/hourglass-go/hourglass/internal/clusterbench"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/worker"
)

// The throughput comparison: how many ready jobs a worker works per
// second on one PostgreSQL server, hourglass's Go worker (package worker)
// through one cluster node against river's worker. Each side, in turn,
// on a fresh database of the same server, in this process:
//
//   - hourglass: one node (internal/clusterbench, a pool of 68
//     connections) behind its HTTP API (package httpapi) on a loopback
//     port; Jobs ready tasks of a 200-byte payload put by batches of 1000
//     from 4 clients; then worker.New(c, Options{Concurrency: Workers})
//     with a handler that returns nil (each task acked, batched through
//     POST /v1/acks);
//   - river: river's schema migrated, Jobs available jobs of the same
//     payload inserted by InsertManyFast (COPY FROM) in batches of 1000
//     from 4 goroutines; then a client (a pool of 68 connections) with
//     MaxWorkers Workers whose Work returns nil (river completes jobs in
//     batches too), once with river's defaults and once with
//     FetchCooldown at its least, 1 ms: river fetches at most MaxWorkers
//     jobs per fetch and at most once per FetchCooldown (100 ms by
//     default), which caps 64 workers at 640 jobs/s with its defaults.
//
// A side works from the moment its workers start until every job is done
// or Duration has passed; jobs/s is the jobs its handlers returned from
// over that time.

// ThroughputConfig sizes a throughput comparison. Zero fields take the
// defaults named.
type ThroughputConfig struct {
	Jobs     int           // ready jobs put before the workers start; default 100k
	Workers  int           // the hourglass worker's Concurrency, river's MaxWorkers; default 64
	Duration time.Duration // the longest a side works; default 10 s
	Rounds   int           // each side runs once per round, a different one first each round; default 1
}

func (c *ThroughputConfig) defaults() {
	if c.Jobs <= 0 {
		c.Jobs = 100_000
	}
	if c.Workers <= 0 {
		c.Workers = 64
	}
	if c.Duration <= 0 {
		c.Duration = 10 * time.Second
	}
	if c.Rounds <= 0 {
		c.Rounds = 1
	}
}

// Sizes of the throughput comparison's fill.
const (
	throughputBatch   = 1000 // jobs per batch put
	throughputPutters = 4    // goroutines putting batches at once
	throughputPayload = 200  // bytes of a job's payload, as JSON
	throughputQueue   = "bench_throughput"
)

// Rate holds one side's figures of one round.
type Rate struct {
	System       string
	Jobs         int
	InsertPerSec float64 // the Jobs put before the workers start
	Worked       int     // jobs whose handler returned nil
	PerSec       float64 // Worked per second of work
}

// String formats r on one line.
func (r Rate) String() string {
	return fmt.Sprintf("%s: %d ready put at %.0f/s; %d worked at %.0f/s", r.System, r.Jobs, r.InsertPerSec, r.Worked, r.PerSec)
}

// ThroughputResult holds every round of every side: hourglass, river,
// river with FetchCooldown 1 ms, in that order whichever ran first.
type ThroughputResult struct {
	Config ThroughputConfig
	Rounds [][]Rate
}

// CompareThroughput runs cfg.Rounds rounds of the three sides, each on a
// database of its own that newDatabase creates (and returns the URL of)
// on the same server. log, if not nil, receives a line per side and
// round.
func CompareThroughput(ctx context.Context, newDatabase func() string, cfg ThroughputConfig, log func(string)) (ThroughputResult, error) {
	cfg.defaults()
	res := ThroughputResult{Config: cfg}
	sides := []func(url string) (Rate, error){
		func(url string) (Rate, error) { return hourglassThroughput(ctx, url, cfg) },
		func(url string) (Rate, error) { return riverThroughput(ctx, url, cfg, 0) },
		func(url string) (Rate, error) { return riverThroughput(ctx, url, cfg, river.FetchCooldownMin) },
	}
	for k := range cfg.Rounds {
		// Round k starts with side k (mod 3), so that no side always
		// runs first or last; a round keeps the sides in their order.
		round := make([]Rate, len(sides))
		for j := range sides {
			i := (k + j) % len(sides)
			r, err := sides[i](newDatabase())
			if err != nil {
				return res, fmt.Errorf("%s: %w", r.System, err)
			}
			if log != nil {
				log(r.String())
			}
			round[i] = r
		}
		res.Rounds = append(res.Rounds, round)
	}
	return res, nil
}

// Table formats r as a markdown table: a row per side (medians over the
// rounds), each with its ratio to hourglass's jobs/s.
func (r ThroughputResult) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d ready jobs, %d workers, at most %v per side, %d round(s), medians\n\n",
		r.Config.Jobs, r.Config.Workers, r.Config.Duration, r.Config.Rounds)
	b.WriteString("| system | jobs/s | / hourglass | worked | insert rate (jobs/s) |\n")
	b.WriteString("|---|---|---|---|---|\n")
	if len(r.Rounds) == 0 {
		return b.String()
	}
	var base float64
	for i, s := range r.Rounds[0] {
		// col is the median of f over the rounds of side i.
		col := func(f func(Rate) float64) float64 {
			v := make([]float64, len(r.Rounds))
			for k, round := range r.Rounds {
				v[k] = f(round[i])
			}
			slices.Sort(v)
			if len(v)%2 == 1 {
				return v[len(v)/2]
			}
			return (v[len(v)/2-1] + v[len(v)/2]) / 2
		}
		perSec := col(func(r Rate) float64 { return r.PerSec })
		if i == 0 {
			base = perSec
		}
		ratio := "–"
		if base > 0 {
			ratio = fmt.Sprintf("%.2f×", perSec/base)
		}
		fmt.Fprintf(&b, "| %s | %.0f | %s | %.0f | %.0f |\n", s.System, perSec, ratio,
			col(func(r Rate) float64 { return float64(r.Worked) }), col(func(r Rate) float64 { return r.InsertPerSec }))
	}
	return b.String()
}

// payload returns a job's payload: a JSON string of throughputPayload
// bytes, quotes included.
func payload() string {
	return `"` + strings.Repeat("x", throughputPayload-2) + `"`
}

// counter counts the jobs a side's handlers finish and closes done at
// target.
type counter struct {
	n      atomic.Int64
	target int64
	done   chan struct{}
}

func newCounter(target int) *counter {
	return &counter{target: int64(target), done: make(chan struct{})}
}

func (c *counter) add() {
	if c.n.Add(1) == c.target {
		close(c.done)
	}
}

// wait waits until the target is reached or d has passed since start,
// and returns the count and the jobs per second.
func (c *counter) wait(ctx context.Context, start time.Time, d time.Duration) (int, float64, error) {
	t := time.NewTimer(time.Until(start.Add(d)))
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	}
	n := c.n.Load()
	return int(n), float64(n) / time.Since(start).Seconds(), nil
}

// putAll calls put for every batch of [throughputBatch] of n jobs (from,
// count) from throughputPutters goroutines, and returns the rate.
func putAll(n int, put func(from, count int) error) (float64, error) {
	var next atomic.Int64
	errs := make([]error, throughputPutters)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range throughputPutters {
		wg.Go(func() {
			for {
				from := int(next.Add(throughputBatch)) - throughputBatch
				if from >= n {
					return
				}
				if errs[i] = put(from, min(throughputBatch, n-from)); errs[i] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// hourglassThroughput is hourglass's side on the empty database at url.
func hourglassThroughput(ctx context.Context, url string, cfg ThroughputConfig) (Rate, error) {
	res := Rate{System: "hourglass", Jobs: cfg.Jobs}
	quiet := slog.New(slog.DiscardHandler)
	// The node's pool as clusterbench sizes it for 64 callers: river's
	// below is the same.
	cl, err := clusterbench.Start(ctx, url, 1, 64, quiet)
	if err != nil {
		return res, err
	}
	defer cl.Close()
	hs := httpapi.New(httpapi.Options{Gatherer: prometheus.NewRegistry(), Logger: quiet})
	hs.SetService(service.New(cl.Nodes[0]))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return res, err
	}
	srv := &http.Server{Handler: hs}
	go srv.Serve(ln)
	defer func() {
		hs.Drain()
		srv.Close()
	}()
	tr := &http.Transport{MaxIdleConnsPerHost: 1024, DisableCompression: true}
	defer tr.CloseIdleConnections()
	c, err := client.New("http://"+ln.Addr().String(), client.Options{HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		return res, err
	}

	batch := make([]api.PutRequest, throughputBatch)
	for i := range batch {
		batch[i].Payload = json.RawMessage(payload())
	}
	if res.InsertPerSec, err = putAll(cfg.Jobs, func(_, count int) error {
		results, err := c.PutBatch(ctx, throughputQueue, batch[:count])
		for _, r := range results {
			if r.Error != "" && err == nil {
				err = errors.New(r.Error)
			}
		}
		return err
	}); err != nil {
		return res, err
	}

	done := newCounter(cfg.Jobs)
	w := worker.New(c, worker.Options{Concurrency: cfg.Workers, Logger: quiet})
	w.Handle(throughputQueue, func(context.Context, *worker.Task) error {
		done.add()
		return nil
	})
	wctx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	start := time.Now()
	go func() { ran <- w.Run(wctx) }()
	res.Worked, res.PerSec, err = done.wait(ctx, start, cfg.Duration)
	stop()
	if runErr := <-ran; err == nil {
		err = runErr
	}
	return res, err
}

// workArgs is the throughput comparison's river job.
type workArgs struct {
	Payload string `json:"payload"`
}

// Kind names the job kind to river.
func (workArgs) Kind() string { return "hourglass_bench_work" }

// countWorker completes each job, counting it.
type countWorker struct {
	river.WorkerDefaults[workArgs]
	done *counter
}

// Work counts job.
func (w *countWorker) Work(context.Context, *river.Job[workArgs]) error {
	w.done.add()
	return nil
}

// riverThroughput is river's side on the empty database at url, with
// FetchCooldown cooldown (0: river's default).
func riverThroughput(ctx context.Context, url string, cfg ThroughputConfig, cooldown time.Duration) (Rate, error) {
	res := Rate{System: "river", Jobs: cfg.Jobs}
	if cooldown > 0 {
		res.System = fmt.Sprintf("river, FetchCooldown %v", cooldown)
	}
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		return res, err
	}
	pc.MaxConns = 64 + 4 // as clusterbench sizes a node's pool for 64 callers
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return res, err
	}
	defer pool.Close()
	m, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return res, err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return res, fmt.Errorf("migrate: %w", err)
	}
	done := newCounter(cfg.Jobs)
	workers := river.NewWorkers()
	river.AddWorker(workers, &countWorker{done: done})
	rc := &river.Config{
		Logger:  slog.New(slog.DiscardHandler),
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: cfg.Workers}},
		Workers: workers,
	}
	if cooldown > 0 {
		rc.FetchCooldown = cooldown
	}
	c, err := river.NewClient(riverpgxv5.New(pool), rc)
	if err != nil {
		return res, err
	}

	args := workArgs{Payload: strings.Repeat("x", throughputPayload-2)}
	batch := make([]river.InsertManyParams, throughputBatch)
	for i := range batch {
		batch[i] = river.InsertManyParams{Args: args}
	}
	if res.InsertPerSec, err = putAll(cfg.Jobs, func(_, count int) error {
		_, err := c.InsertManyFast(ctx, batch[:count])
		return err
	}); err != nil {
		return res, err
	}

	start := time.Now()
	if err := c.Start(ctx); err != nil {
		return res, err
	}
	res.Worked, res.PerSec, err = done.wait(ctx, start, cfg.Duration)
	stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if stopErr := c.Stop(stopCtx); err == nil {
		err = stopErr
	}
	return res, err
}
