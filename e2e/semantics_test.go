package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/client"
)

// promptly bounds how long after an event (a put, a due time, a lease's
// end) an answer may come in these tests: far above what the server
// needs, so that a slow machine or -race does not fail them, and far
// below the waits, so that a reserve that merely ran out its wait does.
const promptly = 1500 * time.Millisecond

// TestLongPoll checks reserve's wait: an empty queue answers an empty
// list once the wait is over, a waiting reserver gets a task as soon as it
// is put or falls due (never before its due time), and a reserver that
// goes away takes nothing with it.
func TestLongPoll(t *testing.T) { engines(t, testLongPoll) }

func testLongPoll(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.client()
	ctx := context.Background()

	start := time.Now()
	tasks, err := c.Reserve(ctx, "lp", 1, 400*time.Millisecond)
	if took := time.Since(start); err != nil || len(tasks) != 0 || took < 400*time.Millisecond || took > 400*time.Millisecond+promptly {
		t.Errorf("Reserve of an empty queue, wait 400ms: %+v, %v after %v", tasks, err, took)
	}

	// A put wakes a waiting reserver.
	got := make(chan reserved, 1)
	go func() { got <- reserveOnce(c, "lp", 10*time.Second) }()
	time.Sleep(300 * time.Millisecond)
	put, _, err := c.Put(ctx, "lp", api.PutRequest{ID: "wake"})
	putAt := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil || len(r.tasks) != 1 || r.tasks[0].JobID != put.JobID {
		t.Fatalf("waiting Reserve: %+v, %v", r.tasks, r.err)
	}
	if late := r.at.Sub(putAt); late > lateAllowed(t, promptly, putAt, r.at) {
		t.Errorf("waiting Reserve answered %v after the put", late)
	}

	// A delayed task reaches a waiting reserver at its due time, not before.
	put, _, err = c.Put(ctx, "lp", api.PutRequest{ID: "later", Delay: new(api.Duration(700 * time.Millisecond))})
	if err != nil {
		t.Fatal(err)
	}
	r = reserveOnce(c, "lp", 5*time.Second)
	if r.err != nil || len(r.tasks) != 1 || r.tasks[0].JobID != put.JobID {
		t.Fatalf("Reserve of a delayed task: %+v, %v", r.tasks, r.err)
	}
	if r.at.Before(put.Due) || r.at.Sub(put.Due) > lateAllowed(t, promptly, put.Due, r.at) {
		t.Errorf("delayed task due %v handed out at %v (lateness %v)", put.Due, r.at, r.at.Sub(put.Due))
	}
	if err := c.Ack(ctx, "lp", "later", r.tasks[0].Lease); err != nil {
		t.Fatal(err)
	}

	// A reserver that gives up (its context ends) takes nothing: a task
	// put afterwards is there for the next one.
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	start = time.Now()
	_, err = c.Reserve(cctx, "lp", 1, time.Minute)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > lateAllowed(t, promptly, start, time.Now()) {
		t.Errorf("cancelled Reserve: %v after %v", err, time.Since(start))
	}
	time.Sleep(100 * time.Millisecond)
	if _, _, err := c.Put(ctx, "lp", api.PutRequest{ID: "after-cancel"}); err != nil {
		t.Fatal(err)
	}
	tasks, err = c.Reserve(ctx, "lp", 10, 0)
	if err != nil || len(tasks) != 1 || tasks[0].ID != "after-cancel" || tasks[0].Attempts != 1 {
		t.Errorf("Reserve after a cancelled long poll: %+v, %v; want after-cancel, first attempt", tasks, err)
	}
}

// TestNeverEarly puts tasks with random delays of up to a second while
// reservers wait, and checks that none is handed out before its due time
// (the client's clock is the server's: same machine). It logs the
// lateness.
func TestNeverEarly(t *testing.T) { engines(t, testNeverEarly) }

