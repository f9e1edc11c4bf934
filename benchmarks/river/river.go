package riverbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// dueArgs is the one kind of job: Due is its due time in Unix nanoseconds,
// the same instant as its ScheduledAt (which the database keeps to the
// microsecond).
type dueArgs struct {
	Due int64 `json:"due"`
}

// Kind names the job kind to river.
func (dueArgs) Kind() string { return "hourglass_bench_due" }

// recorder collects the lateness of each job a worker starts.
type recorder struct {
	mu   sync.Mutex
	late []time.Duration
}

func (r *recorder) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.late)
}

// dueWorker records how late each job starts, and completes it.
type dueWorker struct {
	river.WorkerDefaults[dueArgs]
	rec *recorder
}

// Work records the lateness of job.
func (w *dueWorker) Work(ctx context.Context, job *river.Job[dueArgs]) error {
	now := time.Now()
	w.rec.mu.Lock()
	w.rec.late = append(w.rec.late, now.Sub(time.Unix(0, job.Args.Due)))
	w.rec.mu.Unlock()
	return nil
}

// runRiver runs river's side on the empty database at url: it migrates
// river's schema, starts cfg.Nodes clients, puts the pending jobs and then
// the stream as [Compare] describes, and stops the clients.
func runRiver(ctx context.Context, url string, cfg Config) (Side, error) {
	res := Side{System: "river", Pending: cfg.Pending, Rate: cfg.Rate}
	var pools []*pgxpool.Pool
	var clients []*river.Client[pgx.Tx]
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, c := range clients {
			c.Stop(stopCtx)
		}
		for _, p := range pools {
			p.Close()
		}
	}()
	rec := &recorder{}
	workers := river.NewWorkers()
	river.AddWorker(workers, &dueWorker{rec: rec})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for i := range cfg.Nodes {
		pc, err := pgxpool.ParseConfig(url)
		if err != nil {
			return res, err
		}
		// As clusterbench sizes a node's pool with its default 64 clients.
		pc.MaxConns = int32(max(4, 64/cfg.Nodes+4))
		pool, err := pgxpool.NewWithConfig(ctx, pc)
		if err != nil {
			return res, err
		}
		pools = append(pools, pool)
		if i == 0 {
			m, err := rivermigrate.New(riverpgxv5.New(pool), nil)
			if err != nil {
				return res, err
			}
			if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
				return res, fmt.Errorf("migrate: %w", err)
			}
		}
		c, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
			ID:      fmt.Sprintf("bench-%d", i),
			Logger:  quiet,
			Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: cfg.Workers}},
			Workers: workers,
		})
		if err != nil {
			return res, err
		}
		if err := c.Start(ctx); err != nil {
			return res, err
		}
		clients = append(clients, c)
	}

	// Pending: batches of 1000 a day ahead, an inserter per client.
	far := time.Now().Add(24 * time.Hour)
	var wg sync.WaitGroup
	errs := make([]error, len(clients))
	start := time.Now()
	for i, c := range clients {
		wg.Go(func() {
			for k := i * 1000; k < cfg.Pending; k += 1000 * len(clients) {
				params := make([]river.InsertManyParams, min(1000, cfg.Pending-k))
				for j := range params {
					params[j] = river.InsertManyParams{Args: dueArgs{Due: far.UnixNano()}, InsertOpts: &river.InsertOpts{ScheduledAt: far}}
				}
				if _, err := c.InsertManyFast(ctx, params); err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return res, err
	}
	res.InsertPerSec = float64(cfg.Pending) / time.Since(start).Seconds()

	// The scheduler runs on the elected leader only: wait for one.
	for {
		var leaders int
		if err := pools[0].QueryRow(ctx, `SELECT count(*) FROM river_leader`).Scan(&leaders); err != nil {
			return res, err
		}
		if leaders > 0 {
			break
		}
		if time.Since(start) > time.Minute {
			return res, errors.New("no leader elected within a minute")
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The stream, as clusterbench puts it: batches of 100, each due at its
	// slot, each batch a second ahead of its first due time.
	count := int(cfg.Duration.Seconds() * float64(cfg.Rate))
	res.Due = count
	lead := time.Second
	first := time.Now().Add(lead)
	step := time.Second / time.Duration(cfg.Rate)
	for k := 0; k < count; k += 100 {
		at := first.Add(time.Duration(k) * step)
		time.Sleep(time.Until(at.Add(-lead)))
		var params []river.InsertManyParams
		for j := k; j < min(k+100, count); j++ {
			due := first.Add(time.Duration(j) * step)
			params = append(params, river.InsertManyParams{Args: dueArgs{Due: due.UnixNano()}, InsertOpts: &river.InsertOpts{ScheduledAt: due}})
		}
		if _, err := clients[k/100%len(clients)].InsertManyFast(ctx, params); err != nil {
			return res, err
		}
	}
	deadline := first.Add(cfg.Duration + 20*time.Second)
	for rec.len() < count && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}

	rec.mu.Lock()
	late := slices.Clone(rec.late)
	rec.mu.Unlock()
	slices.Sort(late)
	res.Delivered = len(late)
	for _, l := range late {
		if l < 0 {
			res.Early++
		}
	}
	if len(late) > 0 {
		res.P50, res.P99, res.Max = late[len(late)/2], late[len(late)*99/100], late[len(late)-1]
	}
	return res, nil
}
