package servicetest_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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

// TestDifferential runs the same random sequence of operations on the
// embedded engine (on Pebble) and on a node of a two-node cluster, and
// checks that every answer is the same on both, and so is every queue's
// count of tasks in each state after every operation: one behaviour on
// both engines, beyond what the suites assert. Answers are compared as
// a client sees them: a task by its id, queue, state, payload, priority,
// attempts, max attempts, last error, whether it carries a lease and its
// counters of releases, buries, timeouts and kicks (beanstalkd's
// stats-job; service.Verdict's bookkeeping)
// (job ids, times and lease tokens are each engine's own); an error by
// the sentinel it wraps. The operations are puts (ready, or delayed an
// hour, some replacing; of the keys diffKeys), reserves (wait 0), acks, nacks, releases,
// buries and touches with a held lease or a stale one, gets, deletes,
// cancels, kicks, policies (max attempts, a dead-letter queue, limits of
// the queue and per key) and their
// deletion, batches of puts and of acks, reserves over several queues,
// kicks and deletes of a queue's dead tasks, attempts, the history,
// dedupe windows (q1's from the start, any queue's by a policy),
// listings, peeks, pauses, beanstalkd's commands by job id, and puts
// without an id whose generated id clients took (generated). After each
// step the metrics both engines serve are compared too (metricChange:
// each counter's increase, each gauge), a cluster's summed over its
// nodes. Five sequences of 600 steps run one after the other, each
// from the state the one before left; HOURGLASS_DIFF_SEEDS (a comma
// list) and HOURGLASS_DIFF_STEPS choose others, and a failure names the
// values that repeat it. The embedded engine restarts between two
// sequences (the cluster's state is in PostgreSQL), so that what it
// recovers is compared too. Then the subtest refill compares rate limits
// refilling as their clocks move (diffrefill_test.go).
func TestDifferential(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	ctx := context.Background()
	// The embedded engine restarts before each sequence but the first:
	// what it answers after a restart must be what it answered before.
	dir := filepath.Join(t.TempDir(), "data")
	var st *pebblestore.Store
	var b *broker.Broker
	var reg *prometheus.Registry
	open := func() service.Service {
		var err error
		if st, err = pebblestore.Open(dir, pebblestore.Options{Logger: quiet}); err != nil {
			t.Fatal(err)
		}
		reg = prometheus.NewRegistry()
		if b, err = broker.Open(st, broker.Config{Logger: quiet, Registerer: reg}); err != nil {
			t.Fatal(err)
		}
		return service.New(b)
	}
	shut := func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	}
	embedded := open()
	t.Cleanup(shut)
	srv := pgtest.Start(t)
	url := srv.CreateDatabase(t)
	var nodes []service.Service
	var nodeRegs []*prometheus.Registry
	for _, name := range []string{"a", "b"} {
		pool := pgtest.Pool(t, url, 8, cluster.ConfigurePool)
		r := prometheus.NewRegistry()
		nodeRegs = append(nodeRegs, r)
		n, err := cluster.Open(ctx, pool, cluster.Options{Node: name, Lease: time.Second, Logger: quiet, Registerer: r})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		nodes = append(nodes, service.New(n))
	}
	seeds := []uint64{1, 2, 3, 4, 5}
	if s := testEnv("HOURGLASS_DIFF_SEEDS"); s != "" {
		seeds = nil
		for f := range strings.SplitSeq(s, ",") {
			var seed uint64
			if _, err := fmt.Sscan(f, &seed); err != nil {
				t.Fatalf("HOURGLASS_DIFF_SEEDS=%s: %v", s, err)
			}
			seeds = append(seeds, seed)
		}
	}
	steps := 600
	if s := testEnv("HOURGLASS_DIFF_STEPS"); s != "" {
		fmt.Sscan(s, &steps)
	}
	d := &differ{t: t, engines: []service.Service{embedded, nodes[0]}, names: []string{"embedded", "cluster"},
		leases: []map[string]string{{}, {}}, regs: [][]*prometheus.Registry{{reg}, nodeRegs}}
	for _, e := range d.engines {
		for _, q := range diffQueues {
			p := task.Policy{Retry: diffRetry}
			if q == "q1" {
				p.Dedupe = time.Hour // a dedupe window from the start
			}
			if _, err := e.SetPolicy(ctx, q, p); err != nil {
				t.Fatal(err)
			}
		}
	}
	for k, seed := range seeds {
		// Each sequence goes on from the state the one before left.
		d.rng, d.log = rand.New(rand.NewPCG(seed, 2)), nil
		if k > 0 {
			shut()
			d.engines[0] = open()
			d.regs[0] = []*prometheus.Registry{reg}
			d.log = append(d.log, "the embedded engine restarted")
		}
		for i := -1; i < steps; i++ {
			if i < 0 {
				d.compare(i, "leases that run out (queue "+expQueue+")", func(e int, s service.Service) string { return expire(ctx, s, k) })
			} else {
				d.step(ctx, i)
			}
			if t.Failed() {
				t.Fatalf("the engines differ at step %d of seed %d (again: HOURGLASS_DIFF_SEEDS=%s HOURGLASS_DIFF_STEPS=%d); its steps so far:\n%s",
					i, seed, strings.Trim(strings.Join(strings.Fields(fmt.Sprint(seeds[:k+1])), ","), "[]"), steps, strings.Join(d.log, "\n"))
			}
		}
	}
	// Rate limits refilling, on engines of their own whose clocks move.
	t.Run("refill", func(t *testing.T) { refill(t, srv) })
}

