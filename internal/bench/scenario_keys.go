package bench

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hourglass-go/hourglass/client"
	"github.com/hourglass-go/hourglass/worker"
)

// keysScenario measures what keys on tasks (issue 42) cost and give:
// `hourglass serve` (the hourglass binary, see --hourglass), each row on
// a server started afresh, worked by package worker in this process (the
// worker scenario's pool: 64 handlers that return nil at once, acks
// batched through POST /v1/acks). The four rows of throughput and
// lateness run on the embedded store (structure hourglass), then on one
// cluster node on PostgreSQL (1 node; its own database, started by
// internal/pgtest, as the worker scenario's); the memory rows on the
// embedded store alone. Its rows:
//
//   - reserve→ack, no keys: the worker scenario's worker ×64 row, n
//     ready 200-byte tasks without a key;
//   - reserve→ack, 10k keys: the same n tasks spread evenly over
//     keysActive keys (task i has key i mod keysActive), so that every
//     reserve takes its tasks in turns across keys; × no keys is its
//     tasks/s over the row before's, of the same round;
//   - small key, empty queue: a stream of keysSmallRate tasks a second
//     of key "small", each due at a known time and put serveLead ahead,
//     for L, on a queue that holds nothing else; lateness = when the
//     handler starts minus the task's due time, p50/p99/max; server p99
//     = the p99 of the server's part: its hand-over (the start of the
//     task's attempt, from its history) minus the due time;
//   - small key, flooded: the same stream while the queue holds n ready
//     tasks of key "big" that the same workers drain; + p99 is its p99
//     minus the empty queue's of the same round (issue 42's goal: at
//     most 10 ms), + server p99 the same of the server's part;
//   - in both small-key rows, what the machine did meanwhile: stalls,
//     the spans of at least canaryStall in which a process of its own
//     that only sleeps 1 ms at a time was not run (canary.go), and the
//     longest; p99 off stalls, the p99 of the small tasks whose wait
//     overlaps none (+ p99 off stalls: flooded less empty); server and
//     bench runq s/s, the seconds the server's threads and this
//     process's waited, runnable, for a core, a second of the stream
//     (Linux's run_delay, rundelay_linux.go);
//   - memory, no keys / a key a task: the server (GOGC=10) holding m
//     ready tasks without a key, or each of a key of its own, at rest:
//     its Go heap and RSS; heap B/key and RSS B/key are the keyed row's
//     less the row before's of the same round, over m (m the largest of
//     the sizes, at most 1M; issue 42's target: at most 200 B a key).
//
// n is the largest of the sizes, at most keysMaxTasks; the throughput
// rows last at most 10× Budget (10 s full, 1.5 s quick, 300 ms at
// least), L is 10× Budget, 1 s to 10 s. The scenario runs only when
// named (--scenario keys); --keys-engine and --keys-memory select its
// rows, and --keys-big-work slows the flood's handlers (KeysFlags).
var keysScenario = Scenario{
	Name: "keys",
	Doc: "keys on tasks, on `hourglass serve` (the hourglass binary, see --hourglass) on the embedded store (hourglass) and as one cluster node on PostgreSQL (1 node: the throughput and small-key rows), each row on a server started afresh, worked by worker.New(c, Options{Concurrency: 64}) in this process with handlers that return nil at once: " +
		"reserve→ack no keys / 10k keys: n ready 200-byte tasks (n ≤ 500k) without a key, or spread evenly over 10,000 keys, then handled until all are or 10× Budget is up, tasks/s; × no keys = the keyed row's tasks/s over the row without keys of the same round; " +
		"small key: 20 tasks a second of key \"small\", each put 500 ms before its due time, for 10× Budget (1 s to 10 s), lateness = the handler's start minus the due time, p50/p99/max (server p99: of the server's hand-over, the start of the task's attempt in its history, minus the due time), on a queue holding nothing else (empty queue) and while n ready tasks of key \"big\" are drained by the same workers (flooded); + p99 = flooded p99 minus the empty queue's of the same round, + server p99 the same of the server's part; " +
		"stalls: the spans of 20 ms or more in which a canary process that sleeps 1 ms at a time was not run, during the stream, and the longest; p99 off stalls: of the small tasks whose wait overlaps no stall (+ p99 off stalls: flooded less empty); server / bench runq s/s: seconds the server's threads / the bench process's waited runnable for a core, a second of the stream (Linux's run_delay); " +
		"memory: the server run with GOGC=10 holding m ready tasks (m ≤ 1M, 3-byte payloads) without a key, or each of a key of its own, once at rest: Go heap (go_memstats_heap_alloc_bytes) and RSS; heap B/key and RSS B/key = the keyed row's less the row without keys' of the same round, over m",
	jobs: keysJobs,
}

