package clusterbench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hourglass-go/hourglass/task"
)

// SteadyConfig sizes a steady-state run: a queue that runs for a long
// time, each task put, falling due, reserved and acked, so that every
// task's row is inserted, updated twice and deleted, and the table's
// dead rows are autovacuum's to clear. Zero fields take the defaults
// named.
type SteadyConfig struct {
	Duration time.Duration // default 10 min
	Window   time.Duration // of each reported figure; default 30 s
	Putters  int           // goroutines putting batches; default 4
	Batch    int           // tasks per put; default 50
	Delay    time.Duration // tasks are due uniformly within it; default 1 s
	// Backlog bounds the tasks put and not yet acked: the putters wait
	// above it, so the rate measured is the rate tasks complete at.
	// Default 20,000.
	Backlog int
	// Pending tasks are put a day ahead before the run (queue
	// bench-steady-pending) and stay in the table throughout: autovacuum's
	// thresholds grow with the table, so a large table holds more dead
	// rows between vacuums. Default 0.
	Pending int
	Logger  *slog.Logger // default: discard
}

// Window is one window of a steady-state run: tasks completed (acked)
// per second in it, and the tasks table as PostgreSQL reports it at its
// end.
type Window struct {
	End          time.Duration // since the start
	AcksPerSec   float64
	TableBytes   int64 // pg_total_relation_size: heap, indexes, TOAST
	LiveRows     int64 // n_live_tup
	DeadRows     int64 // n_dead_tup
	Autovacuums  int64 // autovacuum_count so far
	Autoanalyzes int64
}

// String formats w as one line.
func (w Window) String() string {
	return fmt.Sprintf("%6.0fs: %7.0f tasks/s  table %6.1f MiB  live %7d  dead %7d  autovacuums %d",
		w.End.Seconds(), w.AcksPerSec, float64(w.TableBytes)/(1<<20), w.LiveRows, w.DeadRows, w.Autovacuums)
}

// Steady runs one node on the database at url for cfg.Duration, putting
// tasks as fast as they complete (queue bench-steady), reserving and
// acking them, and calls report at the end of each window.
func Steady(ctx context.Context, url string, cfg SteadyConfig, report func(Window)) error {
	if cfg.Duration <= 0 {
		cfg.Duration = 10 * time.Minute
	}
	if cfg.Window <= 0 {
		cfg.Window = 30 * time.Second
	}
	if cfg.Putters <= 0 {
		cfg.Putters = 4
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 50
	}
	if cfg.Delay <= 0 {
		cfg.Delay = time.Second
	}
	if cfg.Backlog <= 0 {
		cfg.Backlog = 20_000
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	c, err := Start(ctx, url, 1, 28, cfg.Logger) // a pool of 32
	if err != nil {
		return err
	}
	defer c.Close()
	n := c.Nodes[0]

	for k := 0; k < cfg.Pending; k += 1000 {
		reqs := make([]task.PutRequest, min(1000, cfg.Pending-k))
		for i := range reqs {
			reqs[i] = task.PutRequest{Payload: []byte(`{"bench":true}`), Delay: 24 * time.Hour}
		}
		for _, r := range n.PutBatch(ctx, "bench-steady-pending", reqs) {
			if r.Err != nil {
				return r.Err
			}
		}
	}

	const queue = "bench-steady"
	rctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	var put, acked atomic.Int64
	var firstErr atomic.Value
	fail := func(err error) {
		if rctx.Err() == nil {
			firstErr.CompareAndSwap(nil, err)
			cancel()
		}
	}
	var wg sync.WaitGroup
	for p := range cfg.Putters {
		wg.Go(func() {
			reqs := make([]task.PutRequest, cfg.Batch)
			for k := 0; rctx.Err() == nil; k++ {
				if put.Load()-acked.Load() > int64(cfg.Backlog) {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				for i := range reqs {
					d := time.Duration((k*cfg.Batch + i + p) % 1000)
					reqs[i] = task.PutRequest{Payload: []byte(`{"bench":true}`), Delay: d * cfg.Delay / 1000}
				}
				for _, r := range n.PutBatch(rctx, queue, reqs) {
					if r.Err != nil {
						fail(r.Err)
						return
					}
				}
				put.Add(int64(cfg.Batch))
			}
		})
	}
	// Reservers hand what they get to ackers (an ack waits for a WAL
	// flush; see Run).
	type lease struct{ id, lease string }
	acks := make(chan lease, 10_000)
	var ackWG sync.WaitGroup
	for range ackers {
		ackWG.Go(func() {
			for a := range acks {
				errs, err := n.AckMany(ctx, []task.Ack{{Queue: queue, ID: a.id, Lease: a.lease}})
				if err == nil {
					err = errs[0]
				}
				if err != nil {
					fail(err)
				}
				acked.Add(1)
			}
		})
	}
	var resWG sync.WaitGroup
	for range 4 {
		resWG.Go(func() {
			for rctx.Err() == nil {
				tasks, err := n.ReserveQueues(rctx, []string{queue}, 100, 200*time.Millisecond)
				if err != nil {
					if rctx.Err() == nil {
						fail(err)
					}
					return
				}
				for _, t := range tasks {
					acks <- lease{t.ID, t.Lease}
				}
			}
		})
	}

	start := time.Now()
	last, lastAcked := start, int64(0)
	tick := time.NewTicker(cfg.Window)
	defer tick.Stop()
	for rctx.Err() == nil {
		select {
		case <-rctx.Done():
		case now := <-tick.C:
			k := acked.Load()
			w := Window{End: now.Sub(start), AcksPerSec: float64(k-lastAcked) / now.Sub(last).Seconds()}
			last, lastAcked = now, k
			err := c.admin.QueryRow(ctx, `SELECT pg_total_relation_size('hourglass_tasks'), n_live_tup, n_dead_tup,
					autovacuum_count, autoanalyze_count
				FROM pg_stat_user_tables WHERE relname = 'hourglass_tasks'`).Scan(
				&w.TableBytes, &w.LiveRows, &w.DeadRows, &w.Autovacuums, &w.Autoanalyzes)
			if err != nil {
				fail(err)
				break
			}
			report(w)
		}
	}
	wg.Wait()
	resWG.Wait()
	close(acks)
	ackWG.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return err
	}
	return nil
}