func testNeverEarly(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.client()
	ctx := context.Background()
	const n = 200
	r := rand.New(rand.NewPCG(1, 2))
	due := make(map[uint64]time.Time, n)
	var reqs []api.PutRequest
	for i := range n {
		reqs = append(reqs, api.PutRequest{ID: fmt.Sprint("t", i), Delay: new(api.Duration(time.Duration(r.IntN(1000)) * time.Millisecond))})
	}
	var mu sync.Mutex
	var lateness []time.Duration
	var early []string
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 3 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				got := reserveOnce(c, "early", 300*time.Millisecond)
				mu.Lock()
				for _, task := range got.tasks {
					d, ok := due[task.JobID]
					if !ok {
						d = task.Due // put answer not read yet; the task's own due
					}
					if got.at.Before(d) || got.at.Before(task.Due) {
						early = append(early, fmt.Sprintf("%s due %v handed out at %v", task.ID, d, got.at))
					}
					lateness = append(lateness, got.at.Sub(d))
				}
				mu.Unlock()
				for _, task := range got.tasks {
					c.Ack(ctx, "early", task.ID, task.Lease)
				}
			}
		})
	}
	for i := 0; i < n; i += 50 {
		res, err := c.PutBatch(ctx, "early", reqs[i:i+50])
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		for _, r := range res {
			if r.Task == nil {
				t.Fatalf("batch item: %s", r.Error)
			}
			due[r.Task.JobID] = r.Task.Due
		}
		mu.Unlock()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		done := len(lateness)
		mu.Unlock()
		if done >= n || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if len(early) > 0 {
		t.Errorf("%d tasks handed out before their due time: %s", len(early), strings.Join(early[:min(len(early), 5)], "; "))
	}
	if len(lateness) != n {
		t.Fatalf("%d deliveries of %d tasks", len(lateness), n)
	}
	slices.Sort(lateness)
	t.Logf("%d deliveries: lateness p50 %v, p99 %v, max %v (client side, over HTTP)", n, lateness[n/2], lateness[n*99/100], lateness[n-1])
}

// TestLeaseExpiry checks that a lease not acknowledged within its ttr
// ends: the task is ready again (with its attempts counted and a new
// lease), the old lease is stale, and touch keeps a lease alive.
func TestLeaseExpiry(t *testing.T) { engines(t, testLeaseExpiry) }

func testLeaseExpiry(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.client()
	ctx := context.Background()
	const ttr = time.Second // long enough for the calls below within a lease
	if _, _, err := c.Put(ctx, "lease", api.PutRequest{ID: "slow", TTR: new(api.Duration(ttr))}); err != nil {
		t.Fatal(err)
	}
	first := reserveOnce(c, "lease", 0)
	if first.err != nil || len(first.tasks) != 1 || first.tasks[0].Attempts != 1 {
		t.Fatalf("Reserve: %+v, %v", first.tasks, first.err)
	}
	if task, err := c.Get(ctx, "lease", "slow"); err != nil || task.State != api.StateReserved {
		t.Errorf("Get while leased: %+v, %v", task, err)
	}
	if tasks, err := c.Reserve(ctx, "lease", 1, 0); err != nil || len(tasks) != 0 {
		t.Errorf("Reserve while leased: %+v, %v; want nothing", tasks, err)
	}
	second := reserveOnce(c, "lease", 5*time.Second)
	if second.err != nil || len(second.tasks) != 1 || second.tasks[0].Attempts != 2 || second.tasks[0].Lease == first.tasks[0].Lease {
		t.Fatalf("Reserve after the lease ran out: %+v, %v", second.tasks, second.err)
	}
	// The lease began between the first reserve's sending and its answer.
	if held := second.at.Sub(first.sent); held < ttr || second.at.Sub(first.at) > ttr+promptly {
		t.Errorf("task reserved (ttr %v) between %v and %v handed out again at %v", ttr, first.sent, first.at, second.at)
	}
	old := first.tasks[0].Lease
	if err := c.Ack(ctx, "lease", "slow", old); !errors.Is(err, client.ErrConflict) {
		t.Errorf("Ack with the expired lease: %v, want ErrConflict", err)
	}
	if _, err := c.Touch(ctx, "lease", "slow", old); !errors.Is(err, client.ErrConflict) {
		t.Errorf("Touch with the expired lease: %v, want ErrConflict", err)
	}

	// Touching renews the lease for another ttr: touching every 300 ms
	// keeps a task with a 1 s ttr past its first lease.
	if _, _, err := c.Put(ctx, "lease", api.PutRequest{ID: "touched", TTR: new(api.Duration(time.Second))}); err != nil {
		t.Fatal(err)
	}
	if err := c.Ack(ctx, "lease", "slow", second.tasks[0].Lease); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	third := reserveOnce(c, "lease", 0)
	if third.err != nil || len(third.tasks) != 1 || third.tasks[0].ID != "touched" {
		t.Fatalf("Reserve: %+v, %v", third.tasks, third.err)
	}
	lease := third.tasks[0].Lease
	for range 5 {
		time.Sleep(300 * time.Millisecond)
		task, err := c.Touch(ctx, "lease", "touched", lease)
		if err != nil {
			t.Fatalf("Touch %v after the reserve: %v", time.Since(third.at), err)
		}
		lease = task.Lease
	}
	if tasks, err := c.Reserve(ctx, "lease", 1, 0); err != nil || len(tasks) != 0 {
		t.Errorf("Reserve of a touched task: %+v, %v; want nothing", tasks, err)
	}
	if err := c.Ack(ctx, "lease", "touched", lease); err != nil {
		t.Errorf("Ack after touches: %v", err)
	}
}

