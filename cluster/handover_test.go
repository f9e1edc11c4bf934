package cluster_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hourglass-go/hourglass/cluster"
	"github.com/hourglass-go/hourglass/task"
)

// counter reads the counter name from reg.
func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// reserved is what a Reserve returned.
type reserved struct {
	ts  []task.Task
	err error
}

// reserveAsync runs n.Reserve on a goroutine of its own and sends its
// result on the channel returned.
func reserveAsync(ctx context.Context, n *testNode, queue string, max int, wait time.Duration) <-chan reserved {
	got := make(chan reserved, 1)
	go func() {
		ts, err := svc(n).Reserve(ctx, queue, max, wait)
		got <- reserved{ts, err}
	}()
	return got
}

// TestFlush_HandsOver: a reserver waiting on a queue is handed the tasks
// that fall due there by the owner's flush, which reserved them in its
// own round trip (hourglass_cluster_flush_handed_total counts each), in
// delivery order and no more than it takes; what it cannot take stays
// ready for the next reserve. Waiting tasks falling due, handed or made
// ready (a queue without a waiter), are flushed by the common statement
// alone (sqlFlushDue), never the whole one.
func TestFlush_HandsOver(t *testing.T) {
	ctx := context.Background()
	n, reg := startMetered(t, server(t).CreateDatabase(t), "a")
	got := reserveAsync(ctx, n, "q", 2, 10*time.Second)
	eventually(t, 5*time.Second, "the reserver waiting", func() bool { return n.Waiting("q") == 1 })
	// One put of three tasks due together, a second ahead: none is ready
	// before the reserver waits, even on a slow machine.
	at := time.Now().Add(time.Second)
	var reqs []task.PutRequest
	for _, prio := range []uint32{5, 1, 3} {
		reqs = append(reqs, task.PutRequest{At: at, Priority: prio})
	}
	for _, r := range n.PutBatch(ctx, "q", reqs) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if r := n.PutBatch(ctx, "other", []task.PutRequest{{ID: "x", At: at}}); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	r := <-got
	if r.err != nil || len(r.ts) == 0 {
		t.Fatalf("Reserve = %v, %v; want the tasks falling due", r.ts, r.err)
	}
	for _, tk := range r.ts {
		if early := time.Until(at); tk.Due.Before(at) || early > 0 {
			t.Errorf("task %s delivered early", tk.ID)
		}
		if tk.State != task.Reserved || tk.Attempts != 1 || tk.Lease == "" {
			t.Errorf("handed task %+v: want reserved, attempt 1, a lease", tk)
		}
	}
	// In delivery order: 1 then 3 when one flush made all three due; a
	// loaded machine may fire one of the timers after the flusher took
	// the others (1 and 5, say, and 3 in the next flush).
	if len(r.ts) == 2 && r.ts[0].Priority > r.ts[1].Priority {
		t.Errorf("handed priorities %d, %d; want them in delivery order", r.ts[0].Priority, r.ts[1].Priority)
	}
	if h := counter(t, reg, "hourglass_cluster_flush_handed_total"); int(h) != len(r.ts) {
		t.Errorf("handed_total = %v, want %d: the reserver was not handed its tasks by the flush", h, len(r.ts))
	}
	for _, tk := range r.ts {
		if err := svc(n).Ack(ctx, "q", tk.ID, tk.Lease); err != nil {
			t.Errorf("Ack(%s) = %v", tk.ID, err)
		}
	}
	// The rest is ready for anyone.
	left := 3 - len(r.ts)
	ts, err := svc(n).Reserve(ctx, "q", 3, time.Second)
	if err != nil || len(ts) != left {
		t.Fatalf("Reserve of the rest = %d tasks, %v; want %d", len(ts), err, left)
	}
	// A loaded machine may fire the timers into two flushes that run
	// side by side (flushLanes), each reserving for the reserver: the
	// one that ends second gives back what it could not hand over, and
	// only that.
	if g := counter(t, reg, "hourglass_cluster_flush_given_back_total"); int(g) > left {
		t.Errorf("given_back_total = %v, want at most %d (the tasks the reserver did not take)", g, left)
	}
	eventually(t, 5*time.Second, "the task of the queue without a waiter ready", func() bool {
		tk, err := svc(n).Get("other", "x")
		return err == nil && tk.State == task.Ready
	})
	if due, whole := flushStatements(t, reg); due == 0 || whole != 0 {
		t.Errorf("flush statements: %v due, %v whole; want the due one alone", due, whole)
	}
}

