package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// serveScenario measures `hourglass serve`, the durable delay queue, as
// its clients see it: the real binary (the one serveCommand finds, run
// with `serve`) on a temporary directory, over loopback HTTP with keep-alive.
// Its rows, in the order they run:
//
//   - put ×64: single puts (200-byte payload, 1 h delay) from 64
//     clients on a fresh store, each answered once durable;
//   - batch 100 ×8: the same tasks by tasks:batch, 100 per request,
//     from 8 clients;
//   - pending, n: the store filled with n such tasks by batches (the
//     fill rate is the row's tasks/s), then the server's RSS, the size of
//     its directory, and the time a restart after SIGKILL takes to answer
//     /readyz 200;
//   - lateness, n: with those n pending, tasks put 500 ms ahead of due
//     times that fall at 10k/s, reserved by 4 long-polling clients (max
//     100) and acked by 64 more, right after the restart (Pebble still
//     compacting what the fill wrote);
//   - lateness, n, at rest: the same once the store has run no
//     compaction for 2 s (rest after: how long that took);
//   - pending, 10n: filled on to 10n (at most 10M), as at n.
//
// The last four share one server and directory, so a round of the
// scenario fills the store once; the directory is removed after each
// round. Quick runs use n = 100k, full runs n = 1M (the largest of the
// sizes). The scenario runs only when named (--scenario serve): a full
// round takes minutes and gigabytes of disk.
var serveScenario = Scenario{
	Name: "serve",
	Doc: "the `hourglass serve` binary on a temporary directory over loopback HTTP with keep-alive, 200-byte payloads, 1 h delays: " +
		"durable puts/s from 64 clients one task per request and from 8 clients by tasks:batch of 100 on a fresh store " +
		"(tasks/fsync from the server's hourglass_store_tasks_per_commit histogram; CPU/task = the server's CPU time (process_cpu_seconds_total) per task, which other load on the machine disturbs less than rates; req = request latency); " +
		"pending n: n tasks put by batches (tasks/s is that fill's rate), then the server's RSS (VmRSS), " +
		"RSS B/task = (RSS(n) − RSS(n/10)) / (n − n/10), Go B/task the same of the Go runtime's memory (go_memstats_sys_bytes − heap_released_bytes: the RSS without Pebble's cache and memtables, allocated outside Go), the store's directory (du) per task, and restart = time from starting the server again after SIGKILL to /readyz 200; " +
		"lateness n: with n pending, tasks falling due at 10k/s (put 500 ms ahead), reserved by 4 long-polling clients (max 100) and acked (CPU/task: per task put, delivered and acked), right after the restart while Pebble still compacts the fill; " +
		"lateness n, at rest: the same once the store has run no compaction for 2 s (hourglass_store_compactions_running; rest after = the wait); " +
		"lateness = reserve answer received − due, early = answers received before due",
	jobs: serveJobs,
}

// Sizes and times of the serve scenario.
const (
	serveStructure  = "pebble" // the store behind the server: the row's structure
	serveClients    = 64       // single-put clients
	serveBatchers   = 8        // batch clients
	serveDueRate    = 10_000   // tasks falling due per second in the lateness row
	serveMaxPending = 10_000_000
	// serveDiskPerTask is the free space a pending task needs to be
	// filled: its record, its WAL copy and room for compactions, with
	// margin.
	serveDiskPerTask = 2000
	// serveMinFillRate bounds a fill's time: slower than this, it fails.
	serveMinFillRate = 5000
)

// serveOptIn is the note of the serve scenario in a run that does not
// name it: it takes minutes and gigabytes of disk (a full run fills a
// store with 10M tasks), and measures the service rather than the timers.
const serveOptIn = "skipped: runs only when named (--scenario serve): it starts servers and fills a store on disk"