// differ drives the engines through one sequence.
type differ struct {
	t       *testing.T
	engines []service.Service
	names   []string
	// leases per engine: queue/id → the lease of the task that engine
	// handed out last (each engine's own token).
	leases []map[string]string
	rng    *rand.Rand
	log    []string
	// regs per engine: the registries of its metrics (a cluster's: one a
	// node, summed).
	regs [][]*prometheus.Registry
	// gens counts the generated-ids steps.
	gens int
}

var diffQueues = []string{"q1", "q2", "dl"}

// diffRetry is the retry of every queue's policy in TestDifferential:
// immediate retries, set before the first step and after a policy's
// deletion, since a nack under the default back-off (1 s ± 10%) comes
// back during a run, at moments that differ between the engines.
var diffRetry = &task.Retry{}

// diffTTR is the ttr of every task TestDifferential puts: longer than any
// run, since when a lease that ran out is noticed differs between the
// engines (the embedded engine's lease wheel, a cluster node's sweep).
const diffTTR = time.Hour

// diffKeys are the keys of the tasks TestDifferential puts: "" (as over
// beanstalkd's protocol) and two others, so that reserves take turns
// across keys and per-key limits apply.
var diffKeys = []string{"", "k1", "k2"}

// key draws the key of a put.
func (d *differ) key() string { return diffKeys[d.rng.IntN(len(diffKeys))] }

// keyPriority is the priority of the tasks of key put into queue: each
// (queue, key) its own, kept when a task moves to the dead-letter queue
// and when beanstalkd's commands release or bury it. So no two keys'
// tasks tie on priority in a queue, nor a queue's with another's in a
// reserve over several (which leaves dl out, where tasks of q1 and q2
// come), and the order of turns across keys, in which the engines
// differ, never decides: a key whose ready tasks ran out and came back
// takes a new turn on the embedded engine (broker/fair.go's lanes),
// behind every other key, and keeps its place in the round by name on a
// cluster (after the queue's cursor, hourglass_key_cursors; under
// per-key limits, its row's turn in hourglass_key_turns). Within a key,
// delivery order decides on both.
func keyPriority(queue, key string) uint32 {
	return uint32(3*slices.Index(diffQueues, queue) + slices.Index(diffKeys, key))
}

