package bench

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/internal/loadgen"
)

// workerScenario measures package worker, the Go worker, working the
// tasks of `hourglass serve` (the hourglass binary, see --hourglass), side by side
// with beanstalkd's workers in one run. Every row starts its servers
// afresh and stops them when done. Its rows:
//
//   - beanstalkd, reserve→delete ×64: the beanstalk scenario's row on n
//     ready 200-byte jobs (its functions, run here for the ratio): round
//     trips/s of 64 workers until the time is up or the tube is empty;
//   - hourglass, worker ×64: n ready 200-byte tasks put by batches of
//     1000 from 4 clients, and once the store has run no compaction for
//     2 s (serveProcess.atRest), worker.New(c, Options{Concurrency: 64})
//     in this process with a handler that returns nil at once (every
//     task acked, batched through POST /v1/acks), until it has handled
//     all n or the time is up: tasks/s, and its ratio to beanstalkd's;
//   - 1 node, worker ×64: the same through one `hourglass serve
//     --postgres` node on a PostgreSQL server the bench starts
//     (internal/pgtest); river's worker on the same PostgreSQL is
//     measured in benchmarks/river (its README);
//   - rate 1k/s, on the embedded store and on 3 nodes: a queue with the
//     policy rate {limit 1000, per 1s} (burst 1000), one worker of 64
//     handlers per server; after a second (the burst), the tasks its
//     handlers start over the next L are the handed-out rate, and its
//     deviation from 1000/s;
//   - concurrency 10, on the embedded store and on 3 nodes (one worker
//     per node): a queue with the policy concurrency 10 and handlers that
//     sleep 5 ms (at most 2000 tasks/s): the most handlers running at
//     once across the workers, which must not exceed 10, over L.
//
// n is the largest of the sizes (1M full, 100k quick); the throughput
// rows last at most 10× Budget (10 s full, 1.5 s quick), the limit rows
// L = 10× Budget, at least 1 s. CPU/task is the hourglass servers' CPU
// time per task over the measurement (from /proc), PG CPU/task
// PostgreSQL's, client CPU/task this process's (the worker's side), as in
// the beanstalk scenario; tasks/reserve and tasks/ack call are the tasks
// handled per reserve request and per POST /v1/acks the workers sent. A
// server that refuses a policy (an engine
// without rate or concurrency limits yet) makes its row a note. The
// scenario runs only when named (--scenario worker).
var workerScenario = Scenario{
	Name: "worker",
	Doc: "package worker (worker.New(c, Options{Concurrency: 64}), in this process) against `hourglass serve` (the hourglass binary, see --hourglass), each row on servers started afresh, 200-byte payloads: " +
		"worker ×64: n ready tasks put by batches of 1000 (on the embedded store, then no compaction for 2 s), then handlers that return nil at once (acks batched through POST /v1/acks) until all n are handled or the time is up, tasks/s = handled / time, on the embedded store (hourglass) and through one `serve --postgres` node on a PostgreSQL the bench starts (1 node; river's worker on the same PostgreSQL: benchmarks/river); " +
		"beside it beanstalkd's reserve→delete ×64 on n ready jobs (the beanstalk scenario's row; × beanstalkd = the worker's tasks/s over it); " +
		"rate 1k/s: policy rate {limit 1000, per 1s}, one worker of 64 handlers per server, tasks/s = handlers started per second over 10 s (1.5 s quick) after a first second that takes the burst, deviation = tasks/s over 1000/s − 1; " +
		"concurrency 10: policy concurrency 10, handlers that sleep 5 ms, max running = the most handlers running at once across the workers, which must stay ≤ 10; " +
		"CPU/task = the hourglass servers' CPU time (user + system, from /proc) over the measurement per task, PG CPU/task the same of PostgreSQL, client CPU/task of this process; tasks/reserve and tasks/ack call = tasks handled per reserve request and per POST /v1/acks the workers sent",
	jobs: workerJobs,
}

// Limits of the worker scenario's policy rows.
const (
	workerRateLimit   = 1000 // tasks per second
	workerConcurrency = 10   // tasks reserved at once
	workerSleep       = 5 * time.Millisecond
	// workerRateWarm is how long the rate row runs before it counts: the
	// bucket's burst (a second's worth) goes out in its first moments.
	workerRateWarm = time.Second
	// workerLimitNodes is the cluster's size in the policy rows.
	workerLimitNodes = 3
)

