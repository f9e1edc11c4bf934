package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/cluster"
	"github.com/hourglass-go/hourglass/task"
)

// TestFlush_ReadsByJobID: the owner's flush reads the tasks whose timers
// fired by job id, whatever else is pending in their partitions. With
// 20k tasks pending an hour ahead and not yet analyzed (as after a bulk
// load), a flush of 10 of them (its generic plan, as ConfigurePool has
// it, and its custom one) touches under 1,000 buffers (about 160). The
// flush before, which found its tasks through the partitions' timer
// index, touched about 3,000 here, and 124k (115-227 ms a flush) at 100k
// pending, which made a 5k/s due stream hundreds of ms late. And the flush
// commits without waiting for the WAL flush.
func TestFlush_ReadsByJobID(t *testing.T) {
	ctx := context.Background()
	url := server(t).CreateDatabase(t)
	n := startNode(t, url, "a")
	jobs := putMany(t, n, 20_000, time.Hour)[:10]
	parts, epochs := owned(t, n)
	for _, mode := range []string{"force_generic_plan", "force_custom_plan"} {
		tx, err := n.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = "+mode); err != nil {
			t.Fatal(err)
		}
		var out []byte
		var sync string
		err = tx.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+cluster.SQLFlush,
			"a", parts, epochs, jobs, []string{}, []int32{}, task.LeaseExpired, true, "0123456789abcdef").Scan(&out)
		if err == nil {
			err = tx.QueryRow(ctx, "SHOW synchronous_commit").Scan(&sync)
		}
		tx.Rollback(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if sync != "off" {
			t.Errorf("%s: synchronous_commit in the flush's transaction = %q, want off (it commits without waiting for the WAL flush)", mode, sync)
		}
		var plan []struct {
			Plan struct {
				Hit  int `json:"Shared Hit Blocks"`
				Read int `json:"Shared Read Blocks"`
			}
		}
		if err := json.Unmarshal(out, &plan); err != nil || len(plan) != 1 {
			t.Fatalf("%s: EXPLAIN's JSON: %v\n%s", mode, err, out)
		}
		if blocks := plan[0].Plan.Hit + plan[0].Plan.Read; blocks > 1000 {
			t.Errorf("%s: a flush of %d jobs with 20k pending touched %d buffers, want a few hundred\n%s",
				mode, len(jobs), blocks, out)
		} else {
			t.Logf("%s: %d buffers", mode, blocks)
		}
	}
}

// TestFlush_Linear: a flush of many fired timers takes time in proportion
// to their number, whether it makes them ready or hands them over to
// waiting reservers. 20k tasks fall due with the node's flusher held,
// then one flush statement makes them all ready, or reserves them all
// for a waiter of their queue that takes 20k (inside a transaction
// rolled back). Each step is linear: a few hundred ms here. The flush
// that left out the fired jobs with NOT EXISTS was planned as a
// nested-loop anti-join over them, 20k × 20k comparisons, many seconds:
// under load flushes grew until the queue stalled for minutes. And the
// flush that joined the tasks it handed over (the CTE hand) to those it
// wrote as a nested loop (the generic plan guesses one row for a CTE)
// ran 20k × 20k comparisons twice: a flush made larger by a slow one
// before it (231 jobs: 60 ms in auto_explain at 1M pending, issue 40) was
// slower still.
func TestFlush_Linear(t *testing.T) {
	for _, hand := range []bool{false, true} {
		name := "ready"
		if hand {
			name = "handed"
		}
		t.Run(name, func(t *testing.T) { testFlushLinear(t, hand) })
	}
}