// step runs one random operation on both engines and compares.
func (d *differ) step(ctx context.Context, i int) {
	q := diffQueues[d.rng.IntN(2)] // q1 or q2; dl only by dead-lettering
	if d.rng.IntN(10) == 0 {
		q = "dl"
	}
	id := string(rune('a' + d.rng.IntN(5)))
	key := q + "/" + id
	var name string
	var op func(e int, s service.Service) string
	switch k := d.rng.IntN(35); {
	case k < 5:
		r := task.PutRequest{ID: id, Payload: fmt.Appendf(nil, `{"n":%d}`, i),
			MaxAttempts: d.rng.IntN(4), Replace: d.rng.IntN(3) == 0, TTR: diffTTR, Key: d.key()}
		r.Priority = keyPriority(q, r.Key)
		if d.rng.IntN(4) == 0 {
			r.Delay = time.Hour
		}
		name = fmt.Sprintf("put %s %+v", key, r)
		op = func(e int, s service.Service) string {
			tk, created, err := s.Put(ctx, q, r)
			return fmt.Sprintf("%s created=%v %s", show(tk), created, kind(err))
		}
	case k < 9:
		max := 1 + d.rng.IntN(3)
		name = fmt.Sprintf("reserve %s max %d", q, max)
		op = func(e int, s service.Service) string {
			ts, err := s.Reserve(ctx, q, max, 0)
			return d.reserved(e, ts, err)
		}
	case k < 15:
		stale := d.rng.IntN(5) == 0
		verb := []string{"ack", "nack", "nack-retry", "release", "bury", "touch"}[d.rng.IntN(6)]
		name = fmt.Sprintf("%s %s stale=%v", verb, key, stale)
		op = func(e int, s service.Service) string {
			lease := d.leases[e][key]
			if stale || lease == "" {
				lease = "0123456789abcdef0"
			}
			var tk task.Task
			var err error
			switch verb {
			case "ack":
				err = s.Ack(ctx, q, id, lease)
			case "nack":
				tk, err = s.Nack(ctx, q, id, lease, 0, "e"+verb)
			case "nack-retry":
				tk, err = s.Nack(ctx, q, id, lease, task.RetryDelay, "")
			case "release":
				tk, err = s.Release(ctx, q, id, lease, 0)
			case "bury":
				tk, err = s.Bury(ctx, q, id, lease, "buried")
			case "touch":
				tk, err = s.Touch(ctx, q, id, lease)
			}
			return fmt.Sprintf("%s %s", show(tk), kind(err))
		}
	case k < 16:
		name = "get " + key
		op = func(e int, s service.Service) string {
			tk, err := s.Get(q, id)
			return fmt.Sprintf("%s %s", show(tk), kind(err))
		}
	case k < 17:
		if d.rng.IntN(2) == 0 {
			name = "cancel " + key
			op = func(e int, s service.Service) string { return kind(s.Cancel(ctx, q, id)) }
			break
		}
		name = "delete " + key
		op = func(e int, s service.Service) string { return kind(s.Delete(ctx, q, id)) }
	case k < 18:
		name = "kick " + key
		op = func(e int, s service.Service) string { return kind(s.Kick(ctx, q, id)) }
	case k < 19:
		p := task.Policy{Retry: diffRetry, MaxAttempts: d.rng.IntN(3)}
		if q != "dl" && d.rng.IntN(2) == 0 {
			p.DeadLetter = "dl"
		}
		// Limits: a rate is one task an hour after its burst, which no
		// run lasts long enough to see refilled (the refill scenario,
		// refill, moves the clocks instead); a concurrency limit needs no
		// clock.
		if d.rng.IntN(3) == 0 {
			p.Concurrency = 1 + d.rng.IntN(2)
		}
		if d.rng.IntN(3) == 0 {
			p.Rate = &task.Rate{Limit: 1, Per: time.Hour, Burst: 1 + d.rng.IntN(3)}
		}
		if d.rng.IntN(2) == 0 {
			p.Dedupe = time.Hour
		}
		// Per key: a concurrency, a rate (one an hour after its burst,
		// as the queue's), or both.
		switch d.rng.IntN(6) {
		case 0:
			p.PerKey = &task.PerKey{Concurrency: 1 + d.rng.IntN(2)}
		case 1:
			p.PerKey = &task.PerKey{Rate: &task.Rate{Limit: 1, Per: time.Hour, Burst: 1 + d.rng.IntN(2)}}
		case 2:
			p.PerKey = &task.PerKey{Concurrency: 1 + d.rng.IntN(2), Rate: &task.Rate{Limit: 1, Per: time.Hour, Burst: 1 + d.rng.IntN(3)}}
		}
		name = fmt.Sprintf("set policy %s %s", q, policyText(p))
		op = func(e int, s service.Service) string {
			got, err := s.SetPolicy(ctx, q, p)
			return fmt.Sprintf("%s %s", policyText(got), kind(err))
		}
	case k < 20:
		name = "delete policy " + q + " (then immediate retries)"
		op = func(e int, s service.Service) string {
			err := s.DeletePolicy(ctx, q)
			got, err2 := s.SetPolicy(ctx, q, task.Policy{Retry: diffRetry})
			return fmt.Sprintf("%s %s %s", kind(err), policyText(got), kind(err2))
		}
	case k < 21:
		var rs []task.PutRequest
		for j := range 1 + d.rng.IntN(4) {
			key := d.key()
			rs = append(rs, task.PutRequest{ID: string(rune('a' + d.rng.IntN(6))), Payload: fmt.Appendf(nil, `[%d,%d]`, i, j), TTR: diffTTR,
				Key: key, Priority: keyPriority(q, key)})
		}
		if d.rng.IntN(4) == 0 {
			rs[0].ID = "bad id" // answered in place
		}
		name = fmt.Sprintf("put batch %s %d", q, len(rs))
		op = func(e int, s service.Service) string {
			var out []string
			for _, r := range s.PutBatch(ctx, q, rs) {
				out = append(out, fmt.Sprintf("%s created=%v %s", show(r.Task), r.Created, kind(r.Err)))
			}
			return strings.Join(out, "; ")
		}
	case k < 22:
		acks := []string{key, diffQueues[d.rng.IntN(2)] + "/" + string(rune('a'+d.rng.IntN(5)))}
		stale := d.rng.IntN(4) == 0
		name = fmt.Sprintf("ack many %v stale=%v", acks, stale)
		op = func(e int, s service.Service) string {
			var as []task.Ack
			for i, k := range acks {
				q, id, _ := strings.Cut(k, "/")
				lease := d.leases[e][k]
				if lease == "" || stale && i == 0 {
					lease = "0123456789abcdef0"
				}
				as = append(as, task.Ack{Queue: q, ID: id, Lease: lease})
			}
			errs, err := s.AckMany(ctx, as)
			var out []string
			for _, e := range errs {
				out = append(out, kind(e))
			}
			return fmt.Sprintf("%v %s", out, kind(err))
		}
	case k < 23:
		qs := []string{"q2", "q1"}[:1+d.rng.IntN(2)] // not dl: keyPriority
		max := 1 + d.rng.IntN(4)
		name = fmt.Sprintf("reserve queues %v max %d", qs, max)
		op = func(e int, s service.Service) string {
			ts, err := s.ReserveQueues(ctx, qs, max, 0)
			return d.reserved(e, ts, err)
		}
	case k < 24:
		kick := d.rng.IntN(2) == 0
		name = fmt.Sprintf("kick dead %s (else delete dead): %v", q, kick)
		op = func(e int, s service.Service) string {
			var n int
			var err error
			if kick {
				n, err = s.KickDead(ctx, q)
			} else {
				n, err = s.DeleteDead(ctx, q)
			}
			return fmt.Sprintf("%d %s", n, kind(err))
		}
	case k < 25:
		name = "attempts " + key
		op = func(e int, s service.Service) string {
			as, err := s.Attempts(ctx, q, id)
			return fmt.Sprintf("%s %s", showAttempts(as), kind(err))
		}
	case k < 26:
		outcome := []string{"", "acked", "dead", "deleted"}[d.rng.IntN(4)]
		name = fmt.Sprintf("history %s %q", q, outcome)
		op = func(e int, s service.Service) string {
			fs, _, err := s.FinishedTasks(ctx, q, outcome, 0, 1000)
			return fmt.Sprintf("%s %s", showFinished(fs), kind(err))
		}
	case k < 27:
		st := []task.State{0, task.Delayed, task.Ready, task.Reserved, task.Dead}[d.rng.IntN(5)]
		name = fmt.Sprintf("list %s %v", q, st)
		op = func(e int, s service.Service) string {
			// Due order ties on times the engines read apart, so the
			// pages are compared as sets.
			ts, _, err := s.FindTasks(ctx, q, service.Filter{State: st}, service.Cursor{}, 1000)
			var out []string
			for _, tk := range ts {
				out = append(out, show(tk))
			}
			slices.Sort(out)
			return fmt.Sprintf("%v %s", out, kind(err))
		}
	case k < 29:
		st := []task.State{task.Delayed, task.Ready, task.Dead}[d.rng.IntN(3)]
		name = fmt.Sprintf("peek %s %v", q, st)
		op = func(e int, s service.Service) string {
			tk, err := s.Peek(q, st)
			return fmt.Sprintf("%s %s", show(tk), kind(err))
		}
	case k < 30:
		pause := []time.Duration{0, time.Hour, task.PauseIndefinitely}[d.rng.IntN(3)]
		name = fmt.Sprintf("pause %s %v", q, pause)
		op = func(e int, s service.Service) string { return kind(s.PauseQueue(ctx, q, pause)) }
	case k < 33:
		// beanstalkd's commands, by the job id each engine gave key.
		verb := []string{"delete", "release", "bury", "touch", "kick", "reserve"}[d.rng.IntN(6)]
		name = fmt.Sprintf("%s-job %s (its own prio: keyPriority)", verb, key)
		op = func(e int, s service.Service) string {
			tk, err := s.Get(q, id)
			if err != nil {
				return "no job: " + kind(err)
			}
			job, lease, prio := tk.JobID, d.leases[e][key], tk.Priority
			switch verb {
			case "delete":
				err = s.DeleteJob(ctx, job, lease)
			case "release":
				err = s.ReleaseJob(ctx, job, lease, prio, 0)
			case "bury":
				err = s.BuryJob(ctx, job, lease, prio)
			case "touch":
				tk, err = s.TouchJob(ctx, job, lease)
				return fmt.Sprintf("%s %s", show(tk), kind(err))
			case "kick":
				err = s.KickJob(ctx, job)
			case "reserve":
				tk, err = s.ReserveJob(ctx, job)
				if err == nil {
					d.leases[e][key] = tk.Lease
				}
				return fmt.Sprintf("%s %s", show(tk), kind(err))
			}
			return kind(err)
		}
	case k < 34:
		taken := d.gens % (service.GeneratedIDTries + 1) // each count in turn, every try taken included
		d.gens++
		name = fmt.Sprintf("generated ids: %d of the next job id's taken by client ids", taken)
		op = func(e int, s service.Service) string { return d.generated(ctx, s, taken) }
	default:
		n := d.rng.IntN(3)
		name = fmt.Sprintf("kick queue %s %d", q, n)
		op = func(e int, s service.Service) string {
			got, err := s.KickQueue(ctx, q, n)
			return fmt.Sprintf("%d %s", got, kind(err))
		}
	}
	d.compare(i, name, op)
}

