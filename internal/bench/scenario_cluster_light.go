package bench

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/client"
	"github.com/hourglass-go/hourglass/internal/clusterbench"
	"github.com/hourglass-go/hourglass/internal/pgtest"
)

// The light-load row of the cluster scenario (issue 40): 3 nodes, each a
// process of `hourglass serve --postgres` on one PostgreSQL, one consumer
// long-polling on each node over HTTP (reserve max 50, wait 1 s, each
// task acked at once), and lightTasks tasks put one by one through the
// nodes in turn, due after delays spread uniformly over [0, 2 s) (the
// same delays in every run). Lateness is the time the consumer's reserve
// returned minus the task's due time; early counts tasks returned before
// it. The load runs twice through the same nodes: the late columns are
// its first round, on nodes just started (their pool connections and
// flushers run each statement for the first time: parse, plan and
// catalog caches), the warm ones the second, after the first has been
// delivered. The hops' histograms cover both rounds. The nodes are processes, not this process's nodes, so that builds
// can take turns on one machine: ClusterLight.Builds names them (an
// older binary serves the same HTTP API), and --runs N runs them in turns
// A, B, A, B. Where a build serves the per-hop histograms
// (hourglass_cluster_hop_*_seconds), their p50 and p99 over the three
// nodes are reported beside the end to end, from the buckets.

// ClusterLight holds the light row's settings, set by ClusterFlags.
var ClusterLight = struct {
	// Only runs the light row alone (--cluster-light).
	Only bool
	// Builds are the `hourglass` binaries whose nodes take turns, a row
	// each; none: the binary serveCommand finds.
	Builds []string
}{}

// ClusterFlags registers the cluster scenario's flags on fs.
func ClusterFlags(fs *flag.FlagSet) {
	fs.BoolVar(&ClusterLight.Only, "cluster-light", false, "cluster scenario: run the light-load row alone (3 node processes, a long-polling consumer on each, 200 tasks due within 2 s)")
	fs.Func("cluster-builds", "cluster scenario: hourglass binaries, comma-separated, whose nodes take turns in the light-load row (default: this one)", func(s string) error {
		for _, b := range strings.Split(s, ",") {
			if _, err := os.Stat(b); err != nil {
				return err
			}
			ClusterLight.Builds = append(ClusterLight.Builds, b)
		}
		return nil
	})
}

// Sizes of the light row.
const (
	lightNodes   = 3
	lightTasks   = 200
	lightSpread  = 2 * time.Second
	lightMax     = 50
	lightWait    = time.Second
	lightQueue   = "light"
	lightBalance = 30 * time.Second // bound on the wait for the partitions to spread
)

// lightHops are the per-hop histograms a node serves (cluster/metrics.go),
// with the column names of their quantiles.
var lightHops = []struct{ metric, column string }{
	{"hourglass_cluster_hop_due_to_flushed_seconds", "due→flushed"},
	{"hourglass_cluster_hop_due_to_fired_seconds", "due→fired"},
	{"hourglass_cluster_hop_fired_to_flushing_seconds", "fired→flushing"},
	{"hourglass_cluster_hop_flushed_to_notified_seconds", "flushed→notify"},
	{"hourglass_cluster_hop_notified_to_reserved_seconds", "notify→reserved"},
	// The flush's statement alone (its round trip), for comparison
	// with the first hop.
	{"hourglass_cluster_flush_seconds", "flush"},
}

// lightJobs plans the light row, one job per build.
func lightJobs() []Job {
	builds := ClusterLight.Builds
	var jobs []Job
	if len(builds) == 0 {
		return []Job{serveJob("cluster", "3 nodes", lightTasks, "light", func(bin string) (Result, error) {
			return clusterLight(bin)
		})}
	}
	for _, b := range builds {
		jobs = append(jobs, Job{Scenario: "cluster", Structure: "3 nodes", N: lightTasks, Case: "light " + filepath.Base(b), run: func() Result {
			r, err := clusterLight(b)
			if err != nil {
				return failed(err)
			}
			return r
		}})
	}
	return jobs
}