// Shape of the keys scenario.
const (
	keysActive    = 10_000  // keys of the keyed throughput row
	keysMaxTasks  = 500_000 // most ready tasks of a throughput or flooded row
	keysSmallRate = 20      // small-key tasks falling due per second
	keysQueue     = "bench-keys"
)

// KeysOptions select the keys scenario's rows; its flags (see
// [KeysFlags]) set them.
type KeysOptions struct {
	// Engine is "embedded", "cluster" (one node) or "both": the engines
	// of the throughput and small-key rows.
	Engine string
	// Memory runs the memory rows (embedded store).
	Memory bool
	// Builds are the `hourglass` binaries whose cluster rows take turns
	// in each round, four rows each (--keys-builds); none: the binary
	// serveCommand finds.
	Builds []string
	// BigWork is how long a handler takes with a task of the flood (key
	// "big"): 0, the scenario's, drains the flood as fast as the worker
	// can, filling both cores; a longer one drains it slower, leaving
	// cores free, to tell what the flood's CPU costs the small key from
	// what its backlog does.
	BigWork time.Duration
}

// Keys is the keys scenario's settings; hourglass-bench sets it from its
// flags. It is read when the scenario's jobs are planned.
var Keys = KeysOptions{Engine: "both", Memory: true}

// KeysFlags defines the keys scenario's flags on fs, storing into
// [Keys]: `--scenario keys --keys-engine embedded --keys-memory=false`
// runs the embedded store's throughput and small-key rows alone.
func KeysFlags(fs *flag.FlagSet) {
	fs.Func("keys-engine", "keys scenario: embedded, cluster or both (default both)", func(s string) error {
		if !slices.Contains([]string{"embedded", "cluster", "both"}, s) {
			return fmt.Errorf("want embedded, cluster or both")
		}
		Keys.Engine = s
		return nil
	})
	fs.BoolVar(&Keys.Memory, "keys-memory", Keys.Memory, "keys scenario: run the memory rows too")
	fs.Func("keys-builds", "keys scenario: hourglass binaries, comma-separated, whose cluster rows (1 node) take turns in each round, named by their directories (default: this one)", func(s string) error {
		for _, b := range strings.Split(s, ",") {
			if _, err := os.Stat(b); err != nil {
				return err
			}
			Keys.Builds = append(Keys.Builds, b)
		}
		return nil
	})
	fs.Func("keys-big-work", "keys scenario: how long a handler takes with a task of the flood (default 0: the scenario's)", func(s string) error {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 || d > time.Second {
			return fmt.Errorf("want a duration from 0 to 1s")
		}
		Keys.BigWork = d
		return nil
	})
}

// keysOptIn is the note of the keys scenario in a run that does not
// name it.
const keysOptIn = "skipped: runs only when named (--scenario keys): it starts hourglass serve and fills it with 500k tasks"

