package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"time"

	"github.com/hourglass-go/hourglass/internal/loadgen"
)

// beanstalkScenario measures `hourglass serve --beanstalk` against real
// beanstalkd, side by side in one run, with one client (package
// beanstalk/loadgen) over loopback. beanstalkd runs with its binlog
// (-b DIR) at its default fsync, at most every 50 ms; hourglass sends
// INSERTED only once the job is on disk. Its rows, a pair per case,
// beanstalkd first:
//
//   - puts ×64: puts/s from 64 connections, one 200-byte job delayed an
//     hour at a time each;
//   - RSS, delayed: the server's RSS after n such jobs were put (n the
//     largest of the sizes: 1M in a full run, 100k in a quick one);
//   - reserve→delete ×64: round trips/s from 64 workers on a tube filled
//     beforehand with n/2 ready jobs;
//   - lateness, same second: min(n/5, 100k) jobs put to fall due within
//     one wall-clock second, reserved and deleted by 64 workers;
//   - fsync 4 KiB, one row (structure disk): how fast the disk of the
//     temporary directories syncs a write-ahead log, appends of 4 KiB
//     each followed by fdatasync, for as long as the puts run: syncs/s,
//     and the latency's median and 99th percentile. An fsync before
//     every INSERTED bounds puts ×64 to 64 / latency, and only when every
//     sync covers a put of every connection.
//
// The puts and round-trip rows carry the server's CPU time per operation
// (from /proc/PID/stat: user and system, over the measurement, dialling
// included), which other load on the machine disturbs less than rates,
// the client's (this process's, where beanstalk/loadgen runs) the same
// way, so that what the two cores can give the server at a rate is on
// record, and hourglass's rows the task writes per group commit (from its
// hourglass_store_tasks_per_commit histogram; Pebble may cover several
// group commits with one fdatasync).
//
// Every job starts its server on a temporary directory and stops it and
// removes the directory when done, so no measurement sees another's
// jobs. The hourglass row of the first three cases carries the ratio to
// the beanstalkd row before it, of the same round; with --runs it is the
// median of the rounds' ratios. The scenario runs only when named
// (--scenario beanstalk), and skips where beanstalkd is not installed.
var beanstalkScenario = Scenario{
	Name: "beanstalk",
	Doc: "`hourglass serve --data DIR --beanstalk ADDR` (INSERTED once on disk) against beanstalkd 1.12 with its binlog (-b DIR, fsync at most every 50 ms), each started afresh on a temporary directory for every row, driven over loopback by one client (beanstalk/loadgen): " +
		"puts ×64: puts/s from 64 connections, one 200-byte job delayed 1 h at a time each; " +
		"RSS, delayed: the server's RSS (VmRSS) after n such jobs were put by 16 pipelining connections, RSS B/job = (RSS after − RSS before) / n; " +
		"reserve→delete ×64: round trips/s of 64 workers on a tube filled beforehand with n ready jobs, until the time is up or the tube is empty; " +
		"lateness, same second: n jobs put to fall due within one wall-clock second, reserved and deleted by 64 workers, lateness = handed out − (put sent + delay); " +
		"fsync 4 KiB: the disk under the temporary directories, 4 KiB appended then fdatasync, one after the other, for as long as the puts run (ops/s = syncs/s); " +
		"× beanstalkd = the hourglass figure over beanstalkd's of the same round; CPU/op = the server's CPU time (user + system) over the measurement per operation; client CPU/op = the same of the client, this process; tasks/commit = hourglass's task writes per group commit",
	jobs: beanstalkJobs,
}

// Sizes and times of the beanstalk scenario.
const (
	beanstalkConns   = 64 // connections putting, workers reserving
	beanstalkBody    = 200
	beanstalkDelay   = 3600 // seconds: the delayed jobs do not fall due during a run
	beanstalkLateMax = 100_000
	// beanstalkLeadRate is the put rate the lateness row's lead assumes:
	// its jobs must all be put before their due second.
	beanstalkLeadRate = 10_000
	beanstalkLeadMax  = 12 * time.Second
)

// beanstalkOptIn is the note of the beanstalk scenario in a run that
// does not name it.
const beanstalkOptIn = "skipped: runs only when named (--scenario beanstalk): it starts beanstalkd and hourglass serve and fills them with 1M jobs"