// compare runs op, one step named name, on each engine and compares
// their answers, their queues' counts and the change of their metrics.
func (d *differ) compare(i int, name string, op func(e int, s service.Service) string) {
	ctx := context.Background()
	d.log = append(d.log, fmt.Sprintf("%3d %s", i, name))
	var answers, counts, changes []string
	for e, s := range d.engines {
		before, err := gather(d.regs[e])
		if err != nil {
			d.t.Fatalf("%s: metrics: %v", d.names[e], err)
		}
		answers = append(answers, op(e, s))
		after, err := gather(d.regs[e])
		if err != nil {
			d.t.Fatalf("%s: metrics: %v", d.names[e], err)
		}
		changes = append(changes, metricChange(before, after))
		qs, err := s.Queues(ctx)
		if err != nil {
			d.t.Fatalf("%s: Queues: %v", d.names[e], err)
		}
		var c []string
		for _, st := range qs {
			if st.Delayed+st.Ready+st.Reserved+st.Dead > 0 {
				c = append(c, fmt.Sprintf("%s:%d/%d/%d/%d", st.Name, st.Delayed, st.Ready, st.Reserved, st.Dead))
			}
		}
		slices.Sort(c)
		counts = append(counts, strings.Join(c, " "))
	}
	if answers[0] != answers[1] {
		d.t.Errorf("step %d, %s:\n  %s: %s\n  %s: %s", i, name, d.names[0], answers[0], d.names[1], answers[1])
	}
	if changes[0] != changes[1] {
		d.t.Errorf("step %d, %s: metrics (counters' increase, gauges)\n  %s:\n    %s\n  %s:\n    %s", i, name, d.names[0], changes[0], d.names[1], changes[1])
	}
	if counts[0] != counts[1] {
		d.t.Errorf("step %d, %s: queues (delayed/ready/reserved/dead)\n  %s: %s\n  %s: %s", i, name, d.names[0], counts[0], d.names[1], counts[1])
	}
}