// keysJobs plans a round of the keys scenario.
func keysJobs(c *Config, _ []Structure) []Job {
	if !slices.Contains(c.Scenarios, "keys") {
		return []Job{{Scenario: "keys", Structure: beanstalkHourglass, run: func() Result {
			return Result{Note: keysOptIn}
		}}}
	}
	n := min(slices.Max(c.Sizes), keysMaxTasks)
	d := min(max(10*c.Budget, 300*time.Millisecond), 10*time.Second)
	streamFor := min(max(10*c.Budget, time.Second), 10*time.Second)
	job := func(structure string, n int, cs string, f func(bin string) (Result, error)) Job {
		return serveJob("keys", structure, n, cs, f)
	}
	var jobs []Job
	for _, e := range keysEnginesRun() {
		job := func(structure string, n int, cs string, f func(bin string) (Result, error)) Job {
			return job(structure, n, cs, func(bin string) (Result, error) {
				if e.bin != "" {
					bin = e.bin // a build of --keys-builds
				}
				return f(bin)
			})
		}
		// Figures of this round's first row of each pair on e; 0 if it
		// did not run.
		var plain float64
		var emptyP99, emptyServer, emptyCalm time.Duration
		jobs = append(jobs,
			job(e.structure, n, "reserve→ack no keys", func(bin string) (Result, error) {
				plain = 0
				r, err := workerThroughputOf(bin, e.nodes, n, d, workerBodyset())
				plain, _ = r.Value("tasks/s")
				return r, err
			}),
			job(e.structure, n, fmt.Sprintf("reserve→ack %s keys", formatRate(keysActive)), func(bin string) (Result, error) {
				r, err := workerThroughputOf(bin, e.nodes, n, d, keysBodyset())
				if v, ok := r.Value("tasks/s"); ok && plain > 0 {
					r.add("× no keys", unitRatio, v/plain)
				}
				return r, err
			}),
			job(e.structure, 0, "small key, empty queue", func(bin string) (Result, error) {
				emptyP99, emptyServer, emptyCalm = 0, 0, 0
				r, err := keysLateness(bin, e.nodes, 0, streamFor)
				if v, ok := r.Value("p99"); ok {
					emptyP99 = time.Duration(v * float64(time.Second))
				}
				if v, ok := r.Value("server p99"); ok {
					emptyServer = time.Duration(v * float64(time.Second))
				}
				if v, ok := r.Value("p99 off stalls"); ok {
					emptyCalm = time.Duration(v * float64(time.Second))
				}
				return r, err
			}),
			job(e.structure, n, "small key, flooded", func(bin string) (Result, error) {
				r, err := keysLateness(bin, e.nodes, n, streamFor)
				if v, ok := r.Value("p99"); ok && emptyP99 > 0 {
					r.add("+ p99", unitSec, v-emptyP99.Seconds())
				}
				if v, ok := r.Value("server p99"); ok && emptyServer > 0 {
					r.add("+ server p99", unitSec, v-emptyServer.Seconds())
				}
				if v, ok := r.Value("p99 off stalls"); ok && emptyCalm > 0 {
					r.add("+ p99 off stalls", unitSec, v-emptyCalm.Seconds())
				}
				return r, err
			}),
		)
	}
	if Keys.Engine == "cluster" || !Keys.Memory {
		return jobs // the memory rows are the embedded engine's
	}
	// Figures of this round's memory row without keys; 0 if it did not run.
	var plainHeap, plainRSS float64 // MiB
	memN := min(slices.Max(c.Sizes), keysMemoryMax)
	job1 := func(n int, cs string, f func(bin string) (Result, error)) Job {
		return job(beanstalkHourglass, n, cs, f)
	}
	return append(jobs,
		job1(memN, "memory, no keys", func(bin string) (Result, error) {
			plainHeap, plainRSS = 0, 0
			r, err := keysMemory(bin, memN, false)
			plainHeap, _ = r.Value("heap MiB")
			plainRSS, _ = r.Value("RSS MiB")
			return r, err
		}),
		job1(memN, "memory, a key a task", func(bin string) (Result, error) {
			r, err := keysMemory(bin, memN, true)
			if v, ok := r.Value("heap MiB"); ok && plainHeap > 0 {
				r.add("heap B/key", unitBytes, (v-plainHeap)*(1<<20)/float64(memN))
			}
			if v, ok := r.Value("RSS MiB"); ok && plainRSS > 0 {
				r.add("RSS B/key", unitBytes, (v-plainRSS)*(1<<20)/float64(memN))
			}
			return r, err
		}),
	)
}

// keysBodyset makes, once and from a fixed seed, the bodies of the keyed
// fill: keysActive tasks of 200-byte payloads, task i of key
// "tenant-i", in batches of workerBatch, so that a fill taking the
// batches in turns spreads its tasks evenly over the keys.
var keysBodyset = sync.OnceValue(func() serveBodySet {
	return keyedBodies(keysActive, func(i int) string { return fmt.Sprintf("tenant-%05d", i) })
})

// bigBodyset makes, once, the bodies of the flood: workerBodies batches
// of workerBatch tasks, all of key "big".
var bigBodyset = sync.OnceValue(func() serveBodySet {
	return keyedBodies(workerBodies*workerBatch, func(int) string { return "big" })
})