// beanstalkJobs plans a round of the beanstalk scenario: for each case a
// beanstalkd job, then an hourglass job that divides by its figure.
func beanstalkJobs(c *Config, _ []Structure) []Job {
	if !slices.Contains(c.Scenarios, "beanstalk") {
		return []Job{{Scenario: "beanstalk", Structure: beanstalkHourglass, run: func() Result {
			return Result{Note: beanstalkOptIn}
		}}}
	}
	n := slices.Max(c.Sizes)
	late := min(max(n/5, 1), beanstalkLateMax)
	o := loadgen.Options{
		Conns:    beanstalkConns,
		BodySize: beanstalkBody,
		Duration: min(max(10*c.Budget, 200*time.Millisecond), 5*time.Second),
		Prefill:  max(n/2, 1),
		Jobs:     late,
		Lead:     min(2*time.Second+time.Duration(late)*time.Second/beanstalkLeadRate, beanstalkLeadMax),
	}
	settle := min(max(5*c.Budget, 50*time.Millisecond), time.Second)

	type measure struct {
		n      int
		name   string
		metric string // the figure the ratio divides; "" for none
		run    func(s *beanstalkServer) (Result, error)
	}
	cases := []measure{
		{0, fmt.Sprintf("puts ×%d", beanstalkConns), "ops/s", func(s *beanstalkServer) (Result, error) {
			return beanstalkPuts(s, o)
		}},
		{n, "RSS, delayed", "RSS MiB", func(s *beanstalkServer) (Result, error) {
			return beanstalkRSS(s, n, settle)
		}},
		{o.Prefill, fmt.Sprintf("reserve→delete ×%d", beanstalkConns), "ops/s", func(s *beanstalkServer) (Result, error) {
			return beanstalkRoundTrips(s, o)
		}},
		{late, "lateness, same second", "", func(s *beanstalkServer) (Result, error) {
			return beanstalkLateness(s, o)
		}},
	}
	jobs := make([]Job, 0, 2*len(cases)+1)
	for _, m := range cases {
		var base float64 // beanstalkd's figure of this round; 0 if it failed
		for _, name := range []string{beanstalkd, beanstalkHourglass} {
			jobs = append(jobs, Job{Scenario: "beanstalk", Structure: name, N: m.n, Case: m.name, run: func() Result {
				if name == beanstalkd {
					base = 0
				}
				bin, skip := beanstalkCommand()
				if skip != "" {
					return Result{Note: skip}
				}
				s, err := startBeanstalkServer(name, bin)
				if err != nil {
					return failed(err)
				}
				defer s.close()
				r, err := m.run(s)
				if err != nil {
					return failed(err)
				}
				if m.metric != "" {
					v, _ := r.Value(m.metric)
					if name == beanstalkd {
						base = v
					} else if base > 0 {
						r.add("× beanstalkd", unitRatio, v/base)
					}
				}
				return r
			}})
		}
	}
	jobs = append(jobs, Job{Scenario: "beanstalk", Structure: beanstalkDisk, Case: "fsync 4 KiB", run: func() Result {
		if _, skip := beanstalkCommand(); skip != "" {
			return Result{Note: skip}
		}
		return beanstalkFsync(o.Duration)
	}})
	return jobs
}

// beanstalkCommand returns the hourglass binary, or a note saying why
// the scenario cannot run: no binary (see serveCommand), no beanstalkd
// to compare with, or no sh to add --beanstalk.
func beanstalkCommand() (bin, skip string) {
	if runtime.GOOS == "windows" {
		return "", "skipped: the beanstalk scenario runs hourglass serve through sh"
	}
	if _, err := exec.LookPath("beanstalkd"); err != nil {
		return "", "skipped: " + loadgen.ErrNoBeanstalkd.Error() + "; the scenario compares hourglass with it"
	}
	return serveCommand()
}

// beanstalkPuts measures puts/s, one job at a time from each connection.
func beanstalkPuts(s *beanstalkServer, o loadgen.Options) (Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), o.Duration+time.Minute)
	defer cancel()
	return s.measure(func() (float64, error) { return loadgen.Puts(ctx, s.addr, o) })
}