func testFlushLinear(t *testing.T, hand bool) {
	ctx := context.Background()
	// A lease long enough to outlast the test: the lease loop is held
	// with the flusher.
	n := startNode(t, server(t).CreateDatabase(t), "a", func(o *cluster.Options) { o.Lease = time.Minute })
	n.hooks.Pause()
	defer n.hooks.Resume()
	jobs := putMany(t, n, 20_000, time.Millisecond)
	time.Sleep(50 * time.Millisecond) // all due by the database's clock
	parts, epochs := owned(t, n)
	queues, lims, state := []string{}, []int32{}, 1
	if hand {
		queues, lims, state = []string{"q"}, []int32{int32(len(jobs))}, 2
	}
	tx, err := n.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	// A quadratic flush runs for minutes: cut it.
	if _, err := tx.Exec(ctx, "SET LOCAL statement_timeout = '60s'"); err != nil {
		t.Fatal(err)
	}
	// The statement as the node runs it: prepared, with its generic plan
	// (ConfigurePool).
	began := time.Now()
	rows, err := tx.Query(ctx, cluster.SQLFlush, "a", parts, epochs, jobs, queues, lims, task.LeaseExpired, true, "0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	took := time.Since(began)
	var done int
	if err := tx.QueryRow(ctx, "SELECT count(*) FROM hourglass_tasks WHERE state = $1 AND (fire_at IS NULL) = ($1 = 1)", state).Scan(&done); err != nil {
		t.Fatal(err)
	}
	if done != len(jobs) {
		t.Fatalf("the flush left %d of %d due tasks in state %d", done, len(jobs), state)
	}
	if took > 5*time.Second {
		t.Errorf("a flush of %d fired timers took %v: not linear", len(jobs), took)
	} else {
		t.Logf("a flush of %d fired timers: %v", len(jobs), took)
	}
}

// putMany puts k tasks into queue q of n, due after delay, in batches of
// 100, and returns their job ids.
func putMany(t *testing.T, n *testNode, k int, delay time.Duration) []int64 {
	t.Helper()
	var jobs []int64
	for len(jobs) < k {
		reqs := make([]task.PutRequest, min(100, k-len(jobs)))
		for i := range reqs {
			reqs[i].Delay = delay
		}
		for _, r := range n.PutBatch(context.Background(), "q", reqs) {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			jobs = append(jobs, int64(r.Task.JobID))
		}
	}
	return jobs
}

// owned returns the partitions n holds and their epochs, as the flush
// statement takes them.
func owned(t *testing.T, n *testNode) ([]int32, []int64) {
	t.Helper()
	var parts []int32
	var epochs []int64
	for p, e := range n.Owned() {
		parts, epochs = append(parts, int32(p)), append(epochs, e)
	}
	if len(parts) == 0 {
		t.Fatal("the node owns no partition")
	}
	return parts, epochs
}

// TestFlush_NotBlockedByRenewal: the owner's flush does not wait for the
// owner's own renewal of its leases. A renewal commits synchronously,
// holding its partitions' rows until its WAL flush is on disk; had the
// renewal locked them FOR UPDATE and the flush FOR SHARE (as before
// issue 40), every task falling due during a renewal's commit waited
// for it, which on a loaded disk made a light load tens of ms late at
// the p99. Here a renewal's transaction stays open while a task falls
// due: the task is delivered meanwhile. An acquisition by another node
// still waits for the flush (FOR UPDATE conflicts with FOR KEY SHARE):
// see the failover and handover tests.
func TestFlush_NotBlockedByRenewal(t *testing.T) {
	ctx := context.Background()
	url := server(t).CreateDatabase(t)
	n := startNode(t, url, "a")
	putMany(t, n, 1, 300*time.Millisecond)
	parts, epochs := owned(t, n)
	tx, err := n.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var alive bool
	var renewed []int32
	err = tx.QueryRow(ctx, cluster.SQLRenew, "a", parts, epochs, testLease.Microseconds(), n.Instance()).Scan(&alive, &renewed)
	if err != nil {
		t.Fatal(err)
	}
	if !alive || len(renewed) != len(parts) {
		t.Fatalf("the renewal renewed %d partitions of %d (heartbeat %v)", len(renewed), len(parts), alive)
	}
	ts, err := svc(n).Reserve(ctx, "q", 1, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 1 {
		t.Fatal("a task due in 300 ms was not delivered within 3 s while a renewal of its partition's lease was open: the flush waits for the renewal")
	}
}

// TestFlush_NotHeldBehindSlow: a task falling due while the owner's
// flush before it is slow is delivered meanwhile, by a flush beside the
// slow one (flushLanes). A transaction holds the row of the partition of
// a first task FOR UPDATE, so that the flush of that task waits at its
// fence; a second task, of another partition, falls due 400 ms later and
// must reach a waiting reserver while the first flush still waits. With
// one flush at a time it waited for the first, here until the
// transaction ended. Then the transaction ends and the first task is
// delivered too. The lock must be taken before the first task is due: a
// machine too slow for that tries again on a fresh queue, at most thrice.
func TestFlush_NotHeldBehindSlow(t *testing.T) {
	ctx := context.Background()
	url := server(t).CreateDatabase(t)
	// A lease that outlasts the test: the lock held here holds up the
	// renewal of the leases too.
	n := startNode(t, url, "a", func(o *cluster.Options) { o.Lease = time.Minute })
	put := func(queue string, delay time.Duration) (job int64, partition int) {
		t.Helper()
		r := n.PutBatch(ctx, queue, []task.PutRequest{{Delay: delay}})
		if r[0].Err != nil {
			t.Fatal(r[0].Err)
		}
		job = int64(r[0].Task.JobID)
		if err := n.pool.QueryRow(ctx, "SELECT partition FROM hourglass_tasks WHERE job_id = $1", job).Scan(&partition); err != nil {
			t.Fatal(err)
		}
		return job, partition
	}
	for try := range 3 {
		queue := fmt.Sprintf("q%d", try)
		putAt := time.Now()
		first, slow := put(queue, time.Second)
		tx, err := n.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, "SELECT 1 FROM hourglass_partitions WHERE partition = $1 FOR UPDATE", slow); err != nil {
			t.Fatal(err)
		}
		var second int64
		for range 100 {
			if j, p := put(queue, 1400*time.Millisecond); p != slow {
				second = j
				break
			}
		}
		if second == 0 {
			t.Fatal("100 tasks put, all in the first one's partition")
		}
		if d := time.Since(putAt); d > 800*time.Millisecond {
			t.Logf("the lock was taken %v after the first task was put, due after 1 s: trying again", d)
			tx.Rollback(ctx)
			continue
		}
		// Past the second task's time, the first's flush waits at its fence.
		ts, err := n.ReserveQueues(ctx, []string{queue}, 2, 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if len(ts) != 1 || int64(ts[0].JobID) != second {
			t.Fatalf("while the first task's flush waited, reserved %d tasks (%v), want the second alone (job %d)", len(ts), ts, second)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		ts, err = n.ReserveQueues(ctx, []string{queue}, 2, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if len(ts) != 1 || int64(ts[0].JobID) != first {
			t.Fatalf("once the slow flush could go on, reserved %d tasks (%v), want the first (job %d)", len(ts), ts, first)
		}
		return
	}
	t.Fatal("three tries, each too slow to take the lock before the first task was due")
}

// TestFlush_LocksInJobOrder: a flush locks its tasks' rows in job order
// before it writes any, so that two flushes whose jobs overlap (a node's
// two lanes, a timer announced twice) wait for each other in one order
// instead of deadlocking; PostgreSQL broke such cycles after its
// deadlock_timeout, stalling a node's deliveries for a second. Here
// another transaction holds the lowest job's row while a flush of 50 due
// jobs runs: the flush must wait there holding none of the other rows,
// which the other transaction then locks without waiting. A flush whose
// update locked its rows in its plan's order held some of them while it
// waited.
func TestFlush_LocksInJobOrder(t *testing.T) {
	ctx := context.Background()
	n := startNode(t, server(t).CreateDatabase(t), "a", func(o *cluster.Options) { o.Lease = time.Minute })
	n.hooks.Pause()
	defer n.hooks.Resume()
	jobs := putMany(t, n, 50, time.Millisecond)
	time.Sleep(50 * time.Millisecond) // all due by the database's clock
	parts, epochs := owned(t, n)
	low := slices.Min(jobs)
	var others []int64
	for _, j := range jobs {
		if j != low {
			others = append(others, j)
		}
	}
	// The plan: the timers step is a LockRows over its rows in job order.
	// (A small table's update scans it in physical order, which is job
	// order here, so the wait below alone does not tell the two apart.)
	var out []byte
	if err := n.pool.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+cluster.SQLFlush,
		"a", parts, epochs, jobs, []string{}, []int32{}, task.LeaseExpired, true, "0123456789abcdef").Scan(&out); err != nil {
		t.Fatal(err)
	}
	type node struct {
		Type    string   `json:"Node Type"`
		Subplan string   `json:"Subplan Name"`
		Parent  string   `json:"Parent Relationship"`
		SortKey []string `json:"Sort Key"`
		Plans   []node   `json:"Plans"`
	}
	var plan []struct{ Plan node }
	if err := json.Unmarshal(out, &plan); err != nil || len(plan) != 1 {
		t.Fatalf("EXPLAIN's JSON: %v\n%s", err, out)
	}
	var timers *node
	var walk func(*node)
	walk = func(p *node) {
		if p.Subplan == "CTE timers" {
			timers = p
		}
		for i := range p.Plans {
			walk(&p.Plans[i])
		}
	}
	walk(&plan[0].Plan)
	sorted := false
	if timers != nil && timers.Type == "LockRows" {
		for _, c := range timers.Plans {
			if c.Parent == "Outer" {
				sorted = c.Type != "Sort" || len(c.SortKey) > 0 && strings.HasSuffix(c.SortKey[0], ".job_id")
			}
		}
	}
	if !sorted {
		t.Errorf("the flush's timers step does not lock its rows in job order:\n%s", out)
	}
	hold, err := n.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Rollback(ctx)
	if _, err := hold.Exec(ctx, "SELECT 1 FROM hourglass_tasks WHERE job_id = $1 FOR UPDATE", low); err != nil {
		t.Fatal(err)
	}
	flush, err := n.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer flush.Rollback(ctx)
	// Without sorts the jobs are deduplicated by hashing, and without
	// sequential scans the rows are found by key in that order: out of
	// job order, as in a large table under load.
	if _, err := flush.Exec(ctx, "SET LOCAL statement_timeout = '60s'; SET LOCAL enable_sort = off; SET LOCAL enable_seqscan = off"); err != nil {
		t.Fatal(err)
	}
	var pid int
	if err := flush.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		rows, err := flush.Query(ctx, cluster.SQLFlush, "a", parts, epochs, jobs, []string{}, []int32{}, task.LeaseExpired, true, "0123456789abcdef")
		if err == nil {
			rows.Close()
			err = rows.Err()
		}
		done <- err
	}()
	// Wait (bounded) until the flush waits for a lock.
	for i := 0; ; i++ {
		var waiting bool
		if err := n.pool.QueryRow(ctx, "SELECT coalesce(wait_event_type = 'Lock', false) FROM pg_stat_activity WHERE pid = $1", pid).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		if i == 1000 {
			t.Fatal("the flush never waited for the row held")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := hold.Exec(ctx, "SET LOCAL lock_timeout = '1s'"); err != nil {
		t.Fatal(err)
	}
	if _, err := hold.Exec(ctx, "SELECT 1 FROM hourglass_tasks WHERE job_id = ANY($1) FOR UPDATE", others); err != nil {
		t.Errorf("a flush waiting for job %d held other jobs' rows: %v", low, err)
	}
	hold.Rollback(ctx)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestFlush_HandsOverRoundThenFill: tasks falling due at once are
// handed to a waiting reserver as a reserve would take them
// (service.KeyCompare): the round, each key's first task in the keys'
// order ("" last), then the fill in delivery order. Keys c, "", a, b put
// two tasks each, in that order, and a waiter for 6 is handed a1, b1,
// c1, ""1 and then c2, ""2 (put before a2 and b2); a hand-over that took
// a second round handed a2 and b2.
func TestFlush_HandsOverRoundThenFill(t *testing.T) {
	ctx := context.Background()
	n := startNode(t, server(t).CreateDatabase(t), "a", func(o *cluster.Options) { o.Lease = time.Minute })
	n.hooks.Pause()
	defer n.hooks.Resume()
	var reqs []task.PutRequest
	var names []string
	for _, k := range []string{"c", "", "a", "b"} {
		for i := 1; i <= 2; i++ {
			reqs = append(reqs, task.PutRequest{Key: k, Delay: time.Millisecond})
			names = append(names, fmt.Sprintf("%q%d", k, i))
		}
	}
	name := map[int64]string{}
	var jobs []int64
	for i, r := range n.PutBatch(ctx, "q", reqs) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		name[int64(r.Task.JobID)] = names[i]
		jobs = append(jobs, int64(r.Task.JobID))
	}
	time.Sleep(50 * time.Millisecond) // all due by the database's clock
	parts, epochs := owned(t, n)
	tx, err := n.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	rows, err := tx.Query(ctx, cluster.SQLFlush, "a", parts, epochs, jobs, []string{"q"}, []int32{6}, task.LeaseExpired, true, "0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	held, err := tx.Query(ctx, "SELECT job_id FROM hourglass_tasks WHERE state = 2 ORDER BY job_id")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for held.Next() {
		var j int64
		if err := held.Scan(&j); err != nil {
			t.Fatal(err)
		}
		got = append(got, name[j])
	}
	if err := held.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{`"c"1`, `"c"2`, `""1`, `""2`, `"a"1`, `"b"1`}
	if !slices.Equal(got, want) {
		t.Errorf("handed over %v, want %v (the round a1 b1 c1 \"\"1, then c2 \"\"2 in delivery order)", got, want)
	}
}
