package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hourglass-go/hourglass/client"
	"github.com/hourglass-go/hourglass/internal/pgtest"
	"github.com/hourglass-go/hourglass/worker"
)

// The worker scenario's servers and load: `hourglass serve` processes
// (one on the embedded store, or nodes of one cluster on a PostgreSQL
// database the bench starts), filled with ready tasks by batches, and
// package worker's Worker run in this process against them, one per
// server, with handlers that count what they run.

// Shape of the worker scenario's load.
const (
	workerHandlers = 64   // Options.Concurrency of each worker
	workerBatch    = 1000 // tasks per tasks:batch of a fill (api.MaxBatch)
	workerFillers  = 4    // clients putting the batches of a fill at once
	workerBodies   = 8    // different batch bodies a fill takes turns with
	// workerStopTimeout bounds a worker's drain once its context is done:
	// its handlers return at once, and its last acks are one request.
	workerStopTimeout = 30 * time.Second
)

// workerServers is the hourglass servers one row of the worker scenario
// measures: one on the embedded store, or the nodes of one cluster, and a
// client of each. close stops them and removes what they stored. It is
// used by one goroutine at a time; its clients are safe for concurrent
// use.
type workerServers struct {
	procs   []*serveProcess
	clients []*client.Client
	// pg is the PostgreSQL server of a cluster; nil for the embedded
	// store.
	pg *pgtest.Server
	// calls counts the clients' reserve and ack requests.
	calls callCounts
	close func()
}

// callCounts counts the reserve requests (POST …/reserve) and the
// batched acks (POST /v1/acks) that clients send, so that a row can tell
// how many tasks each carried. It is safe for concurrent use.
type callCounts struct {
	reserves, acks atomic.Int64
}

// countingTransport is an http.RoundTripper that counts into counts the
// requests it sends on to next.
type countingTransport struct {
	next   http.RoundTripper
	counts *callCounts
}

// RoundTrip counts r and sends it on.
func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	switch {
	case strings.HasSuffix(r.URL.Path, "/reserve"):
		t.counts.reserves.Add(1)
	case r.URL.Path == "/v1/acks":
		t.counts.acks.Add(1)
	}
	return t.next.RoundTrip(r)
}

// startWorkerServers starts `hourglass serve` (bin): with nodes = 0 one
// server on the embedded store in a temporary directory, otherwise nodes
// nodes of one cluster on a database of a PostgreSQL server it starts. A
// missing PostgreSQL is a note, not an error.
func startWorkerServers(bin string, nodes int) (_ *workerServers, note string, err error) {
	s := &workerServers{}
	var cleanup []func() // run in reverse by close
	s.close = func() {
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
	}
	defer func() {
		if err != nil || note != "" {
			s.close()
		}
	}()
	if nodes == 0 {
		dir, err := os.MkdirTemp("", "hourglass-bench-worker-")
		if err != nil {
			return nil, "", err
		}
		cleanup = append(cleanup, func() { os.RemoveAll(dir) })
		s.procs = []*serveProcess{newServeProcess(bin, filepath.Join(dir, "data"))}
	} else {
		pg, err := pgtest.Launch(pgtest.Set("max_connections", "400"))
		if errors.Is(err, pgtest.ErrNoBinaries) {
			return nil, "skipped: " + err.Error(), nil
		}
		if err != nil {
			return nil, "", err
		}
		s.pg = pg
		cleanup = append(cleanup, pg.Close)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		url, err := pg.NewDatabase(ctx)
		if err != nil {
			return nil, "", err
		}
		for i := range nodes {
			s.procs = append(s.procs, newNodeProcess(bin, url, fmt.Sprintf("bench-worker-%d", i+1)))
		}
	}
	for _, p := range s.procs {
		cleanup = append(cleanup, p.stop)
		if _, err := p.start(); err != nil {
			return nil, "", err
		}
		hc := &http.Client{Transport: countingTransport{next: p.hc.Transport, counts: &s.calls}}
		c, err := client.New("http://"+p.addr, client.Options{HTTPClient: hc})
		if err != nil {
			return nil, "", err
		}
		s.clients = append(s.clients, c)
	}
	return s, "", nil
}

// cpu returns the CPU time the servers have used so far: the hourglass
// processes', and PostgreSQL's apart (0 without one).
func (s *workerServers) cpu() (hourglass, postgres time.Duration, err error) {
	for _, p := range s.procs {
		t, err := processCPU(p.cmd.Process.Pid)
		if err != nil {
			return 0, 0, err
		}
		hourglass += t
	}
	if s.pg != nil {
		if postgres, err = postgresCPU(s.pg.Dir); err != nil {
			return 0, 0, err
		}
	}
	return hourglass, postgres, nil
}