// genQueue is the queue of the generated-ids step: one of its own, since
// the ids there are job ids, each engine's own, and the other steps
// compare tasks by id.
const genQueue = "gen"

// generated is the step that puts tasks without ids against client ids
// (issue 41): a put without an id learns the job id, N, of the put
// without an id to come (job ids increase by one on the embedded engine
// and on a cluster node's block, one a put, with or without an id);
// clients take the first taken of the ids a put without an id tries for
// job N (service.GeneratedID: "N", "N@job", ...); a put without an id
// then gets job N and must be named
// by the first free try, or answer service.NoFreeID when every try is
// taken. The tasks are deleted after, so that the queue is empty again.
// The answer names N as "N".
func (d *differ) generated(ctx context.Context, s service.Service, taken int) string {
	first, _, err := s.Put(ctx, genQueue, task.PutRequest{TTR: diffTTR})
	if err != nil {
		return "first put: " + kind(err)
	}
	defer s.Delete(ctx, genQueue, first.ID)
	job, err := strconv.ParseUint(first.ID, 10, 64)
	if err != nil {
		return "first put: an id not the job id: " + first.ID
	}
	next := job + 1 + uint64(taken) // each put of a client's id takes a job id too
	n := strconv.FormatUint(next, 10)
	var out []string
	for try := range taken {
		id := service.GeneratedID(next, try)
		_, created, err := s.Put(ctx, genQueue, task.PutRequest{ID: id, TTR: diffTTR})
		defer s.Delete(ctx, genQueue, id)
		out = append(out, fmt.Sprintf("%s created=%v %s", strings.ReplaceAll(id, n, "N"), created, kind(err)))
	}
	got, created, err := s.Put(ctx, genQueue, task.PutRequest{TTR: diffTTR})
	if err == nil {
		defer s.Delete(ctx, genQueue, got.ID)
	}
	out = append(out, fmt.Sprintf("%s job N=%v created=%v %s", strings.ReplaceAll(got.ID, n, "N"), got.JobID == next, created, kind(err)))
	return strings.Join(out, "; ")
}