// TestNack checks that nack gives a task back: after its delay (delayed
// in the meantime), or at once without one.
func TestNack(t *testing.T) { engines(t, testNack) }

func testNack(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.client()
	ctx := context.Background()
	if _, _, err := c.Put(ctx, "nack", api.PutRequest{ID: "n"}); err != nil {
		t.Fatal(err)
	}
	r := reserveOnce(c, "nack", 0)
	if r.err != nil || len(r.tasks) != 1 {
		t.Fatalf("Reserve: %+v, %v", r.tasks, r.err)
	}
	nackAt := time.Now()
	if _, err := c.Nack(ctx, "nack", "n", r.tasks[0].Lease, 500*time.Millisecond, ""); err != nil {
		t.Fatalf("Nack: %v", err)
	}
	task, err := c.Get(ctx, "nack", "n")
	if err != nil || task.State != api.StateDelayed || task.Due.Before(nackAt.Add(500*time.Millisecond)) || task.Due.After(time.Now().Add(500*time.Millisecond)) {
		t.Errorf("Get after Nack with 500ms: %+v, %v (nacked at %v)", task, err, nackAt)
	}
	if tasks, err := c.Reserve(ctx, "nack", 1, 0); err != nil || len(tasks) != 0 {
		t.Errorf("Reserve right after Nack with a delay: %+v, %v", tasks, err)
	}
	r = reserveOnce(c, "nack", 5*time.Second)
	if r.err != nil || len(r.tasks) != 1 || r.tasks[0].Attempts != 2 {
		t.Fatalf("Reserve after the nack's delay: %+v, %v", r.tasks, r.err)
	}
	if r.at.Before(task.Due) {
		t.Errorf("nacked task due %v handed out at %v", task.Due, r.at)
	}
	if _, err := c.Nack(ctx, "nack", "n", r.tasks[0].Lease, 0, ""); err != nil {
		t.Fatalf("Nack without delay: %v", err)
	}
	if task, err := c.Get(ctx, "nack", "n"); err != nil || task.State != api.StateReady {
		t.Errorf("Get after Nack without delay: %+v, %v; want ready", task, err)
	}
	if _, err := c.Nack(ctx, "nack", "n", r.tasks[0].Lease, 0, ""); !errors.Is(err, client.ErrConflict) {
		t.Errorf("second Nack with the same lease: %v, want ErrConflict", err)
	}
}

// TestDeadAndKick checks that a task dies when its attempts are used up,
// by lease expiry or by nack, is then handed out no more, shows as dead,
// and that kick makes it ready again.
func TestDeadAndKick(t *testing.T) { engines(t, testDeadAndKick) }