// clusterLight runs the light row once with the nodes of bin, on a
// PostgreSQL server of its own.
func clusterLight(bin string) (Result, error) {
	pg, err := pgtest.Launch(pgtest.Set("max_connections", "400"))
	if err != nil {
		if err == pgtest.ErrNoBinaries {
			return Result{Note: "skipped: " + err.Error()}, nil
		}
		return Result{}, err
	}
	defer pg.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url, err := pg.NewDatabase(ctx)
	if err != nil {
		return Result{}, err
	}
	var procs []*serveProcess
	defer func() {
		for _, p := range procs {
			p.kill()
		}
	}()
	for i := range lightNodes {
		p := newNodeProcess(bin, url, fmt.Sprintf("light-%d", i))
		procs = append(procs, p)
		if _, err := p.start(); err != nil {
			return Result{}, err
		}
	}
	if err := waitBalanced(ctx, url, lightNodes); err != nil {
		return Result{}, err
	}
	var clients []*client.Client
	for _, p := range procs {
		c, err := client.New("http://"+p.addr, client.Options{HTTPClient: p.hc, Timeout: 10 * time.Second})
		if err != nil {
			return Result{}, err
		}
		clients = append(clients, c)
	}
	late, due, err := lightLoad(ctx, clients)
	if err != nil {
		return Result{}, err
	}
	var r Result
	addLateness(&r, summariseLate(late, due))
	// The same load again through the same nodes, now warm: their pool
	// connections have run the statements, their flushers have planned.
	late, due, err = lightLoad(ctx, clients)
	if err != nil {
		return Result{}, err
	}
	if w := summariseLate(late, due); w.Delivered > 0 {
		r.add("warm late p50", unitSec, w.P50.Seconds())
		r.add("warm late p99", unitSec, w.P99.Seconds())
		r.add("warm late max", unitSec, w.Max.Seconds())
		r.add("warm early", unitCount, float64(w.Early))
	}
	// The hops, from the nodes' histograms, where the build serves them.
	for _, h := range lightHops {
		var sum []bucket
		for _, p := range procs {
			bs, err := scrapeHistogram(p, h.metric)
			if err != nil || bs == nil {
				sum = nil
				break
			}
			sum = addBuckets(sum, bs)
		}
		if sum != nil && sum[len(sum)-1].count > 0 {
			r.add(h.column+" p50", unitSec, quantile(sum, 0.5))
			r.add(h.column+" p99", unitSec, quantile(sum, 0.99))
		}
	}
	// Timers the owners' flushes found not yet due by the database's
	// clock (armed again for the rest: a round trip more), where served.
	var again float64
	for _, p := range procs {
		m, err := p.metrics("hourglass_cluster_flush_early_total")
		if err != nil {
			again = -1
			break
		}
		again += m["hourglass_cluster_flush_early_total"]
	}
	if again >= 0 {
		r.add("rearmed", unitCount, again)
	}
	fmt.Fprintf(os.Stderr, "light %s: %s\n", filepath.Base(bin), formatLight(r))
	return r, nil
}

// formatLight formats r's metrics on one line, for the turn-by-turn log.
func formatLight(r Result) string {
	var b strings.Builder
	for _, m := range r.Metrics {
		if m.Unit == unitSec {
			fmt.Fprintf(&b, "%s %.1fms  ", m.Name, m.Value*1e3)
		} else {
			fmt.Fprintf(&b, "%s %g  ", m.Name, m.Value)
		}
	}
	return strings.TrimSpace(b.String() + r.Note)
}

