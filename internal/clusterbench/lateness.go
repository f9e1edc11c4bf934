package clusterbench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hourglass-go/hourglass/cluster"
	"github.com/hourglass-go/hourglass/task"
)

// ackers is the number of goroutines acking deliveries, per node.
const ackers = 16

// lead is how far ahead of its first due time each batch of the due
// stream is put.
const lead = time.Second

// straggle is how long a due stream waits for its tasks after the last
// is due, or after the last put returned if that is later.
const straggle = 10 * time.Second

// Lateness is what a due stream measured: tasks delivered (of those
// due), how many before their due time, and the lateness (delivered −
// due) of those delivered; and the statements the nodes sent per task
// delivered meanwhile (the stream's puts, the owners' flushes, the
// reservations, the acks, and whatever the nodes did besides).
//
// PutLag is how far the stream's putter fell behind its own schedule: the
// most a batch's put returned after the time planned for it, a lead
// before its first due time. On a loaded machine one putter may not keep
// up: above lead, tasks were put after their due time, and their
// lateness includes that wait, which is the bench's, not the nodes'.
// Stragglers describes the tasks not delivered within straggle, as the
// database holds them after the stream (empty when every one was).
//
// Hops are the nodes' per-hop histograms over the stream (from the
// nodes' registries, summed over the nodes), and Process what the one Go
// process running the nodes and the load went through meanwhile (GC, and
// goroutines waiting for a CPU); String leaves both out.
type Lateness struct {
	Due, Delivered, Early int
	P50, P99, Max         time.Duration
	StatementsPerTask     float64
	PutLag                time.Duration
	Stragglers            string
	Hops                  []Hop
	Process               Process
	Waits                 Waits // with Cluster.SampleWaits
	// Pools is what each node's pool went through over the stream
	// (acquisitions that waited, connections opened).
	Pools []PoolStat
	// Stalls names the stretches of the stream whose tasks came more
	// than stallLate late, with what the backends did meanwhile where
	// Waits were sampled (describeStalls); empty when none.
	Stalls string
	// Over10ms counts the tasks delivered more than 10 ms late by the
	// half second of the stream they were due in: where in the stream
	// the p99's tail is.
	Over10ms []int
}

func (l Lateness) String() string {
	s := fmt.Sprintf("%d of %d delivered, %d early, p50 %v p99 %v max %v, %.2f statements/task, puts up to %v behind",
		l.Delivered, l.Due, l.Early, l.P50, l.P99, l.Max, l.StatementsPerTask, l.PutLag)
	if l.Stragglers != "" {
		s += "; not delivered: " + l.Stragglers
	}
	return s
}

// sample is one delivered task of a due stream.
type sample struct {
	id   string
	due  time.Time
	late time.Duration
	node int // the index of the node that delivered it
}

// streamed is what a due stream saw: a sample per task delivered (its
// first delivery), the due time of every task put, when each one's put
// returned, and how far the putter fell behind its schedule (see
// Lateness.PutLag).
type streamed struct {
	samples []sample
	dues    []time.Time
	puts    []time.Time
	putLag  time.Duration
	// failed counts the reserves that failed, and firstErr is the first
	// one's error: a reservation whose answer is lost (the node's
	// database timeout ran out after the statement committed) leaves its
	// tasks leased to no one until their TTR.
	failed   int
	firstErr error
}

// Lateness runs a due stream on queue: tasks due at rate per second for
// d, each batch of 100 put a second ahead of its due times through the
// nodes in turn, with 4 reservers waiting on every node (max 100, wait
// 1 s) and ackers beside them. Lateness is the time a reserve returned
// minus the task's due time.
func (c *Cluster) Lateness(ctx context.Context, queue string, rate int, d time.Duration) (Lateness, error) {
	s0 := c.Statements()
	before := c.snap()
	pools := poolStats(c.pools)
	rec, err := startRecorder(c.TraceTo)
	if err != nil {
		return Lateness{}, err
	}
	c.rec = rec
	var waits Waits
	wctx, stopWaits := context.WithCancel(ctx)
	var waited sync.WaitGroup
	if c.SampleWaits {
		waited.Go(func() { waits = c.sampleWaits(wctx) })
	}
	st, err := c.stream(ctx, queue, rate, d, c.live(), 0, nil)
	stopWaits()
	waited.Wait()
	c.rec = nil
	if rerr := rec.stop(); err == nil && rerr != nil {
		err = fmt.Errorf("hourglass: clusterbench: writing the trace: %w", rerr)
	}
	if err != nil {
		return Lateness{}, err
	}
	l := summarise(st.samples, len(st.dues))
	l.Hops, l.Process = hops(before, c.snap())
	l.Pools = poolDiff(pools, poolStats(c.pools))
	l.Waits = waits
	if len(st.dues) > 0 {
		l.Stalls = describeStalls(st.samples, waits.timeline, st.dues[0])
		l.Over10ms = lateBy(st.samples, st.dues[0], 500*time.Millisecond, 10*time.Millisecond)
	}
	l.PutLag = st.putLag
	if l.Delivered < l.Due {
		l.Stragglers = c.stragglers(ctx, queue, st, time.Time{})
	}
	if l.Delivered > 0 {
		l.StatementsPerTask = float64(c.Statements()-s0) / float64(l.Delivered)
	}
	return l, nil
}