// serveJobs plans a round of the serve scenario: the put rows, each on a
// server of its own, then the pending and lateness rows, on one server
// that the first of them starts and the last stops. A run that does not
// name the scenario gets one job that says so.
func serveJobs(c *Config, _ []Structure) []Job {
	if !slices.Contains(c.Scenarios, "serve") {
		return []Job{{Scenario: "serve", Structure: serveStructure, run: func() Result {
			return Result{Note: serveOptIn}
		}}}
	}
	n := slices.Max(c.Sizes)
	big := min(10*n, serveMaxPending)
	putFor := min(max(5*c.Budget, 50*time.Millisecond), 10*time.Second)
	streamFor := max(5*c.StreamFor, 200*time.Millisecond)
	settle := min(max(5*c.Budget, 50*time.Millisecond), time.Second)

	job := func(n int, cs string, run func(bin string) Result) Job {
		return Job{Scenario: "serve", Structure: serveStructure, N: n, Case: cs, run: func() Result {
			bin, skip := serveCommand()
			if skip != "" {
				return Result{Note: skip}
			}
			return run(bin)
		}}
	}
	// s is the server the pending and lateness rows share.
	var s *serveSession
	closeSession := func() {
		if s != nil {
			s.close()
			s = nil
		}
	}
	needSession := func(run func() Result) Result {
		if s == nil {
			return failed(fmt.Errorf("bench: serve: no server: the pending row before this one did not run"))
		}
		r := run()
		if r.Err != "" {
			closeSession()
		}
		return r
	}
	jobs := []Job{
		job(0, fmt.Sprintf("put ×%d", serveClients), func(bin string) Result {
			return servePuts(bin, putFor, false)
		}),
		job(0, fmt.Sprintf("batch %d ×%d", serveBatch, serveBatchers), func(bin string) Result {
			return servePuts(bin, putFor, true)
		}),
		job(n, "pending", func(bin string) Result {
			closeSession()
			var err error
			if s, err = openServeSession(bin, max(n/10, 1)); err != nil {
				return failed(err)
			}
			return needSession(func() Result { return s.grow(n, settle) })
		}),
		job(n, fmt.Sprintf("lateness %s/s", formatRate(serveDueRate)), func(string) Result {
			return needSession(func() Result { return s.lateness(streamFor) })
		}),
		job(n, fmt.Sprintf("lateness %s/s, at rest", formatRate(serveDueRate)), func(string) Result {
			r := needSession(func() Result {
				waited, err := s.p.atRest(serveRestTimeout)
				if err != nil {
					return failed(err)
				}
				r := s.lateness(streamFor)
				r.add("rest after", unitSec, waited.Seconds())
				return r
			})
			if big <= n {
				closeSession()
			}
			return r
		}),
	}
	if big > n {
		jobs = append(jobs, job(big, "pending", func(string) Result {
			defer closeSession()
			return needSession(func() Result { return s.grow(big, settle) })
		}))
	}
	return jobs
}

// servePuts measures durable puts on a server of its own: single puts
// from serveClients clients, or batches from serveBatchers.
func servePuts(bin string, d time.Duration, batch bool) Result {
	s, err := openServeSession(bin, 0)
	if err != nil {
		return failed(err)
	}
	defer s.close()
	var t throughput
	if batch {
		bodies := serveBodyset().batches
		var turn atomic.Uint64
		t, err = s.p.timedPuts(func(ctx context.Context) error {
			return s.p.putBatch(ctx, "load", bodies[turn.Add(1)%uint64(len(bodies))])
		}, serveBatch, serveBatchers, d)
	} else {
		bodies := serveBodyset().tasks
		var turn atomic.Uint64
		t, err = s.p.timedPuts(func(ctx context.Context) error {
			_, err := s.p.post(ctx, "/v1/queues/load/tasks", bodies[turn.Add(1)%uint64(len(bodies))], http.StatusCreated)
			return err
		}, 1, serveClients, d)
	}
	if err != nil {
		return failed(err)
	}
	var r Result
	r.add("tasks/s", unitRate, t.tasksPerSec)
	r.add("tasks/fsync", unitRatio, t.tasksPerFsync)
	r.add("CPU/task", unitSec, t.cpuPerTask.Seconds())
	r.add("req p50", unitSec, t.p50.Seconds())
	r.add("req p99", unitSec, t.p99.Seconds())
	return r
}

// serveSession is a server on a temporary directory and what the rows
// that share it have put: pending far tasks in queue "pending", the first
// base of them before the RSS that later rows subtract was read.
type serveSession struct {
	p       *serveProcess
	dir     string // temporary; the store is in dir/data
	base    int
	rss0    int64 // RSS with base tasks pending; -1 if unknown
	goMem0  float64
	pending int
	note    string
}

