// Package clusterbench measures a cluster of nodes (package cluster) on
// one PostgreSQL database: durable puts per second through single puts
// and batches, and delivery lateness from due to delivered with tasks
// pending and falling due at a steady rate. The hourglass bench command's
// cluster scenario calls [Run]; the nodes run in this process, each on a
// pool of its own, as separate processes would.
package clusterbench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hourglass-go/hourglass/broker"
	"github.com/hourglass-go/hourglass/cluster"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ackers is the number of goroutines acking deliveries, per node.
const ackers = 16

// Config sizes a run. Zero fields take the defaults named.
type Config struct {
	Nodes    int           // default 3
	Clients  int           // concurrent putters; default 64
	Duration time.Duration // of each put phase; default 5 s
	Batch    int           // tasks per batch; default 100
	// Pending tasks put far in the future before the lateness phase, and
	// the rate (tasks/s) falling due during it; defaults 100k and 1000/s.
	Pending int
	Rate    int
	// LatenessOnly skips the put phases.
	LatenessOnly bool
	Logger       *slog.Logger // default: discard
}

// Result holds the figures of one run.
type Result struct {
	Nodes                  int
	SinglePutsPerSec       float64 // one task per call, Clients concurrent
	BatchPutsPerSec        float64 // Batch tasks per call, Clients/8 concurrent
	Pending                int
	PendingPutsPerSec      float64 // the Pending tasks put in batches of 1000, a putter per node
	Rate                   int
	Delivered              int
	Early                  int
	LateP50, LateP99, Late time.Duration // Late is the maximum
}

// String formats r as a few lines of text.
func (r Result) String() string {
	return fmt.Sprintf("nodes %d: single puts %.0f/s, batch puts %.0f/s; lateness with %d pending, %d/s due: %d delivered, %d early, p50 %v p99 %v max %v",
		r.Nodes, r.SinglePutsPerSec, r.BatchPutsPerSec, r.Pending, r.Rate, r.Delivered, r.Early, r.LateP50, r.LateP99, r.Late)
}