// keyedBodies returns n ready tasks (n a multiple of workerBatch) of
// 200-byte payloads, task i of key key(i), and their batches of
// workerBatch.
func keyedBodies(n int, key func(i int) string) (out serveBodySet) {
	rng := rand.New(rand.NewPCG(9, 10))
	for i := range n {
		out.tasks = append(out.tasks, []byte(`{"payload":`+servePayload(rng)+`,"key":"`+key(i)+`"}`))
	}
	for i := range n / workerBatch {
		out.batches = append(out.batches, serveBatchJSON(out.tasks[i*workerBatch:(i+1)*workerBatch]))
	}
	return out
}

// keysLateness is a small-key row, on the embedded store (nodes 0) or
// one cluster node: flood ready tasks of key "big" (0: none) put first,
// then one worker started on the queue and a stream of keysSmallRate
// tasks a second of key "small" for d, each put serveLead before its due
// time. The lateness of a small task is when its handler starts minus
// its due time; the row waits for the last one at most serveDrain after
// its due time. The server's part of it is its hand-over, the start of
// the task's first attempt (GET .../attempts, read once the workers have
// stopped), minus its due time: the rest is the worker's (the answer's
// way back, a goroutine to start) and the bench process's. A stall
// canary (canary.go) and the run_delay of both processes, read over the
// stream, say how much of it the machine held up.
func keysLateness(bin string, nodes, flood int, d time.Duration) (Result, error) {
	s, note, err := startWorkerServers(bin, nodes)
	if err != nil || note != "" {
		return Result{Note: note}, err
	}
	defer s.close()
	p := s.procs[0]
	if flood > 0 {
		if _, err := p.fillQueue(keysQueue, flood, bigBodyset(), workerFillers, fillTimeout(flood)); err != nil {
			return Result{}, err
		}
		if nodes == 0 {
			// Pebble compacts what the fill wrote for a while.
			if _, err := p.atRest(serveRestTimeout); err != nil {
				return Result{}, err
			}
		}
	}
	total := max(int(keysSmallRate*d.Seconds()), 1)
	var (
		mu    sync.Mutex
		late  []smallTask // the small tasks handled, guarded by mu
		small = make(chan struct{})
		big   atomic.Int64
	)
	pool := startTaskWorkers(s.clients, keysQueue, 0, func(ctx context.Context, t *worker.Task) error {
		if t.Key != "small" {
			big.Add(1)
			if Keys.BigWork > 0 {
				sleep(ctx, Keys.BigWork)
			}
			return nil
		}
		l := time.Since(t.Due)
		mu.Lock()
		late = append(late, smallTask{t.ID, t.Due, l})
		if len(late) == total {
			close(small)
		}
		mu.Unlock()
		return nil
	})
	cn, err := startCanary()
	if err != nil {
		pool.stop()
		return Result{}, err
	}
	streamed := time.Now()
	serverWait0, serverWaitOK := runDelay(p.cmd.Process.Pid)
	benchWait0, benchWaitOK := runDelay(os.Getpid())
	lost, err := keysStream(p, total, d)
	if err == nil {
		t := time.NewTimer(serveLead + d + serveDrain - time.Since(pool.begin))
		select {
		case <-small:
		case <-t.C:
		case err = <-pool.failed:
		}
		t.Stop()
	}
	stalls := cn.stop()
	serverWait1, _ := runDelay(p.cmd.Process.Pid)
	benchWait1, _ := runDelay(os.Getpid())
	streamFor := time.Since(streamed).Seconds()
	if stopErr := pool.stop(); err == nil {
		err = stopErr
	}
	if err != nil {
		return Result{}, s.withState(err)
	}
	hops := keysHops(s.procs, nodes)
	mu.Lock()
	tasks := slices.Clone(late)
	mu.Unlock()
	got := make([]time.Duration, len(tasks))
	var calm []time.Duration // of the tasks whose wait overlaps no stall
	for i, t := range tasks {
		got[i] = t.late
		if !overlaps(stalls, t.due, max(t.late, 0)) {
			calm = append(calm, t.late)
		}
	}
	slices.Sort(got)
	slices.Sort(calm)
	server, err := keysHandOvers(s.clients[0], tasks)
	if err != nil {
		return Result{}, s.withState(err)
	}
	var r Result
	r.add("p50", unitSec, durationAt(got, 0.50).Seconds())
	r.add("p99", unitSec, durationAt(got, 0.99).Seconds())
	if len(got) > 0 {
		r.add("max", unitSec, got[len(got)-1].Seconds())
	}
	if len(server) > 0 {
		r.add("server p99", unitSec, durationAt(server, 0.99).Seconds())
	}
	if cn != nil {
		longest := time.Duration(0)
		for _, st := range stalls {
			longest = max(longest, st.d)
		}
		r.add("stalls", unitCount, float64(len(stalls)))
		r.add("longest stall", unitSec, longest.Seconds())
		if len(calm) > 0 {
			r.add("p99 off stalls", unitSec, durationAt(calm, 0.99).Seconds())
		}
	}
	if serverWaitOK {
		r.add("server runq s/s", unitRatio, (serverWait1-serverWait0).Seconds()/streamFor)
	}
	if benchWaitOK {
		r.add("bench runq s/s", unitRatio, (benchWait1-benchWait0).Seconds()/streamFor)
	}
	for _, h := range hops {
		r.add(h.column, unitSec, h.v)
	}
	r.add("small handled", unitCount, float64(len(got)))
	r.add("big handled", unitCount, float64(big.Load()))
	early := 0
	for _, l := range got {
		if l < 0 {
			early++
		}
	}
	switch {
	case early > 0:
		r.Note = fmt.Sprintf("%d small tasks were handled before their due time", early)
	case len(got) < total-lost:
		r.Note = fmt.Sprintf("%d of the %d small tasks were not handled within %v of the last due time", total-lost-len(got), total-lost, serveDrain)
	case lost > 0:
		r.Note = fmt.Sprintf("%d of the %d small puts were refused or not answered in time", lost, total)
	case flood > 0 && big.Load() >= int64(flood):
		r.Note = fmt.Sprintf("the flood of %d tasks ran out before the stream ended", flood)
	}
	return r, nil
}