// alive returns an error if a server has exited.
func (s *workerServers) alive() error {
	for _, p := range s.procs {
		if err := p.alive(); err != nil {
			return err
		}
	}
	return nil
}

// workerBodyset makes the fill's batch bodies once, from a fixed seed:
// workerBodies batches of workerBatch ready tasks, each a 200-byte
// payload (servePayload) and nothing else.
var workerBodyset = sync.OnceValue(func() (out serveBodySet) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range workerBodies * workerBatch {
		out.tasks = append(out.tasks, []byte(`{"payload":`+servePayload(rng)+`}`))
	}
	for i := range workerBodies {
		out.batches = append(out.batches, serveBatchJSON(out.tasks[i*workerBatch:(i+1)*workerBatch]))
	}
	return out
})

// fill puts n ready tasks into queue through the first server, by
// batches of workerBatch from workerFillers clients, and returns the
// rate.
func (s *workerServers) fill(queue string, n int) (float64, error) {
	return s.procs[0].fillQueue(queue, n, workerBodyset(), workerFillers, fillTimeout(n))
}

// left returns how many tasks of queue are not done yet: ready, reserved
// or delayed, from GET /v1/queues of the first server.
func (s *workerServers) left(queue string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	qs, err := s.clients[0].Queues(ctx)
	if err != nil {
		return 0, err
	}
	for _, q := range qs {
		if q.Name == queue {
			return q.Ready + q.Reserved + q.Delayed, nil
		}
	}
	return 0, nil
}

// workerPool is one [worker.Worker] per client, all working one queue
// with the same handler, which counts the tasks it starts and ends and
// the most it ran at once across the workers. Its counters are safe for
// concurrent use; start and stop are called once each, in that order.
type workerPool struct {
	started, handled, running, maxRunning atomic.Int64

	begin  time.Time // when the workers were started
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// failed receives the error of the first worker whose Run returns
	// before stop.
	failed chan error
	// done is closed once target tasks are handled.
	done chan struct{}
}

// startWorkers starts a worker with workerHandlers handlers on each of
// clients, working queue: each task runs work, and is handled (acked)
// when work returns nil. done closes after target tasks (0: never).
func startWorkers(clients []*client.Client, queue string, target int64, work func(context.Context) error) *workerPool {
	return startTaskWorkers(clients, queue, target, func(ctx context.Context, _ *worker.Task) error { return work(ctx) })
}

// startTaskWorkers is startWorkers with a work function that sees the
// task.
func startTaskWorkers(clients []*client.Client, queue string, target int64, work func(context.Context, *worker.Task) error) *workerPool {
	ctx, cancel := context.WithCancel(context.Background())
	p := &workerPool{begin: time.Now(), cancel: cancel, failed: make(chan error, len(clients)), done: make(chan struct{})}
	handle := func(ctx context.Context, t *worker.Task) error {
		p.started.Add(1)
		now := p.running.Add(1)
		for m := p.maxRunning.Load(); now > m && !p.maxRunning.CompareAndSwap(m, now); m = p.maxRunning.Load() {
		}
		err := work(ctx, t)
		p.running.Add(-1)
		if err == nil && p.handled.Add(1) == target {
			close(p.done)
		}
		return err
	}
	for _, c := range clients {
		// The bench's output is its table: what a worker would log (a
		// retried call) shows in the figures.
		w := worker.New(c, worker.Options{Concurrency: workerHandlers, Logger: slog.New(slog.DiscardHandler)})
		w.Handle(queue, handle)
		p.wg.Go(func() {
			err := w.Run(ctx)
			if ctx.Err() == nil {
				if err == nil {
					err = errors.New("bench: worker: Run returned before its context was done")
				}
				p.failed <- err
			}
		})
	}
	return p
}

// wait waits until target tasks are handled, d has passed since the
// workers started, or a worker failed, and returns the time since the
// start.
func (p *workerPool) wait(d time.Duration) (time.Duration, error) {
	t := time.NewTimer(time.Until(p.begin.Add(d)))
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
	case err := <-p.failed:
		return time.Since(p.begin), err
	}
	return time.Since(p.begin), nil
}

// stop cancels the workers' context and waits for every Run to return,
// at most workerStopTimeout.
func (p *workerPool) stop() error {
	p.cancel()
	stopped := make(chan struct{})
	go func() {
		p.wg.Wait()
		close(stopped)
	}()
	select {
	case <-stopped:
		return nil
	case <-time.After(workerStopTimeout):
		return fmt.Errorf("bench: worker: Run had not returned %v after its context was done", workerStopTimeout)
	}
}