// Run starts cfg.Nodes nodes on the database at url (which it fills with
// tasks in queues named bench-*) and measures. It closes the nodes
// before returning.
func Run(ctx context.Context, url string, cfg Config) (Result, error) {
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
	var nodes []*cluster.Node
	var pools []*pgxpool.Pool
	defer func() {
		for _, n := range nodes {
			n.Close()
		}
		for _, p := range pools {
			p.Close()
		}
	}()
	for i := range cfg.Nodes {
		pc, err := pgxpool.ParseConfig(url)
		if err != nil {
			return Result{}, err
		}
		pc.MaxConns = int32(max(4, cfg.Clients/cfg.Nodes+4))
		pool, err := pgxpool.NewWithConfig(ctx, pc)
		if err != nil {
			return Result{}, err
		}
		pools = append(pools, pool)
		n, err := cluster.Open(ctx, pool, cluster.Options{Node: fmt.Sprintf("bench-%d", i), Logger: cfg.Logger})
		if err != nil {
			return Result{}, err
		}
		nodes = append(nodes, n)
	}
	res := Result{Nodes: cfg.Nodes, Pending: cfg.Pending, Rate: cfg.Rate}

	// Puts: each client on node i%Nodes, in a loop for Duration.
	phase := func(clients, per int, queue string) (float64, error) {
		var done atomic.Int64
		var firstErr atomic.Value
		end := time.Now().Add(cfg.Duration)
		var wg sync.WaitGroup
		start := time.Now()
		for c := range clients {
			n := nodes[c%len(nodes)]
			wg.Go(func() {
				reqs := make([]broker.PutRequest, per)
				for time.Now().Before(end) {
					for i := range reqs {
						reqs[i] = broker.PutRequest{Payload: []byte(`{"bench":true}`), Delay: time.Hour}
					}
					for _, r := range n.PutBatch(ctx, queue, reqs) {
						if r.Err != nil {
							firstErr.CompareAndSwap(nil, r.Err)
							return
						}
					}
					done.Add(int64(per))
				}
			})
		}
		wg.Wait()
		if err, _ := firstErr.Load().(error); err != nil {
			return 0, err
		}
		return float64(done.Load()) / time.Since(start).Seconds(), nil
	}
	if !cfg.LatenessOnly {
		var err error
		if res.SinglePutsPerSec, err = phase(cfg.Clients, 1, "bench-single"); err != nil {
			return res, err
		}
		if res.BatchPutsPerSec, err = phase(max(1, cfg.Clients/8), cfg.Batch, "bench-batch"); err != nil {
			return res, err
		}
	}

	// Lateness: Pending tasks far ahead (put in batches of 1000, a
	// putter per node), then Rate/s due over Duration, with reservers
	// waiting on every node.
	var pendWG sync.WaitGroup
	var pendErr atomic.Value
	pendStart := time.Now()
	for i, n := range nodes {
		pendWG.Go(func() {
			for k := i * 1000; k < cfg.Pending; k += 1000 * len(nodes) {
				reqs := make([]broker.PutRequest, min(1000, cfg.Pending-k))
				for i := range reqs {
					reqs[i] = broker.PutRequest{Delay: 24 * time.Hour}
				}
				for _, r := range n.PutBatch(ctx, "bench-late", reqs) {
					if r.Err != nil {
						pendErr.CompareAndSwap(nil, r.Err)
						return
					}
				}
			}
		})
	}
	pendWG.Wait()
	if err, _ := pendErr.Load().(error); err != nil {
		return res, err
	}
	res.PendingPutsPerSec = float64(cfg.Pending) / time.Since(pendStart).Seconds()
	count := int(cfg.Duration.Seconds() * float64(cfg.Rate))
	lead := time.Second // each batch is put a second ahead of its due times
	start := time.Now().Add(lead)
	var mu sync.Mutex
	var late []time.Duration
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// On every node: 4 reservers waiting, and ackers beside them, so that
	// the reservers go back to waiting at once (an ack waits for a WAL
	// flush; a reserver acking its own tasks one by one falls behind
	// thousands a second).
	var wg, ackWG sync.WaitGroup
	type acked struct {
		n     *cluster.Node
		id    string
		lease string
	}
	acks := make(chan acked, 100_000)
	for range ackers * len(nodes) {
		ackWG.Go(func() {
			for a := range acks {
				a.n.Ack(ctx, "bench-due", a.id, a.lease)
			}
		})
	}
	defer func() {
		close(acks)
		ackWG.Wait()
	}()
	for _, n := range nodes {
		for range 4 {
			wg.Go(func() {
				for rctx.Err() == nil {
					ts, err := n.Reserve(rctx, "bench-due", 100, time.Second)
					now := time.Now()
					if err != nil {
						continue
					}
					mu.Lock()
					for _, t := range ts {
						late = append(late, now.Sub(t.Due))
					}
					mu.Unlock()
					for _, t := range ts {
						acks <- acked{n, t.ID, t.Lease}
					}
				}
			})
		}
	}
	// Put the due tasks in batches of 100, each due at its slot, each
	// batch a lead ahead of its first due time: a steady Rate of puts
	// beside the Rate falling due.
	step := time.Second / time.Duration(cfg.Rate)
	for k := 0; k < count; k += 100 {
		first := start.Add(time.Duration(k) * step)
		time.Sleep(time.Until(first.Add(-lead)))
		var reqs []broker.PutRequest
		for j := k; j < min(k+100, count); j++ {
			reqs = append(reqs, broker.PutRequest{At: start.Add(time.Duration(j) * step)})
		}
		for _, r := range nodes[k/100%len(nodes)].PutBatch(ctx, "bench-due", reqs) {
			if r.Err != nil {
				return res, r.Err
			}
		}
	}
	deadline := start.Add(cfg.Duration + 10*time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		k := len(late)
		mu.Unlock()
		if k >= count {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	slices.Sort(late)
	res.Delivered = len(late)
	for _, l := range late {
		if l < 0 {
			res.Early++
		}
	}
	if len(late) > 0 {
		res.LateP50, res.LateP99, res.Late = late[len(late)/2], late[len(late)*99/100], late[len(late)-1]
	}
	return res, nil
}
