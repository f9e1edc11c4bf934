package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/hourglass-go/hourglass/api"
)

// pushScenario measures push delivery (package pusher inside `hourglass
// serve`, the hourglass binary ServeFlags names) against a receiver this process
// runs on loopback (a net/http server, scenario_push_load.go), on the
// embedded store and through one `serve --postgres` node on a PostgreSQL
// the bench starts (internal/pgtest). Every row starts its server afresh
// and stops it when done. Its rows:
//
//   - due→first byte 1k/s: a push queue holding n tasks due in an hour
//     (n the largest of the sizes, at most pushPending), then a stream of
//     tasks falling due at pushRate a second for L, each put serveLead
//     before its due time by batches of serveStreamBatch; the receiver
//     reads each push's Hourglass-Due as its handler starts (the request's
//     headers read: its first byte, give or take their parse), and the
//     lateness is that time minus the due time: p50, p99 and max, and the
//     pushes that came before their due time (early, which must be 0);
//   - throughput: n ready tasks (at most pushThroughputMax) put into a
//     queue with no policy, then the queue made a push queue: pushes/s =
//     the distinct tasks the receiver got from the policy's answer until
//     all came or L ran out, over that time; CPU/push the server's CPU
//     time (user + system, from /proc) per push, PG CPU/push PostgreSQL's,
//     client CPU/push this process's (the receiver's).
//
// L is 10× Budget, 1 s to 10 s (10 s full, 1.5 s quick). The receiver
// answers 204 at once. The targets of issue 29: a p99 of at most 10 ms at
// 1,000/s with 100k pending, at least 5k pushes/s, none early. The
// scenario runs only when named (--scenario push).
var pushScenario = Scenario{
	Name: "push",
	Doc: "push queues: `hourglass serve` (the hourglass binary, see --hourglass) POSTing to a receiver this process runs on loopback (net/http, answers 204 at once), each row on a server started afresh, on the embedded store (hourglass) and through one `serve --postgres` node on a PostgreSQL the bench starts (1 node): " +
		"due→first byte 1k/s: a push queue with n tasks due in an hour (n ≤ 100k), then tasks falling due at 1,000/s for 10× Budget (1 s to 10 s), each put 500 ms ahead by batches of 100; lateness = when the receiver's handler starts (the request's headers read) minus the push's Hourglass-Due, p50/p99/max; early = pushes received before their due time (must be 0); " +
		"throughput: n ready tasks (n ≤ 100k) put into a queue, then the queue made a push queue: pushes/s = distinct tasks received from the policy's answer until all came or 10× Budget ran out; CPU/push = the server's CPU time (user + system, from /proc) per push, PG CPU/push PostgreSQL's, client CPU/push this process's (the receiver)",
	jobs: pushJobs,
}

// Shape of the push scenario.
const (
	pushPending       = 100_000 // most tasks pending far ahead in the lateness row
	pushRate          = 1000    // tasks falling due per second in the lateness row
	pushThroughputMax = 100_000 // most ready tasks of the throughput row
)

// pushOptIn is the note of the push scenario in a run that does not
// name it.
const pushOptIn = "skipped: runs only when named (--scenario push): it starts hourglass serve and PostgreSQL and fills them with 100k tasks"

// pushJobs plans a round of the push scenario.
func pushJobs(c *Config, _ []Structure) []Job {
	if !slices.Contains(c.Scenarios, "push") {
		return []Job{{Scenario: "push", Structure: beanstalkHourglass, run: func() Result {
			return Result{Note: pushOptIn}
		}}}
	}
	n := slices.Max(c.Sizes)
	pending, ready := min(n, pushPending), min(n, pushThroughputMax)
	d := min(max(10*c.Budget, time.Second), 10*time.Second)
	latenessCase := fmt.Sprintf("due→first byte %s/s", formatRate(pushRate))
	job := func(structure string, n int, cs string, f func(bin string) (Result, error)) Job {
		return serveJob("push", structure, n, cs, f)
	}
	var jobs []Job
	for _, e := range []struct {
		structure string
		nodes     int
	}{{beanstalkHourglass, 0}, {"1 node", 1}} {
		jobs = append(jobs,
			job(e.structure, pending, latenessCase, func(bin string) (Result, error) {
				return pushLateness(bin, e.nodes, pending, d)
			}),
			job(e.structure, ready, "throughput", func(bin string) (Result, error) {
				return pushThroughput(bin, e.nodes, ready, d)
			}))
	}
	return jobs
}