// TestFlush_GivesBack: tasks a flush reserved for a reserver that gives
// up before they are handed over are made ready again with their attempt
// undone, and the next reserve gets them as if never reserved.
func TestFlush_GivesBack(t *testing.T) {
	ctx := context.Background()
	n, reg := startMetered(t, server(t).CreateDatabase(t), "a")
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	got := reserveAsync(wctx, n, "q", 1, 5*time.Second)
	var r reserved
	n.hooks.Handing(func() {
		// The reserver gives up while the flush's statement runs.
		cancel()
		select {
		case r = <-got:
		case <-time.After(5 * time.Second):
			t.Error("the cancelled reserver did not return")
		}
	})
	eventually(t, 5*time.Second, "the reserver waiting", func() bool { return n.Waiting("q") == 1 })
	if _, _, err := svc(n).Put(ctx, "q", task.PutRequest{Delay: 300 * time.Millisecond, ID: "x"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the task given back", func() bool {
		return counter(t, reg, "hourglass_cluster_flush_given_back_total") == 1
	})
	if len(r.ts) != 0 || r.err != nil {
		t.Errorf("the cancelled reserver got %v, %v; want nothing", r.ts, r.err)
	}
	if h := counter(t, reg, "hourglass_cluster_flush_handed_total"); h != 0 {
		t.Errorf("handed_total = %v, want 0", h)
	}
	ts, err := svc(n).Reserve(ctx, "q", 1, time.Second)
	if err != nil || len(ts) != 1 {
		t.Fatalf("Reserve after the give-back = %v, %v", ts, err)
	}
	if ts[0].ID != "x" || ts[0].Attempts != 1 || ts[0].Timeouts != 0 {
		t.Errorf("task after the give-back: %+v; want attempt 1, no timeout", ts[0])
	}
	if err := svc(n).Ack(ctx, "q", ts[0].ID, ts[0].Lease); err != nil {
		t.Error(err)
	}
}

// TestFlush_HandsOverNotPausedNotDead: the flush hands a waiting reserver
// nothing from a paused queue (it gets the task once the pause ends) and
// never a task whose lease ran out with its attempts used up (it dies).
func TestFlush_HandsOverNotPausedNotDead(t *testing.T) {
	ctx := context.Background()
	n, reg := startMetered(t, server(t).CreateDatabase(t), "a")

	// Paused: the task falls due 200 ms in, the pause ends at 3 s (from
	// the pause, so measured from before it): long enough that the flush
	// making it due runs during the pause on a loaded machine too (with a
	// pause of 800 ms a full test run at load 25 once saw the flush run
	// after it, and hand the task over, as it may then).
	const pause = 3 * time.Second
	began := time.Now()
	if err := svc(n).PauseQueue(context.Background(), "p", pause); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc(n).Put(ctx, "p", task.PutRequest{Delay: 200 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	ts, err := svc(n).Reserve(ctx, "p", 1, 5*time.Second)
	if err != nil || len(ts) != 1 {
		t.Fatalf("Reserve on the paused queue = %v, %v", ts, err)
	}
	if took := time.Since(began); took < pause {
		t.Errorf("a task of a paused queue was delivered %v in, before the pause ended", took)
	}
	if h := counter(t, reg, "hourglass_cluster_flush_handed_total"); h != 0 {
		t.Errorf("handed_total = %v after a paused queue's task, want 0", h)
	}

	// Attempts used up: reserved once of one, its lease runs out while a
	// reserver waits.
	if _, _, err := svc(n).Put(ctx, "d", task.PutRequest{ID: "once", MaxAttempts: 1, TTR: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if ts, err := svc(n).Reserve(ctx, "d", 1, 0); err != nil || len(ts) != 1 {
		t.Fatalf("Reserve = %v, %v", ts, err)
	}
	ts, err = svc(n).Reserve(ctx, "d", 1, 1500*time.Millisecond)
	if err != nil || len(ts) != 0 {
		t.Fatalf("a waiting reserver got %v, %v: want nothing, the task is dead", ts, err)
	}
	if got, err := svc(n).Get("d", "once"); err != nil || got.State != task.Dead {
		t.Errorf("the task after its last lease ran out: %+v, %v; want dead", got, err)
	}
	if h := counter(t, reg, "hourglass_cluster_flush_handed_total"); h != 0 {
		t.Errorf("handed_total = %v, want 0", h)
	}
}

// TestFlush_FencedThenTakenAgain: a flush that finds itself fenced out of
// a partition at the epoch it read, after the lease loop lost that lease
// and took the partition again at a new epoch, keeps the new lease and
// arms its timers again: the task falls due and is handed out within
// moments, not once the new lease has run out (as when the flush dropped
// the partition whatever its epoch).
func TestFlush_FencedThenTakenAgain(t *testing.T) {
	ctx := context.Background()
	const lease = 4 * time.Second
	n := startNode(t, server(t).CreateDatabase(t), "a", func(o *cluster.Options) { o.Lease = lease })
	eventually(t, 10*time.Second, "every partition held", func() bool { return len(n.Owned()) == 64 })
	var once sync.Once
	n.hooks.Flushing(func() {
		once.Do(func() {
			// Every lease runs out now; the next round loses them all and
			// takes them again at new epochs, while this flush still has
			// the old ones.
			if _, err := n.pool.Exec(ctx, `UPDATE hourglass_partitions SET lease_until = clock_timestamp() - interval '1 millisecond'`); err != nil {
				t.Error(err)
			}
			if err := n.Tick(ctx); err != nil {
				t.Error(err)
			}
		})
	})
	at := time.Now().Add(300 * time.Millisecond)
	if _, _, err := svc(n).Put(ctx, "q", task.PutRequest{At: at}); err != nil {
		t.Fatal(err)
	}
	ts, err := svc(n).Reserve(ctx, "q", 1, 2*lease)
	if err != nil || len(ts) != 1 {
		t.Fatalf("Reserve = %v, %v; want the task", ts, err)
	}
	if late := time.Since(at); late > lease/2 {
		t.Errorf("task handed out %v after it fell due; want well within the lease (%v)", late.Round(time.Millisecond), lease)
	}
	if got := len(n.Owned()); got != 64 {
		t.Errorf("node holds %d partitions after the fenced flush; want 64", got)
	}
}