// expQueue is the queue of the lease-expiry step, one of its own: the
// random steps put tasks with a ttr longer than the test, since when a
// lease that ran out is noticed differs between the engines.
const expQueue = "exp"

// expire is the step, one per sequence, of leases that run out: two tasks
// of ttr expTTR, one with one attempt (dead when its lease runs out) and
// one with two (ready again), reserved, then waited for until neither is
// reserved (at most expWait); it answers their states, attempts and the
// queue's history field by field, then deletes the ready one. The dead
// one stays (ids of sequence seq, so that each sequence puts new ones):
// a queue that no longer exists loses its series of the per-queue
// metrics, at moments that differ between the engines
// (service.TaskMetrics.ForgetQueue).
func expire(ctx context.Context, s service.Service, seq int) string {
	ids := []string{fmt.Sprint("once-", seq), fmt.Sprint("twice-", seq)}
	for k, id := range ids {
		if _, _, err := s.Put(ctx, expQueue, task.PutRequest{ID: id, TTR: expTTR, MaxAttempts: k + 1}); err != nil {
			return "put: " + kind(err)
		}
	}
	ts, err := s.Reserve(ctx, expQueue, 2, 0)
	if err != nil || len(ts) != 2 {
		return fmt.Sprintf("reserve: %d %s", len(ts), kind(err))
	}
	out := []string{}
	for _, id := range ids {
		var tk task.Task
		for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
			if tk, err = s.Get(expQueue, id); err != nil || tk.State != task.Reserved || time.Since(start) > expWait {
				break
			}
		}
		as, err2 := s.Attempts(ctx, expQueue, id)
		out = append(out, fmt.Sprintf("%s %s attempts %s %s", show(tk), kind(err), showAttempts(as), kind(err2)))
	}
	fs, _, err := s.FinishedTasks(ctx, expQueue, "", 0, 1000)
	out = append(out, fmt.Sprintf("history %s %s", showFinished(fs), kind(err)))
	// The ready one goes, so that the next sequence's reserve takes its
	// own two; the dead one stays, so that the queue does.
	return strings.Join(append(out, "delete "+kind(s.Delete(ctx, expQueue, ids[1]))), "\n    ")
}