// smallTask is a small-key task a handler started: its id, its due time
// and its lateness (the handler's start minus the due time).
type smallTask struct {
	id   string
	due  time.Time
	late time.Duration
}

// keysHandOvers returns, sorted, the server's lateness of each of tasks:
// the start of its first attempt minus its due time, from the attempts
// the server keeps (--history, 24 h by default). The reads take one
// request each, at most serveDrain in all.
func keysHandOvers(c *client.Client, tasks []smallTask) ([]time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), serveDrain)
	defer cancel()
	out := make([]time.Duration, 0, len(tasks))
	for _, t := range tasks {
		as, err := c.Attempts(ctx, keysQueue, t.id)
		if err != nil {
			return nil, fmt.Errorf("bench: keys: attempts of %s: %w", t.id, err)
		}
		if len(as) == 0 {
			return nil, fmt.Errorf("bench: keys: task %s was handled but has no attempt", t.id)
		}
		out = append(out, as[0].Started.Sub(t.due))
	}
	slices.Sort(out)
	return out, nil
}

// keysStream puts total tasks of key "small" into the keys queue, one a
// request, falling due evenly over d from serveLead from now, each put
// serveLead before its due time by a goroutine of its own. It returns
// how many were not put in time, and an error only for a refused put.
func keysStream(p *serveProcess, total int, d time.Duration) (lost int, err error) {
	ctx, cancel := pushStreamContext(d)
	defer cancel()
	var (
		firstErr error
		errOnce  sync.Once
		lostN    atomic.Int64
		puts     sync.WaitGroup
	)
	start := time.Now().Add(serveLead)
	rng := rand.New(rand.NewPCG(11, 12))
	for i := 0; i < total && ctx.Err() == nil; i++ {
		due := start.Add(time.Duration(i) * d / time.Duration(total))
		sleep(ctx, time.Until(due.Add(-serveLead)))
		body := []byte(`{"payload":` + servePayload(rng) + `,"key":"small","at":"` + due.UTC().Format(time.RFC3339Nano) + `"}`)
		puts.Go(func() {
			if _, err := p.post(ctx, "/v1/queues/"+keysQueue+"/tasks", body, http.StatusCreated); err != nil {
				if ctx.Err() == nil {
					errOnce.Do(func() { firstErr = err; cancel() })
				}
				lostN.Add(1)
			}
		})
	}
	puts.Wait()
	if firstErr != nil {
		return 0, fmt.Errorf("bench: keys: small put: %w", firstErr)
	}
	return int(lostN.Load()), nil
}