// pushLateness is a due→first byte row: pending far tasks in a push
// queue, then a stream of tasks falling due at pushRate a second for d.
func pushLateness(bin string, nodes, pending int, d time.Duration) (Result, error) {
	s, note, err := startWorkerServers(bin, nodes)
	if err != nil || note != "" {
		return Result{Note: note}, err
	}
	defer s.close()
	rc, err := startPushReceiver()
	if err != nil {
		return Result{}, err
	}
	defer rc.close()
	const queue = "bench-push-due"
	if note, err := s.setPolicy(queue, api.Policy{Push: &api.Push{URL: rc.url}}); note != "" || err != nil {
		return Result{Note: note}, err
	}
	if err := pushFill(s.procs[0], queue, pending); err != nil {
		return Result{}, err
	}
	if nodes == 0 {
		// Pebble compacts what the fill wrote for a while.
		if _, err := s.procs[0].atRest(serveRestTimeout); err != nil {
			return Result{}, err
		}
	}
	total := max(int(pushRate*d.Seconds()), 1)
	rc.expect(total)
	lost, err := pushStream(s.procs[0], queue, total, d)
	if err != nil {
		return Result{}, s.withState(err)
	}
	rc.wait(time.Now().Add(serveDrain))
	got := rc.result()
	var r Result
	r.add("p50", unitSec, durationAt(got.late, 0.50).Seconds())
	r.add("p99", unitSec, durationAt(got.late, 0.99).Seconds())
	if len(got.late) > 0 {
		r.add("max", unitSec, got.late[len(got.late)-1].Seconds())
	}
	r.add("early", unitCount, float64(got.early))
	r.add("pushed", unitCount, float64(got.distinct))
	switch {
	case got.early > 0:
		r.Note = fmt.Sprintf("%d pushes came before their due time", got.early)
	case got.distinct < total-lost:
		r.Note = fmt.Sprintf("%d of the %d tasks were not pushed within %v of the last due time", total-lost-got.distinct, total-lost, serveDrain)
	case lost > 0:
		r.Note = fmt.Sprintf("%d of the %d puts were refused or not answered in time", lost, total)
	}
	return r, nil
}

// pushThroughput is a throughput row: n ready tasks, then their queue
// made a push queue, pushed for at most d.
func pushThroughput(bin string, nodes, n int, d time.Duration) (Result, error) {
	s, note, err := startWorkerServers(bin, nodes)
	if err != nil || note != "" {
		return Result{Note: note}, err
	}
	defer s.close()
	rc, err := startPushReceiver()
	if err != nil {
		return Result{}, err
	}
	defer rc.close()
	const queue = "bench-push"
	if _, err := s.fill(queue, n); err != nil {
		return Result{}, err
	}
	if nodes == 0 {
		if _, err := s.procs[0].atRest(serveRestTimeout); err != nil {
			return Result{}, err
		}
	}
	rc.expect(n)
	server0, pg0, cpuErr := s.cpu()
	client0, clientOK := cpuTime()
	start := time.Now()
	if note, err := s.setPolicy(queue, api.Policy{Push: &api.Push{URL: rc.url}}); note != "" || err != nil {
		return Result{Note: note}, err
	}
	rc.wait(start.Add(d))
	elapsed := time.Since(start)
	got := rc.result()
	server1, pg1, _ := s.cpu()
	client1, _ := cpuTime()
	if err := s.alive(); err != nil {
		return Result{}, err
	}
	var r Result
	r.add("pushes/s", unitRate, float64(got.distinct)/elapsed.Seconds())
	pushes := max(float64(got.distinct), 1)
	if cpuErr == nil {
		r.add("CPU/push", unitSec, (server1-server0).Seconds()/pushes)
		if nodes > 0 {
			r.add("PG CPU/push", unitSec, (pg1-pg0).Seconds()/pushes)
		}
	}
	if clientOK {
		r.add("client CPU/push", unitSec, (client1-client0).Seconds()/pushes)
	}
	r.add("pushed", unitCount, float64(got.distinct))
	r.add("early", unitCount, float64(got.early))
	if got.early > 0 {
		r.Note = fmt.Sprintf("%d pushes came before their due time", got.early)
	}
	return r, nil
}

// pushStreamContext bounds a stream's puts: d, their lead and the drain.
func pushStreamContext(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), serveLead+d+serveDrain)
}