// expTTR is the ttr of the lease-expiry step's tasks, and expWait how
// long it waits for their leases to be noticed as run out: long, so that
// a loaded machine does not fail the test, since the step ends as soon
// as both engines noticed.
const (
	expTTR  = 200 * time.Millisecond
	expWait = 30 * time.Second
)

// reserved keeps the leases of the tasks engine e handed out and returns
// the answer as compared.
func (d *differ) reserved(e int, ts []task.Task, err error) string {
	var out []string
	for _, tk := range ts {
		d.leases[e][tk.Queue+"/"+tk.ID] = tk.Lease
		out = append(out, show(tk))
	}
	return fmt.Sprintf("%v %s", out, kind(err))
}

// showAttempts shows attempts field by field as the differential test
// compares them: times by whether they are set and in order (each
// engine's clock is its own). The node (task.Attempt.Node, the node that
// ended the attempt) is left out: the embedded engine names none, and on
// a cluster a lease that ran out is ended by its partition's owner,
// either node.
func showAttempts(as []task.Attempt) string {
	var out []string
	for _, a := range as {
		out = append(out, fmt.Sprintf("{n=%d attempt=%d queue=%s started=%v ended=%s outcome=%q err=%q status=%d}",
			a.N, a.Attempt, a.Queue, !a.Started.IsZero(), order(a.Started, a.Ended), a.Outcome, a.Error, a.Status))
	}
	return fmt.Sprintf("%v", out)
}

// order shows when end is, from start: "-" unset, "before" start (a
// wrong record), "after" it (or at it).
func order(start, end time.Time) string {
	switch {
	case end.IsZero():
		return "-"
	case end.Before(start):
		return "before"
	}
	return "after"
}