// goMemory returns the memory the server's Go runtime holds from the
// system (go_memstats_sys_bytes less what it has released): its part of
// the RSS. The rest is Pebble's block cache and memtables, which it
// allocates outside the Go heap, and the binary.
func (p *serveProcess) goMemory() (float64, error) {
	m, err := p.metrics("go_memstats_sys_bytes", "go_memstats_heap_released_bytes")
	if err != nil {
		return 0, err
	}
	return m["go_memstats_sys_bytes"] - m["go_memstats_heap_released_bytes"], nil
}

// openServeSession starts a server on a new temporary directory. With
// base > 0 it puts base tasks and reads the server's RSS.
func openServeSession(bin string, base int) (*serveSession, error) {
	dir, err := os.MkdirTemp("", "hourglass-bench-serve-")
	if err != nil {
		return nil, err
	}
	s := &serveSession{p: newServeProcess(bin, filepath.Join(dir, "data")), dir: dir, base: base, rss0: -1}
	if _, err := s.p.start(); err != nil {
		s.close()
		return nil, err
	}
	if base > 0 {
		if _, err := s.p.fill(base, fillTimeout(base)); err != nil {
			s.close()
			return nil, err
		}
		s.pending = base
		if s.rss0, err = s.p.rss(); err != nil {
			s.rss0, s.note = -1, err.Error()
		}
		if s.goMem0, err = s.p.goMemory(); err != nil {
			s.close()
			return nil, err
		}
	}
	return s, nil
}

// close stops the server and removes its directory.
func (s *serveSession) close() {
	s.p.stop()
	os.RemoveAll(s.dir)
}

// fillTimeout is the longest that putting n tasks may take.
func fillTimeout(n int) time.Duration {
	return 30*time.Second + time.Duration(n/serveMinFillRate)*time.Second
}

// grow fills the store on to n pending tasks and measures the server's
// memory and disk with n pending, then kills it with SIGKILL, restarts
// it on the same directory and checks that it recovered all n.
func (s *serveSession) grow(n int, settle time.Duration) Result {
	if free, err := freeDisk(s.dir); err == nil && free < uint64(n-s.pending)*serveDiskPerTask {
		return Result{Note: fmt.Sprintf("skipped: %d more tasks need about %d MiB free in %s, and %d MiB are",
			n-s.pending, uint64(n-s.pending)*serveDiskPerTask>>20, filepath.Dir(s.dir), free>>20)}
	}
	names := []string{"hourglass_store_tasks_per_commit_sum", "hourglass_store_tasks_per_commit_count", "process_cpu_seconds_total"}
	m0, err := s.p.metrics(names...)
	if err != nil {
		return failed(err)
	}
	filled := n - s.pending
	rate, err := s.p.fill(filled, fillTimeout(filled))
	if err != nil {
		return failed(err)
	}
	s.pending = n
	m1, err := s.p.metrics(names...)
	if err != nil {
		return failed(err)
	}
	time.Sleep(settle)
	var r Result
	r.add("tasks/s", unitRate, rate)
	r.add("tasks/fsync", unitRatio, (m1[names[0]]-m0[names[0]])/max(m1[names[1]]-m0[names[1]], 1))
	r.add("CPU/task", unitSec, cpuPer(m1[names[2]]-m0[names[2]], int64(filled)).Seconds())
	if rss, err := s.p.rss(); err == nil && s.rss0 >= 0 {
		r.add("RSS MiB", unitMiB, float64(rss)/(1<<20))
		r.add("RSS B/task", unitBytes, float64(rss-s.rss0)/float64(n-s.base))
	} else {
		r.Note = s.note
	}
	goMem, err := s.p.goMemory()
	if err != nil {
		return failed(err)
	}
	r.add("Go B/task", unitBytes, (goMem-s.goMem0)/float64(n-s.base))
	du, err := diskUsage(s.p.dir)
	if err != nil {
		return failed(err)
	}
	r.add("disk B/task", unitBytes, float64(du)/float64(n))

	s.p.kill()
	ready, err := s.p.start()
	if err != nil {
		return failed(fmt.Errorf("restart after SIGKILL: %w", err))
	}
	if got, err := s.p.delayed("pending"); err != nil {
		return failed(err)
	} else if got != n {
		return failed(fmt.Errorf("restart after SIGKILL: %d tasks delayed in queue pending, want %d", got, n))
	}
	r.add("restart", unitSec, ready.Seconds())
	return r
}