// WorkerOptions select the worker scenario's rows; its flags (see
// [WorkerFlags]) set them.
type WorkerOptions struct {
	// Engine is "embedded" (beanstalkd's row and the embedded store's),
	// "cluster" (the rows through `serve --postgres` nodes) or "both".
	Engine string
	// Limits runs the rate and concurrency rows; without it only the
	// throughput rows run.
	Limits bool
}

// Worker is the worker scenario's settings; hourglass-bench sets it
// from its flags. It is read when the scenario's jobs are planned.
var Worker = WorkerOptions{Engine: "both", Limits: true}

// WorkerFlags defines the worker scenario's flags on fs, storing into
// [Worker]: --worker-engine embedded runs beanstalkd's row and the
// embedded store's alone (no PostgreSQL), and --worker-limits=false
// leaves out the rate and concurrency rows, so that
// `--scenario worker --worker-engine embedded --worker-limits=false`
// measures the worker's throughput against beanstalkd's alone.
func WorkerFlags(fs *flag.FlagSet) {
	fs.Func("worker-engine", "worker scenario: embedded (with beanstalkd's row), cluster or both (default both)", func(s string) error {
		if !slices.Contains([]string{"embedded", "cluster", "both"}, s) {
			return fmt.Errorf("want embedded, cluster or both")
		}
		Worker.Engine = s
		return nil
	})
	fs.BoolVar(&Worker.Limits, "worker-limits", Worker.Limits, "worker scenario: run the rate and concurrency rows too")
}

// workerOptIn is the note of the worker scenario in a run that does not
// name it.
const workerOptIn = "skipped: runs only when named (--scenario worker): it starts beanstalkd, hourglass serve and PostgreSQL and fills them with 1M tasks"

// workerJobs plans a round of the worker scenario.
func workerJobs(c *Config, _ []Structure) []Job {
	if !slices.Contains(c.Scenarios, "worker") {
		return []Job{{Scenario: "worker", Structure: beanstalkHourglass, run: func() Result {
			return Result{Note: workerOptIn}
		}}}
	}
	n := slices.Max(c.Sizes)
	d := min(max(10*c.Budget, 300*time.Millisecond), 10*time.Second)
	limitFor := min(max(10*c.Budget, time.Second), 10*time.Second)
	throughputCase := fmt.Sprintf("worker ×%d", workerHandlers)
	rateCase := fmt.Sprintf("rate %s/s", formatRate(workerRateLimit))
	concurrencyCase := fmt.Sprintf("concurrency %d", workerConcurrency)
	nodesName := fmt.Sprintf("%d nodes", workerLimitNodes)

	job := func(structure string, n int, cs string, f func(bin string) (Result, error)) Job {
		return serveJob("worker", structure, n, cs, f)
	}
	var base float64 // beanstalkd's tasks/s of this round; 0 if it did not run
	jobs := []Job{
		job(beanstalkd, n, fmt.Sprintf("reserve→delete ×%d", beanstalkConns), func(bin string) (Result, error) {
			base = 0
			if _, skip := beanstalkCommand(); skip != "" {
				return Result{Note: skip}, nil
			}
			r, err := workerBeanstalkd(bin, loadgen.Options{Conns: beanstalkConns, BodySize: beanstalkBody, Duration: d, Prefill: n})
			base, _ = r.Value("tasks/s")
			return r, err
		}),
		job(beanstalkHourglass, n, throughputCase, func(bin string) (Result, error) {
			r, err := workerThroughput(bin, 0, n, d)
			if v, ok := r.Value("tasks/s"); ok && base > 0 {
				r.add("× beanstalkd", unitRatio, v/base)
			}
			return r, err
		}),
		job("1 node", n, throughputCase, func(bin string) (Result, error) {
			return workerThroughput(bin, 1, n, d)
		}),
		job(beanstalkHourglass, 0, rateCase, func(bin string) (Result, error) {
			return workerRate(bin, 0, limitFor)
		}),
		job(nodesName, 0, rateCase, func(bin string) (Result, error) {
			return workerRate(bin, workerLimitNodes, limitFor)
		}),
		job(beanstalkHourglass, 0, concurrencyCase, func(bin string) (Result, error) {
			return workerConcurrencyLimit(bin, 0, limitFor)
		}),
		job(nodesName, 0, concurrencyCase, func(bin string) (Result, error) {
			return workerConcurrencyLimit(bin, workerLimitNodes, limitFor)
		}),
	}
	return slices.DeleteFunc(jobs, func(j Job) bool {
		embedded := j.Structure == beanstalkd || j.Structure == beanstalkHourglass
		limit := j.Case == rateCase || j.Case == concurrencyCase
		return (limit && !Worker.Limits) ||
			(embedded && Worker.Engine == "cluster") ||
			(!embedded && Worker.Engine == "embedded")
	})
}