func testDeadAndKick(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.client()
	ctx := context.Background()
	if _, _, err := c.Put(ctx, "dead", api.PutRequest{ID: "expiring", MaxAttempts: 2, TTR: new(api.Duration(200 * time.Millisecond))}); err != nil {
		t.Fatal(err)
	}
	for attempt := 1; attempt <= 2; attempt++ {
		r := reserveOnce(c, "dead", 5*time.Second)
		if r.err != nil || len(r.tasks) != 1 || r.tasks[0].Attempts != attempt {
			t.Fatalf("Reserve %d: %+v, %v", attempt, r.tasks, r.err)
		}
	}
	task := waitState(t, c, "dead", "expiring", api.StateDead, 5*time.Second)
	if task.Attempts != 2 {
		t.Errorf("dead task: %+v, want 2 attempts", task)
	}

	if _, _, err := c.Put(ctx, "dead", api.PutRequest{ID: "nacked", MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	r := reserveOnce(c, "dead", 0)
	if r.err != nil || len(r.tasks) != 1 || r.tasks[0].ID != "nacked" {
		t.Fatalf("Reserve: %+v, %v", r.tasks, r.err)
	}
	if _, err := c.Nack(ctx, "dead", "nacked", r.tasks[0].Lease, 0, ""); err != nil {
		t.Fatalf("Nack of the last attempt: %v", err)
	}
	if task, err := c.Get(ctx, "dead", "nacked"); err != nil || task.State != api.StateDead {
		t.Errorf("after the last attempt's Nack: %+v, %v; want dead", task, err)
	}

	if tasks, err := c.Reserve(ctx, "dead", 10, 300*time.Millisecond); err != nil || len(tasks) != 0 {
		t.Errorf("Reserve with only dead tasks: %+v, %v; want nothing", tasks, err)
	}
	if qs, err := c.Queues(ctx); err != nil || !slices.Equal(qs, []api.Queue{{Name: "dead", Dead: 2}}) {
		t.Errorf("Queues: %+v, %v; want 2 dead", qs, err)
	}

	if err := c.Kick(ctx, "dead", "expiring"); err != nil {
		t.Fatalf("Kick: %v", err)
	}
	if err := c.Kick(ctx, "dead", "expiring"); !errors.Is(err, client.ErrConflict) {
		t.Errorf("second Kick: %v, want ErrConflict", err)
	}
	if task, err := c.Get(ctx, "dead", "expiring"); err != nil || task.State != api.StateReady {
		t.Errorf("after Kick: %+v, %v; want ready", task, err)
	}
	r = reserveOnce(c, "dead", 0)
	if r.err != nil || len(r.tasks) != 1 || r.tasks[0].ID != "expiring" {
		t.Fatalf("Reserve after Kick: %+v, %v", r.tasks, r.err)
	}
	// Its lease is still 200 ms: on a loaded machine it may run out
	// before the ack (its third attempt, dead again), which is right.
	expired := false
	if err := c.Ack(ctx, "dead", "expiring", r.tasks[0].Lease); err != nil {
		if took := time.Since(r.sent); errors.Is(err, client.ErrConflict) && took > 200*time.Millisecond {
			t.Logf("Ack after Kick %v after the reserve was sent, past the 200 ms lease: %v", took, err)
			expired = true
		} else {
			t.Errorf("Ack after Kick: %v", err)
		}
	}
	if err := c.Delete(ctx, "dead", "nacked"); err != nil {
		t.Errorf("Delete of a dead task: %v", err)
	}
	// The broker lists a queue that had tasks since it started, with
	// zero counts once it has none (package api says "every queue that
	// holds tasks"): accept either.
	if expired {
		waitState(t, c, "dead", "expiring", api.StateDead, 5*time.Second)
		if qs, err := c.Queues(ctx); err != nil || !slices.Equal(qs, []api.Queue{{Name: "dead", Dead: 1}}) {
			t.Errorf("Queues at the end: %+v, %v; want the expired task dead", qs, err)
		}
		return
	}
	if qs, err := c.Queues(ctx); err != nil || len(qs) > 1 || len(qs) == 1 && qs[0] != (api.Queue{Name: "dead"}) {
		t.Errorf("Queues at the end: %+v, %v; want none, or dead with no task", qs, err)
	}
}

// TestPriorityOrder checks the order of reserve: priority (lower first),
// then due time, then put order.
func TestPriorityOrder(t *testing.T) { engines(t, testPriorityOrder) }

func testPriorityOrder(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.client()
	ctx := context.Background()
	now := time.Now().UTC()
	for _, r := range []api.PutRequest{
		{ID: "a", Priority: new(uint32(5))},
		{ID: "b", Priority: new(uint32(1)), At: new(now.Add(-time.Second))},
		{ID: "c", Priority: new(uint32(1)), At: new(now.Add(-2 * time.Second))},
		{ID: "d", Priority: new(uint32(1))},
		{ID: "f", Priority: new(uint32(1)), At: new(now.Add(-2 * time.Second))},
		{ID: "e", Priority: new(uint32(0))},
		{ID: "g"}, // the default, 1024
		{ID: "h", Priority: new(uint32(4294967295))},
		{ID: "z", Priority: new(uint32(0)), Delay: new(api.Duration(time.Hour))}, // not ready
	} {
		if _, _, err := c.Put(ctx, "prio", r); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"e", "c", "f", "b", "d", "a", "g", "h"}
	var got []string
	for len(got) < len(want) {
		tasks, err := c.Reserve(ctx, "prio", 3, 0)
		if err != nil || len(tasks) == 0 {
			t.Fatalf("Reserve: %+v, %v after %v", tasks, err, got)
		}
		for _, task := range tasks {
			got = append(got, task.ID)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("reserve order %v, want %v", got, want)
	}
}

// reserved is one reserve's answer, when it was sent and when the client
// had the answer.
type reserved struct {
	tasks    []api.Task
	err      error
	sent, at time.Time
}

// reserveOnce reserves up to 10 tasks of queue, waiting up to wait.
func reserveOnce(c *client.Client, queue string, wait time.Duration) reserved {
	ctx, cancel := context.WithTimeout(context.Background(), wait+30*time.Second)
	defer cancel()
	sent := time.Now()
	tasks, err := c.Reserve(ctx, queue, 10, wait)
	return reserved{tasks, err, sent, time.Now()}
}

// waitState polls the task until it is in state, failing the test after
// timeout.
func waitState(t *testing.T, c *client.Client, queue, id, state string, timeout time.Duration) api.Task {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		task, err := c.Get(context.Background(), queue, id)
		if err == nil && task.State == state {
			return task
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s not %s within %v: %+v, %v", id, state, timeout, task, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