// measure runs f, which returns operations per second, and adds to its
// rate the server's CPU time per operation and, for hourglass, its task
// writes per group commit, both over f's run.
func (s *beanstalkServer) measure(f func() (float64, error)) (Result, error) {
	var tasks0, groups0 float64
	if s.commits != nil {
		var err error
		if tasks0, groups0, err = s.commits(); err != nil {
			return Result{}, err
		}
	}
	cpu0, cpuErr := s.cpu()
	client0, clientOK := cpuTime()
	start := time.Now()
	rate, err := f()
	elapsed := time.Since(start)
	if err != nil {
		return Result{}, err
	}
	client1, _ := cpuTime()
	var r Result
	r.add("ops/s", unitRate, rate)
	ops := max(rate*elapsed.Seconds(), 1)
	if cpu1, err := s.cpu(); err == nil && cpuErr == nil {
		r.add("CPU/op", unitSec, (cpu1-cpu0).Seconds()/ops)
	}
	if clientOK {
		r.add("client CPU/op", unitSec, (client1-client0).Seconds()/ops)
	}
	if s.commits != nil {
		tasks1, groups1, err := s.commits()
		if err != nil {
			return Result{}, err
		}
		r.add("tasks/commit", unitRatio, (tasks1-tasks0)/max(groups1-groups0, 1))
	}
	return r, nil
}

// beanstalkRSS reads the server's RSS, fills it with n delayed jobs,
// waits settle, and reads it again.
func beanstalkRSS(s *beanstalkServer, n int, settle time.Duration) (Result, error) {
	if runtime.GOOS != "linux" {
		return Result{Note: "skipped: a process's RSS is read from /proc, on Linux only"}, nil
	}
	before, err := s.rss()
	if err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), fillTimeout(n))
	defer cancel()
	if err := loadgen.Fill(ctx, s.addr, "bench-rss", n, beanstalkBody, beanstalkDelay); err != nil {
		return Result{}, fmt.Errorf("putting %d jobs: %w", n, err)
	}
	time.Sleep(settle)
	after, err := s.rss()
	if err != nil {
		return Result{}, err
	}
	var r Result
	r.add("RSS MiB", unitMiB, float64(after)/(1<<20))
	r.add("RSS B/job", unitBytes, float64(after-before)/float64(n))
	return r, nil
}

// beanstalkRoundTrips measures reserve→delete round trips/s.
func beanstalkRoundTrips(s *beanstalkServer, o loadgen.Options) (Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), fillTimeout(o.Prefill)+o.Duration+time.Minute)
	defer cancel()
	const tube = "bench-roundtrips"
	if err := loadgen.Fill(ctx, s.addr, tube, o.Prefill, o.BodySize, 0); err != nil {
		return Result{}, fmt.Errorf("putting %d ready jobs: %w", o.Prefill, err)
	}
	return s.measure(func() (float64, error) { return loadgen.ReserveDelete(ctx, s.addr, tube, o) })
}

// beanstalkFsync measures the disk's fdatasync for d, in a temporary
// directory beside the servers'.
func beanstalkFsync(d time.Duration) Result {
	dir, err := os.MkdirTemp("", "hourglass-bench-fsync-")
	if err != nil {
		return failed(err)
	}
	defer os.RemoveAll(dir)
	rate, p50, p99, err := fsyncProbe(dir, d)
	if err != nil {
		return failed(err)
	}
	var r Result
	r.add("ops/s", unitRate, rate)
	r.add("fsync p50", unitSec, p50.Seconds())
	r.add("fsync p99", unitSec, p99.Seconds())
	return r
}

// beanstalkLateness measures how late jobs due in the same second are
// handed out.
func beanstalkLateness(s *beanstalkServer, o loadgen.Options) (Result, error) {
	// loadgen bounds the wait for stragglers to 2 minutes after the due
	// second.
	ctx, cancel := context.WithTimeout(context.Background(), o.Lead+3*time.Minute)
	defer cancel()
	l, err := loadgen.Lateness(ctx, s.addr, o)
	if err != nil {
		return Result{}, err
	}
	var r Result
	r.add("late p50", unitSec, l.P50.Seconds())
	r.add("late p99", unitSec, l.P99.Seconds())
	r.add("late max", unitSec, l.Max.Seconds())
	return r, nil
}