// workerBeanstalkd is the beanstalk scenario's reserve→delete row on
// beanstalkd, its metrics named per task as the worker rows' are.
func workerBeanstalkd(bin string, o loadgen.Options) (Result, error) {
	s, err := startBeanstalkServer(beanstalkd, bin)
	if err != nil {
		return Result{}, err
	}
	defer s.close()
	r, err := beanstalkRoundTrips(s, o)
	names := map[string]string{"ops/s": "tasks/s", "CPU/op": "CPU/task", "client CPU/op": "client CPU/task"}
	for i, m := range r.Metrics {
		if to, ok := names[m.Name]; ok {
			r.Metrics[i].Name = to
		}
	}
	return r, err
}

// workerThroughput is a worker ×64 row: n ready tasks on the embedded
// store (nodes = 0) or through one node, worked by one worker until all
// are handled or d is up.
func workerThroughput(bin string, nodes, n int, d time.Duration) (Result, error) {
	return workerThroughputOf(bin, nodes, n, d, workerBodyset())
}

// workerThroughputOf is workerThroughput on a fill of bodies' tasks (the
// keys scenario's carry keys).
func workerThroughputOf(bin string, nodes, n int, d time.Duration, bodies serveBodySet) (Result, error) {
	s, note, err := startWorkerServers(bin, nodes)
	if err != nil || note != "" {
		return Result{Note: note}, err
	}
	defer s.close()
	const queue = "bench-worker"
	fill, err := s.procs[0].fillQueue(queue, n, bodies, workerFillers, fillTimeout(n))
	if err != nil {
		return Result{}, err
	}
	if nodes == 0 {
		// Pebble compacts what the fill wrote for a while: its CPU time
		// is the fill's, not the worker's.
		if _, err := s.procs[0].atRest(serveRestTimeout); err != nil {
			return Result{}, err
		}
	}
	reserves0, acks0 := s.calls.reserves.Load(), s.calls.acks.Load()
	server0, pg0, cpuErr := s.cpu()
	client0, clientOK := cpuTime()
	p := startWorkers(s.clients, queue, int64(n), func(context.Context) error { return nil })
	elapsed, err := p.wait(d)
	handled := p.handled.Load()
	reserves, acks := s.calls.reserves.Load()-reserves0, s.calls.acks.Load()-acks0
	server1, pg1, _ := s.cpu()
	client1, _ := cpuTime()
	if stopErr := p.stop(); err == nil {
		err = stopErr
	}
	if err != nil {
		return Result{}, s.withState(err)
	}
	var r Result
	r.add("tasks/s", unitRate, float64(handled)/elapsed.Seconds())
	tasks := max(float64(handled), 1)
	if cpuErr == nil {
		r.add("CPU/task", unitSec, (server1-server0).Seconds()/tasks)
		if nodes > 0 {
			r.add("PG CPU/task", unitSec, (pg1-pg0).Seconds()/tasks)
		}
	}
	if clientOK {
		r.add("client CPU/task", unitSec, (client1-client0).Seconds()/tasks)
	}
	r.add("tasks/reserve", unitRatio, tasks/max(float64(reserves), 1))
	r.add("tasks/ack call", unitRatio, tasks/max(float64(acks), 1))
	r.add("handled", unitCount, float64(handled))
	r.add("fill/s", unitRate, fill)
	left, err := s.left(queue)
	if err != nil {
		return Result{}, err
	}
	if acked := int64(n - left); acked < handled {
		r.Note = fmt.Sprintf("%d of the %d tasks handled were not acked once the worker stopped", handled-acked, handled)
	}
	return r, nil
}