// lateBy counts the samples more than late late by the stretch of width
// w, from first, they were due in.
func lateBy(samples []sample, first time.Time, w, late time.Duration) []int {
	var out []int
	for _, s := range samples {
		if s.late <= late {
			continue
		}
		i := max(int(s.due.Sub(first)/w), 0)
		for len(out) <= i {
			out = append(out, 0)
		}
		out[i]++
	}
	return out
}

// summarise computes the lateness figures of samples.
func summarise(samples []sample, due int) Lateness {
	late := make([]time.Duration, len(samples))
	for i, s := range samples {
		late[i] = s.late
	}
	slices.Sort(late)
	l := Lateness{Due: due, Delivered: len(late)}
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

// stream puts rate tasks a second due over d through nodes, reserves
// and acks them on nodes, and returns what it saw, waiting for
// stragglers up to c.straggle after the last due time or after the last
// put returned, whichever is later: on a loaded machine the putter may
// fall seconds behind its schedule, and a task cannot be delivered
// before it is put. at, if not nil, is called once, after offset from
// the first due time, on a goroutine of its own.
func (c *Cluster) stream(ctx context.Context, queue string, rate int, d time.Duration, nodes []*cluster.Node,
	offset time.Duration, at func()) (streamed, error) {
	count := int(d.Seconds() * float64(rate))
	start := time.Now().Add(lead)
	var mu sync.Mutex
	// st's samples, failed and firstErr are guarded by mu until the
	// reservers are done; the putter writes the rest.
	st := streamed{dues: make([]time.Time, 0, count), puts: make([]time.Time, 0, count)}
	var samples []sample
	seen := make(map[string]bool, count) // guarded by mu
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// On every node: 4 reservers waiting, and ackers beside them, so that
	// the reservers go back to waiting at once (an ack waits for a WAL
	// flush; a reserver acking its own tasks one by one falls behind
	// thousands a second).
	type acked struct {
		n         *cluster.Node
		id, lease string
	}
	acks := make(chan acked, 100_000)
	var ackWG sync.WaitGroup
	for range ackers * len(nodes) {
		ackWG.Go(func() {
			for a := range acks {
				a.n.AckMany(ctx, []task.Ack{{Queue: queue, ID: a.id, Lease: a.lease}})
			}
		})
	}
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
		close(acks)
		ackWG.Wait()
	}()
	for _, n := range nodes {
		ni := slices.Index(c.Nodes, n)
		for range 4 {
			wg.Go(func() {
				for rctx.Err() == nil {
					ts, err := n.ReserveQueues(rctx, []string{queue}, 100, time.Second)
					now := time.Now()
					if err != nil {
						mu.Lock()
						if rctx.Err() == nil {
							if st.failed++; st.firstErr == nil {
								st.firstErr = err
							}
						}
						mu.Unlock()
						continue
					}
					mu.Lock()
					for _, t := range ts {
						if !seen[t.ID] { // a task delivered again counts once
							seen[t.ID] = true
							samples = append(samples, sample{t.ID, t.Due, now.Sub(t.Due), ni})
							c.rec.late(now.Sub(t.Due))
						}
					}
					mu.Unlock()
					for _, t := range ts {
						acks <- acked{n, t.ID, t.Lease}
					}
				}
			})
		}
	}
	if at != nil {
		wg.Go(func() {
			select {
			case <-time.After(time.Until(start.Add(offset))):
				at()
			case <-rctx.Done():
			}
		})
	}
	// Put the due tasks in batches of 100, each due at its slot, each
	// batch a lead ahead of its first due time: a steady rate of puts
	// beside the rate falling due.
	step := time.Second / time.Duration(rate)
	for k := 0; k < count; k += 100 {
		first := start.Add(time.Duration(k) * step)
		time.Sleep(time.Until(first.Add(-lead)))
		if c.beforePut != nil {
			c.beforePut()
		}
		var reqs []task.PutRequest
		for j := k; j < min(k+100, count); j++ {
			reqs = append(reqs, task.PutRequest{At: start.Add(time.Duration(j) * step)})
			st.dues = append(st.dues, reqs[len(reqs)-1].At)
		}
		for _, r := range nodes[k/100%len(nodes)].PutBatch(ctx, queue, reqs) {
			if r.Err != nil {
				return streamed{}, r.Err
			}
		}
		now := time.Now()
		st.putLag = max(st.putLag, now.Sub(first.Add(-lead)))
		for range reqs {
			st.puts = append(st.puts, now)
		}
	}
	deadline := start.Add(d)
	if count > 0 {
		deadline = later(deadline, st.puts[count-1])
	}
	deadline = deadline.Add(c.straggle)
	for time.Now().Before(deadline) {
		mu.Lock()
		k := len(samples)
		mu.Unlock()
		if k >= count {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	st.samples = slices.Clone(samples)
	return st, nil
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// stragglers describes the tasks of st due from since on (the zero time:
// all) that it did not deliver, as the database holds them after the
// stream: how many in each state (1 waiting, 2 reserved), with or without
// a timer, by the owner of their partition, and the first few in full,
// each with when its put returned. A run that missed tasks says so what
// became of them.
func (c *Cluster) stragglers(ctx context.Context, queue string, st streamed, since time.Time) string {
	got := make(map[string]bool, len(st.samples))
	for _, s := range st.samples {
		got[s.id] = true
	}
	putAt := make(map[int64]time.Time, len(st.dues))
	for i, d := range st.dues {
		putAt[d.UnixNano()] = st.puts[i]
	}
	from := int64(math.MinInt64) // the zero time's UnixNano is undefined
	if !since.IsZero() {
		from = since.UnixNano()
	}
	rows, err := c.admin.Query(ctx, `SELECT t.id, t.job_id, t.state, t.partition, coalesce(p.owner, ''), p.epoch,
			t.due, t.fire_at, t.attempts, hourglass_now()
		FROM hourglass_tasks t JOIN hourglass_partitions p ON p.partition = t.partition
		WHERE t.queue = $1 AND t.due >= $2 ORDER BY t.due, t.job_id`, queue, from)
	if err != nil {
		return fmt.Sprintf("(reading them: %v)", err)
	}
	defer rows.Close()
	type kind struct {
		state int
		timer bool
		owner string
	}
	counts := map[kind]int{}
	var kinds []kind
	var examples []string
	missing := 0
	for rows.Next() {
		var (
			id                string
			job, epoch        int64
			state, part       int
			owner             string
			due, attempts, db int64
			fireAt            *int64
		)
		if err := rows.Scan(&id, &job, &state, &part, &owner, &epoch, &due, &fireAt, &attempts, &db); err != nil {
			return fmt.Sprintf("(reading them: %v)", err)
		}
		if got[id] {
			continue
		}
		missing++
		k := kind{state, fireAt != nil, owner}
		if counts[k] == 0 {
			kinds = append(kinds, k)
		}
		counts[k]++
		if len(examples) < 3 {
			timer := "none"
			if fireAt != nil {
				timer = fmt.Sprintf("%v", time.Duration(*fireAt-db))
			}
			put := "not by this stream"
			if p, ok := putAt[due]; ok {
				put = fmt.Sprintf("%v after its due time", p.Sub(time.Unix(0, due)))
			}
			examples = append(examples, fmt.Sprintf("job %d state %d partition %d (owner %q, epoch %d) due %v ago, timer %s, attempts %d, put returned %s",
				job, state, part, owner, epoch, time.Duration(db-due), timer, attempts, put))
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Sprintf("(reading them: %v)", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d in the database:", missing)
	for _, k := range kinds {
		fmt.Fprintf(&b, " %d in state %d, timer %v, partition owner %q;", counts[k], k.state, k.timer, k.owner)
	}
	b.WriteString(" e.g. " + strings.Join(examples, "; "))
	if st.failed > 0 {
		fmt.Fprintf(&b, "; %d reserves failed (the first: %v)", st.failed, st.firstErr)
	}
	return b.String()
}
