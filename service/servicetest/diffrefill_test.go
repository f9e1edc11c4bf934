package servicetest_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hourglass-go/hourglass/broker"
	"github.com/hourglass-go/hourglass/cluster"
	"github.com/hourglass-go/hourglass/internal/pgtest"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/store/pebblestore"
	"github.com/hourglass-go/hourglass/task"
)

// refillPer is the time of one token of the refill scenario's rates: long
// beside the scenario's run on a loaded machine (the cluster's clock is
// the database's, which goes on running under the offset the test adds),
// so that only the clocks' moves refill a bucket; and the moves, 35
// minutes in all, stay under diffTTR, so that no lease runs out.
const refillPer = 10 * time.Minute

// refill is TestDifferential's scenario of rate limits refilling, on
// engines of its own whose rate clocks the test moves: the embedded
// engine's through broker.Config.RateClock, a cluster node's through its
// database's hourglass_now() (pgtest.ShiftClock). Three queues of ready
// tasks: rq with a rate of 1 a refillPer and a burst of 2; rk with a
// per-key rate of the same, burst 1, over keys k1 and k2; rb with both,
// the queue's rate (burst 1) tighter than its per-key rate (2 a
// refillPer); rp with a per-key rate of 1 a refillPer and a burst of 2,
// one task of each key at first and two more after each move, so that a
// key's bucket is read part spent while its lane is not held (the
// embedded engine parks a lane only when its bucket has no token; then a
// timer, which the clock's move fires, decides when it is back). Each
// reserves its burst, nothing more, then the clocks move by parts of a
// token (4, 3, 4, 15 and 9 minutes) and every queue is reserved after
// each move: nothing until a whole token is there, then as many tasks as
// whole tokens. Answers, counts and the metrics
// (hourglass_reserves_throttled_total's reason among them) are compared
// after each step as in the random sequences. Only ready tasks: a
// node's timers run on its process's clock, which follows the
// database's with a lag (pgtest.Clock).
//
// Neither engine answers how long until the next token (a reserve waits
// for it within its wait, and returns tasks or none), so there is no
// such answer to compare.
func refill(t *testing.T, srv *pgtest.Server) {
	ctx := context.Background()
	st, err := pebblestore.Open(filepath.Join(t.TempDir(), "refill"), pebblestore.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clock := &broker.RateClock{}
	reg := prometheus.NewRegistry()
	b, err := broker.Open(st, broker.Config{Logger: quiet, Registerer: reg, RateClock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	url := srv.CreateDatabase(t)
	nodeReg := prometheus.NewRegistry()
	n, err := cluster.Open(ctx, pgtest.Pool(t, url, 8, cluster.ConfigurePool),
		cluster.Options{Node: "r", Lease: time.Second, Logger: quiet, Registerer: nodeReg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	dbClock := pgtest.ShiftClock(t, url)
	advance := []func(time.Duration){clock.Advance, func(d time.Duration) { dbClock.Advance(t, d) }}

	d := &differ{t: t, engines: []service.Service{service.New(b), service.New(n)}, names: []string{"embedded", "cluster"},
		leases: []map[string]string{{}, {}}, regs: [][]*prometheus.Registry{{reg}, {nodeReg}}}
	rate := func(limit, burst int) *task.Rate { return &task.Rate{Limit: limit, Per: refillPer, Burst: burst} }
	policies := map[string]task.Policy{
		"rq": {Retry: diffRetry, Rate: rate(1, 2)},
		"rk": {Retry: diffRetry, PerKey: &task.PerKey{Rate: rate(1, 1)}},
		"rb": {Retry: diffRetry, Rate: rate(1, 1), PerKey: &task.PerKey{Rate: rate(2, 2)}},
		"rp": {Retry: diffRetry, PerKey: &task.PerKey{Rate: rate(1, 2)}},
	}
	queues := []string{"rq", "rk", "rb", "rp"}
	step := 0
	compare := func(name string, op func(e int, s service.Service) string) {
		d.compare(step, name, op)
		step++
		if t.Failed() {
			t.Fatalf("the engines differ in the refill scenario; its steps so far:\n%s", strings.Join(d.log, "\n"))
		}
	}
	// put puts n ready tasks into q, of keys k1 and k2 in turn but in rq,
	// the first key's first by priority.
	put := func(q string, n int) {
		compare(fmt.Sprintf("put %d ready into %s", n, q), func(e int, s service.Service) string {
			var out []string
			for i := range n {
				key := ""
				if q != "rq" {
					key = diffKeys[1+i%2]
				}
				r := task.PutRequest{ID: fmt.Sprint(step, "-", i), TTR: diffTTR, Key: key, Priority: uint32(i % 2)}
				tk, created, err := s.Put(ctx, q, r)
				out = append(out, fmt.Sprintf("%s created=%v %s", show(tk), created, kind(err)))
			}
			return strings.Join(out, "; ")
		})
	}
	for _, q := range queues {
		p := policies[q]
		compare("set policy "+q+" "+policyText(p), func(e int, s service.Service) string {
			got, err := s.SetPolicy(ctx, q, p)
			return fmt.Sprintf("%s %s", policyText(got), kind(err))
		})
		if q == "rp" {
			put(q, 2)
		} else {
			put(q, 6)
		}
	}
	reserveAll := func(when string) {
		for _, q := range queues {
			compare(fmt.Sprintf("reserve %s max 5 (%s)", q, when), func(e int, s service.Service) string {
				ts, err := s.Reserve(ctx, q, 5, 0)
				return d.reserved(e, ts, err)
			})
		}
	}
	reserveAll("the bursts")
	reserveAll("spent")
	moved := time.Duration(0)
	for _, m := range []time.Duration{4 * time.Minute, 3 * time.Minute, 4 * time.Minute, 15 * time.Minute, 9 * time.Minute} {
		moved += m
		compare(fmt.Sprintf("clocks forward %v (%v in all)", m, moved), func(e int, s service.Service) string {
			advance[e](m)
			return ""
		})
		put("rp", 4)
		reserveAll(fmt.Sprintf("at +%v", moved))
	}
}