// serveRestTimeout bounds the wait for the store to come to rest before
// the second lateness row; serveRestQuiet is how long no compaction may
// run for the store to count as at rest.
const (
	serveRestTimeout = 5 * time.Minute
	serveRestQuiet   = 2 * time.Second
)

// atRest waits until the server's store has run no compaction
// (hourglass_store_compactions_running, read every 100 ms) for
// serveRestQuiet, at most timeout, and returns how long it waited, the
// quiet spell included. Pebble's compaction debt is no test of rest: it
// stays at hundreds of MB after a bulk load with nothing running.
func (p *serveProcess) atRest(timeout time.Duration) (time.Duration, error) {
	const running = "hourglass_store_compactions_running"
	start := time.Now()
	var quietSince time.Time
	for {
		m, err := p.metrics(running)
		if err != nil {
			return 0, err
		}
		v, ok := m[running]
		if !ok {
			return 0, fmt.Errorf("bench: serve: /metrics has no %s", running)
		}
		now := time.Now()
		switch {
		case v != 0:
			quietSince = time.Time{}
		case quietSince.IsZero():
			quietSince = now
		case now.Sub(quietSince) >= serveRestQuiet:
			return now.Sub(start), nil
		}
		if now.Sub(start) > timeout {
			return 0, fmt.Errorf("bench: serve: the store still compacting after %v", timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// lateness runs the lateness load for d on the session's server. What
// did not happen in time (deliveries, acks, answers to puts) is counted
// in the note; the percentiles are those of the tasks delivered.
func (s *serveSession) lateness(d time.Duration) Result {
	cpu := "process_cpu_seconds_total"
	m0, err := s.p.metrics(cpu)
	if err != nil {
		return failed(err)
	}
	dl, err := s.p.lateness(serveDueRate, d)
	if err != nil {
		return failed(err)
	}
	m1, err := s.p.metrics(cpu)
	if err != nil {
		return failed(err)
	}
	var r Result
	if len(dl.late) > 0 {
		r.add("tasks/s", unitRate, dl.perSec)
		r.add("CPU/task", unitSec, cpuPer(m1[cpu]-m0[cpu], int64(len(dl.late))).Seconds())
		r.add("late p50", unitSec, durationAt(dl.late, 0.50).Seconds())
		r.add("late p99", unitSec, durationAt(dl.late, 0.99).Seconds())
		r.add("late max", unitSec, dl.late[len(dl.late)-1].Seconds())
	}
	r.add("early", unitCount, float64(dl.early))
	r.add("samples", unitCount, float64(len(dl.late)))
	var notes []string
	if n := len(dl.late); n < dl.total {
		notes = append(notes, fmt.Sprintf("only %d of %d tasks delivered within %v of the last due time", n, dl.total, serveDrain))
	}
	if dl.putsLost > 0 {
		notes = append(notes, fmt.Sprintf("%d puts unanswered by then", dl.putsLost))
	}
	if dl.unacked > 0 {
		notes = append(notes, fmt.Sprintf("%d deliveries not acked %v later", dl.unacked, serveDrain))
	}
	if dl.putsAfter > 0 {
		notes = append(notes, fmt.Sprintf("%d tasks put after their due time (the put took over %v)", dl.putsAfter, serveLead))
	}
	r.Note = strings.Join(notes, "; ")
	return r
}

// delayed returns the number of delayed tasks in queue, from GET
// /v1/queues.
func (p *serveProcess) delayed(queue string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.url("/v1/queues"), nil)
	resp, err := p.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var out struct {
		Queues []struct {
			Name    string
			Delayed int
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return 0, fmt.Errorf("GET /v1/queues: %w", err)
	}
	for _, q := range out.Queues {
		if q.Name == queue {
			return q.Delayed, nil
		}
	}
	return 0, nil
}