// waitBalanced waits until each of nodes nodes holds a third of the
// partitions (within two of it), up to lightBalance: before that the
// first node started owns them all.
func waitBalanced(ctx context.Context, url string, nodes int) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	end := time.Now().Add(lightBalance)
	for {
		var owners, least, total int
		err := conn.QueryRow(ctx, `SELECT count(*), coalesce(min(k), 0), (SELECT count(*) FROM hourglass_partitions)
			FROM (SELECT count(*) AS k FROM hourglass_partitions WHERE owner IS NOT NULL GROUP BY owner) o`).Scan(&owners, &least, &total)
		if err == nil && owners == nodes && least >= total/nodes-2 {
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("bench: light: partitions not spread over %d nodes after %v (%d owners, least %d, err %v)", nodes, lightBalance, owners, least, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// lightLoad runs the light load through clients (one per node) and
// returns the lateness of each task delivered and the number put.
func lightLoad(ctx context.Context, clients []*client.Client) ([]time.Duration, int, error) {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	var late []time.Duration
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, c := range clients {
		wg.Go(func() {
			for rctx.Err() == nil {
				ts, err := c.Reserve(rctx, lightQueue, lightMax, lightWait)
				now := time.Now()
				if err != nil {
					if rctx.Err() == nil {
						time.Sleep(10 * time.Millisecond)
					}
					continue
				}
				mu.Lock()
				for _, t := range ts {
					late = append(late, now.Sub(t.Due))
				}
				mu.Unlock()
				for _, t := range ts {
					c.Ack(ctx, lightQueue, t.ID, t.Lease)
				}
			}
		})
	}
	// The same delays in every run, so that builds meet the same load.
	rng := rand.New(rand.NewPCG(40, 40))
	for i := range lightTasks {
		d := api.Duration(time.Duration(rng.Int64N(int64(lightSpread/time.Millisecond))) * time.Millisecond)
		if _, _, err := clients[i%len(clients)].Put(ctx, lightQueue, api.PutRequest{Payload: []byte(`{}`), Delay: &d}); err != nil {
			return nil, 0, err
		}
	}
	deadline := time.Now().Add(lightSpread + 10*time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		k := len(late)
		mu.Unlock()
		if k >= lightTasks {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(late), lightTasks, nil
}

// summariseLate turns latenesses into the figures of a due stream.
func summariseLate(late []time.Duration, due int) (l clusterbench.Lateness) {
	slices.Sort(late)
	l.Due, l.Delivered = due, len(late)
	for _, x := range late {
		if x < 0 {
			l.Early++
		}
	}
	if len(late) > 0 {
		l.P50, l.P99, l.Max = late[len(late)/2], late[len(late)*99/100], late[len(late)-1]
	}
	return l
}

// bucket is one cumulative bucket of a histogram: the count of
// observations ≤ le.
type bucket struct {
	le    float64
	count float64
}

// scrapeHistogram reads the buckets of the histogram name (no labels)
// from p's /metrics; nil if it has none.
func scrapeHistogram(p *serveProcess, name string) ([]bucket, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.url("/metrics"), nil)
	resp, err := p.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	prefix := name + `_bucket{le="`
	var out []bucket
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, prefix)
		if !ok {
			continue
		}
		le, value, ok := strings.Cut(rest, `"} `)
		if !ok {
			continue
		}
		b := bucket{le: math.Inf(1)}
		if le != "+Inf" {
			if b.le, err = strconv.ParseFloat(le, 64); err != nil {
				return nil, err
			}
		}
		if b.count, err = strconv.ParseFloat(value, 64); err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, sc.Err()
}

// addBuckets adds b's counts to sum's, bucket by bucket (the same
// bounds); sum nil: b.
func addBuckets(sum, b []bucket) []bucket {
	if sum == nil {
		return slices.Clone(b)
	}
	for i := range min(len(sum), len(b)) {
		sum[i].count += b[i].count
	}
	return sum
}

// quantile estimates the q-quantile of cumulative buckets, interpolating
// linearly within the bucket that holds it, as Prometheus's
// histogram_quantile does.
func quantile(bs []bucket, q float64) float64 {
	total := bs[len(bs)-1].count
	rank := q * total
	lo, below := 0.0, 0.0
	for _, b := range bs {
		if b.count >= rank {
			if math.IsInf(b.le, 1) {
				return lo
			}
			if b.count == below {
				return b.le
			}
			return lo + (b.le-lo)*(rank-below)/(b.count-below)
		}
		lo, below = b.le, b.count
	}
	return lo
}