// showFinished shows history records field by field as the differential
// test compares them: the job id by whether it is set (each engine's
// own), the time by whether it is set and the records' order by the
// order shown (newest first), each engine's list checked against its own
// times (in-order). Within a run of consecutive deleted records the order
// is not compared: DeleteDead and bulk deletes act on up to 8 tasks at
// once (service/bulk.go, bulkParallel), so the order in which those
// deletes commit, and their records are listed, is each run's own on
// either engine.
func showFinished(fs []task.Finished) string {
	var out []string
	run := 0 // where the run of deleted records ending at the last one began
	for k, f := range fs {
		newest := k == 0 || !f.Finished.After(fs[k-1].Finished)
		out = append(out, fmt.Sprintf("{%s/%s job=%v outcome=%s finished=%v in-order=%v attempts=%d err=%q}",
			f.Queue, f.ID, f.JobID != 0, f.Outcome, !f.Finished.IsZero(), newest, f.Attempts, f.LastError))
		if k == 0 || f.Outcome != task.FinishedDeleted || fs[k-1].Outcome != task.FinishedDeleted {
			run = k
		}
		slices.Sort(out[run:])
	}
	return fmt.Sprintf("%v", out)
}

// show is a task as the differential test compares it.
func show(t task.Task) string {
	if t.ID == "" && t.Queue == "" {
		return "-"
	}
	if t.State == task.Done { // a put deduped: the task that finished
		return fmt.Sprintf("{%s/%s %s outcome=%s attempts=%d err=%q}", t.Queue, t.ID, t.State, t.Outcome, t.Attempts, t.LastError)
	}
	return fmt.Sprintf("{%s/%s key=%q %s payload=%s prio=%d attempts=%d/%d err=%q leased=%v releases=%d buries=%d timeouts=%d kicks=%d}",
		t.Queue, t.ID, t.Key, t.State, t.Payload, t.Priority, t.Attempts, t.MaxAttempts, t.LastError, t.Lease != "",
		t.Releases, t.Buries, t.Timeouts, t.Kicks)
}

// kind names the sentinel err wraps, or its text.
func kind(err error) string {
	for _, s := range []error{task.ErrInvalid, task.ErrNotFound, task.ErrLease, task.ErrState, task.ErrTooLarge} {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	if err != nil {
		return "other: " + err.Error()
	}
	return "ok"
}

// testEnv is os.Getenv, for the seed.
var testEnv = os.Getenv

// policyText shows p with its retry's fields rather than its pointer.
func policyText(p task.Policy) string {
	r, rate := "<nil>", "<nil>"
	if p.Retry != nil {
		r = fmt.Sprintf("%+v", *p.Retry)
	}
	if p.Rate != nil {
		rate = fmt.Sprintf("%+v", *p.Rate)
	}
	perKey := "<nil>"
	if k := p.PerKey; k != nil {
		perKey = fmt.Sprintf("{Concurrency:%d}", k.Concurrency)
		if k.Rate != nil {
			perKey = fmt.Sprintf("{Concurrency:%d Rate:%+v}", k.Concurrency, *k.Rate)
		}
	}
	p.Retry, p.Rate, p.PerKey = nil, nil, nil
	return fmt.Sprintf("%+v retry %s rate %s per_key %s", p, r, rate, perKey)
}

// TestShowFinished_DeletesUnordered: two histories that differ only in
// the order of consecutive deleted records (a DeleteDead's, 8 at a time)
// show alike; any other difference of order shows.
func TestShowFinished_DeletesUnordered(t *testing.T) {
	at := time.Unix(100, 0)
	rec := func(id, outcome string, s int) task.Finished {
		return task.Finished{Queue: "q", ID: id, JobID: 1, Outcome: outcome, Finished: at.Add(-time.Duration(s) * time.Second)}
	}
	a := []task.Finished{rec("x", task.FinishedAcked, 0), rec("a", task.FinishedDeleted, 1), rec("e", task.FinishedDeleted, 2), rec("y", task.FinishedAcked, 3)}
	b := []task.Finished{a[0], rec("e", task.FinishedDeleted, 1), rec("a", task.FinishedDeleted, 2), a[3]}
	if showFinished(a) != showFinished(b) {
		t.Errorf("deletes in another order show apart:\n%s\n%s", showFinished(a), showFinished(b))
	}
	c := []task.Finished{rec("y", task.FinishedAcked, 0), a[1], a[2], rec("x", task.FinishedAcked, 3)}
	if showFinished(a) == showFinished(c) {
		t.Errorf("acks in another order show alike: %s", showFinished(a))
	}
}