// workerRate is a rate row: a queue with the policy rate {limit
// workerRateLimit, per 1s} and enough ready tasks for the whole row,
// worked by one worker per server; the handlers started over d after
// the warm-up are the handed-out rate. The warm-up lasts workerRateWarm
// and until the bucket's burst (workerRateLimit tasks) is handed out, at
// most workerRateWarm more: workers slow to start (three nodes on a
// loaded machine) left part of the burst for the measured window, which
// then read up to 9 % over the limit though the bucket never let out
// more than burst + limit × time.
func workerRate(bin string, nodes int, d time.Duration) (Result, error) {
	s, note, err := startWorkerServers(bin, nodes)
	if err != nil || note != "" {
		return Result{Note: note}, err
	}
	defer s.close()
	const queue = "bench-rate"
	// Twice what the limit lets out, so that the queue never runs dry.
	if _, err := s.fill(queue, int(2*workerRateLimit*(workerRateWarm+d+time.Second).Seconds())); err != nil {
		return Result{}, err
	}
	policy := api.Policy{Rate: &api.Rate{Limit: workerRateLimit, Per: api.Duration(time.Second)}}
	if note, err := s.setPolicy(queue, policy); note != "" || err != nil {
		return Result{Note: note}, err
	}
	p := startWorkers(s.clients, queue, 0, func(context.Context) error { return nil })
	_, err = p.wait(workerRateWarm)
	for end := time.Now().Add(workerRateWarm); err == nil && p.started.Load() < workerRateLimit && time.Now().Before(end); {
		_, err = p.wait(time.Since(p.begin) + 10*time.Millisecond)
	}
	warm, t0 := p.started.Load(), time.Now()
	if err == nil {
		_, err = p.wait(t0.Sub(p.begin) + d)
	}
	counted, t1 := p.started.Load()-warm, time.Now()
	if stopErr := p.stop(); err == nil {
		err = stopErr
	}
	if err != nil {
		return Result{}, s.withState(err)
	}
	rate := float64(counted) / t1.Sub(t0).Seconds()
	var r Result
	r.add("tasks/s", unitRate, rate)
	r.add("deviation", unitPct, (rate/workerRateLimit-1)*100)
	r.add("warm-up", unitCount, float64(warm))
	return r, nil
}

// workerConcurrencyLimit is a concurrency row: a queue with the policy
// concurrency workerConcurrency, worked by one worker per server whose
// handlers sleep workerSleep, for d or until the queue is done.
func workerConcurrencyLimit(bin string, nodes int, d time.Duration) (Result, error) {
	s, note, err := startWorkerServers(bin, nodes)
	if err != nil || note != "" {
		return Result{Note: note}, err
	}
	defer s.close()
	const queue = "bench-concurrency"
	// Half as much again as the limit lets through in d.
	n := int(1.5 * workerConcurrency / workerSleep.Seconds() * d.Seconds())
	if _, err := s.fill(queue, n); err != nil {
		return Result{}, err
	}
	if note, err := s.setPolicy(queue, api.Policy{Concurrency: workerConcurrency}); note != "" || err != nil {
		return Result{Note: note}, err
	}
	p := startWorkers(s.clients, queue, int64(n), func(context.Context) error {
		time.Sleep(workerSleep)
		return nil
	})
	elapsed, err := p.wait(d)
	handled := p.handled.Load()
	if stopErr := p.stop(); err == nil {
		err = stopErr
	}
	if err != nil {
		return Result{}, s.withState(err)
	}
	var r Result
	r.add("tasks/s", unitRate, float64(handled)/elapsed.Seconds())
	most := p.maxRunning.Load()
	r.add("max running", unitCount, float64(most))
	if most > workerConcurrency {
		r.Note = fmt.Sprintf("the limit of %d was exceeded: %d handlers ran at once", workerConcurrency, most)
	}
	return r, nil
}

// setPolicy sets queue's policy through the first server. A server that
// refuses it (an engine without the policy's limits yet) is a note.
func (s *workerServers) setPolicy(queue string, p api.Policy) (note string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.clients[0].SetPolicy(ctx, queue, p); err != nil {
		if s.alive() != nil {
			return "", s.withState(err)
		}
		return "skipped: the server refused the policy: " + err.Error(), nil
	}
	return "", nil
}

// withState adds to err that a server has exited, if one has.
func (s *workerServers) withState(err error) error {
	if e := s.alive(); e != nil {
		return fmt.Errorf("%w; %w", err, e)
	}
	return err
}
