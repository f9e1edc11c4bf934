package cluster_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// reserveOne reserves one task of queue on n within wait, failing t if
// none comes.
func reserveOne(t *testing.T, n *testNode, queue string, wait time.Duration) task.Task {
	t.Helper()
	ts, err := svc(n).Reserve(context.Background(), queue, 1, wait)
	if err != nil || len(ts) != 1 {
		t.Fatalf("reserve %s on %s: %d tasks, %v", queue, n.Name(), len(ts), err)
	}
	return ts[0]
}

// TestPolicy_Backoff: a nack without a delay comes back after the retry
// policy's back-off, doubling per attempt, with the nack's reason as its
// last error; its last attempt's nack makes it dead in place.
func TestPolicy_Backoff(t *testing.T) {
	ctx := context.Background()
	n := startNode(t, server(t).CreateDatabase(t), "a")
	p := task.Policy{Retry: &task.Retry{Initial: 200 * time.Millisecond, Max: time.Second, Multiplier: 2}, MaxAttempts: 3}
	if _, err := svc(n).SetPolicy(ctx, "q", p); err != nil {
		t.Fatal(err)
	}
	put, _, err := svc(n).Put(ctx, "q", task.PutRequest{ID: "x"})
	if err != nil || put.MaxAttempts != 3 {
		t.Fatalf("put: %+v, %v; want max_attempts 3 from the policy", put, err)
	}
	for i, want := range []time.Duration{200 * time.Millisecond, 400 * time.Millisecond} {
		r := reserveOne(t, n, "q", 3*time.Second)
		before := time.Now()
		got, err := svc(n).Nack(ctx, "q", "x", r.Lease, task.RetryDelay, "boom")
		if err != nil {
			t.Fatal(err)
		}
		if got.State != task.Delayed || got.LastError != "boom" || got.Attempts != i+1 || got.Releases != 2*i+1 {
			t.Fatalf("after nack %d: %+v", i+1, got)
		}
		if d := got.Due.Sub(before); d < want-50*time.Millisecond || d > want+time.Second {
			t.Fatalf("nack %d: due in %v, want %v", i+1, d, want)
		}
		r = reserveOne(t, n, "q", 3*time.Second)
		if since := time.Since(before); since < want-20*time.Millisecond {
			t.Fatalf("attempt %d reserved %v after the nack, before its back-off %v", i+2, since, want)
		}
		if r.LastError != "boom" {
			t.Fatalf("reserved task's last error %q", r.LastError)
		}
		if i == 1 {
			got, err = svc(n).Nack(ctx, "q", "x", r.Lease, task.RetryDelay, "last")
			if err != nil || got.State != task.Dead || got.LastError != "last" || got.Attempts != 3 {
				t.Fatalf("nack of the last attempt: %+v, %v; want dead", got, err)
			}
			break
		}
		if _, err := svc(n).Release(ctx, "q", "x", r.Lease, 0); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPolicy_Release: a release gives the task back without counting the
// attempt, keeping its last error, after the delay given.
func TestPolicy_Release(t *testing.T) {
	ctx := context.Background()
	n := startNode(t, server(t).CreateDatabase(t), "a")
	if _, _, err := svc(n).Put(ctx, "q", task.PutRequest{ID: "x", MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	r := reserveOne(t, n, "q", time.Second)
	got, err := svc(n).Release(ctx, "q", "x", r.Lease, 300*time.Millisecond)
	if err != nil || got.State != task.Delayed || got.Attempts != 0 || got.Releases != 1 {
		t.Fatalf("release: %+v, %v", got, err)
	}
	if _, err := svc(n).Release(ctx, "q", "x", r.Lease, 0); !errors.Is(err, task.ErrLease) {
		t.Fatalf("release under a stale lease: %v, want ErrLease", err)
	}
	r = reserveOne(t, n, "q", 2*time.Second)
	if r.Attempts != 1 {
		t.Fatalf("attempts after a release and a reserve: %d", r.Attempts)
	}
	got, err = svc(n).Release(ctx, "q", "x", r.Lease, 0)
	if err != nil || got.State != task.Ready {
		t.Fatalf("release at the last attempt: %+v, %v; want ready", got, err)
	}
}

// TestPolicy_BuryDeadLetter: a bury makes a task dead in place without a
// dead-letter queue, and moves it, ready, to the dead-letter queue with
// one: id, payload and last error kept, attempts 0, a task of the same id
// there replaced, and a reserver waiting on it (on another node) woken.
func TestPolicy_BuryDeadLetter(t *testing.T) {
	ctx := context.Background()
	url := server(t).CreateDatabase(t)
	a := startNode(t, url, "a")
	b := startNode(t, url, "b")
	if _, _, err := svc(a).Put(ctx, "q", task.PutRequest{ID: "x", Payload: []byte(`"new"`)}); err != nil {
		t.Fatal(err)
	}
	r := reserveOne(t, a, "q", time.Second)
	got, err := svc(a).Bury(ctx, "q", "x", r.Lease, "bad input")
	if err != nil || got.State != task.Dead || got.LastError != "bad input" || got.Buries != 1 {
		t.Fatalf("bury: %+v, %v", got, err)
	}
	if err := svc(a).Kick(ctx, "q", "x"); err != nil {
		t.Fatal(err)
	}

	if _, err := svc(a).SetPolicy(ctx, "q", task.Policy{DeadLetter: "dlq"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc(a).Put(ctx, "dlq", task.PutRequest{ID: "x", Payload: []byte("old")}); err != nil {
		t.Fatal(err)
	}
	old := reserveOne(t, a, "dlq", time.Second) // keeps dlq empty of ready tasks
	r = reserveOne(t, a, "q", time.Second)
	woke := make(chan task.Task, 1)
	go func() {
		ts, err := svc(b).Reserve(ctx, "dlq", 1, 5*time.Second)
		if err != nil || len(ts) != 1 {
			t.Errorf("reserve of the dead-letter queue on b: %d tasks, %v", len(ts), err)
			close(woke)
			return
		}
		woke <- ts[0]
	}()
	eventually(t, 2*time.Second, "b waiting", func() bool { return b.Waiting("dlq") == 1 })
	got, err = svc(a).Bury(ctx, "q", "x", r.Lease, "still bad")
	if err != nil || got.Queue != "dlq" || got.State != task.Ready || got.LastError != "still bad" || got.Attempts != 0 {
		t.Fatalf("bury into the dead-letter queue: %+v, %v", got, err)
	}
	select {
	case d, ok := <-woke:
		if ok && (d.ID != "x" || d.Queue != "dlq" || d.LastError != "still bad" || string(d.Payload) != `"new"` || d.JobID != r.JobID) {
			t.Fatalf("b reserved %+v", d)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the waiting reserver of the dead-letter queue was not woken")
	}
	if _, err := svc(a).Get("q", "x"); !errors.Is(err, task.ErrNotFound) {
		t.Fatalf("task still in its queue: %v", err)
	}
	if err := svc(a).Ack(ctx, "dlq", "x", old.Lease); !errors.Is(err, task.ErrLease) && !errors.Is(err, task.ErrNotFound) {
		t.Fatalf("ack of the replaced task: %v", err)
	}
}

// TestPolicy_Expiry: a lease that runs out counts a timeout, keeps
// task.LeaseExpired as the last error and brings the task back after the
// retry policy's back-off; at its last attempt the task moves to the
// dead-letter queue, where its attempts count from 0 again.
func TestPolicy_Expiry(t *testing.T) {
	ctx := context.Background()
	url := server(t).CreateDatabase(t)
	a := startNode(t, url, "a")
	b := startNode(t, url, "b")
	p := task.Policy{Retry: &task.Retry{Initial: 400 * time.Millisecond, Max: time.Second, Multiplier: 1},
		MaxAttempts: 2, TTR: 100 * time.Millisecond, DeadLetter: "dead"}
	if _, err := svc(a).SetPolicy(ctx, "q", p); err != nil {
		t.Fatal(err)
	}
	put, _, err := svc(b).Put(ctx, "q", task.PutRequest{ID: "x"})
	if err != nil || put.TTR != 100*time.Millisecond {
		t.Fatalf("put: %+v, %v; want the policy's ttr", put, err)
	}
	r := reserveOne(t, b, "q", time.Second)
	var got task.Task
	eventually(t, 3*time.Second, "lease expired", func() bool {
		got, err = svc(a).Get("q", "x")
		return err == nil && got.State != task.Reserved
	})
	if got.State != task.Delayed || got.LastError != task.LeaseExpired || got.Timeouts != 1 {
		t.Fatalf("after the lease ran out: %+v", got)
	}
	if d := got.Due.Sub(r.LeaseUntil); d < 400*time.Millisecond {
		t.Fatalf("due %v after the lease ran out, want the back-off (400ms) or more", d)
	}
	reserveOne(t, a, "q", 2*time.Second)
	eventually(t, 3*time.Second, "dead-lettered", func() bool {
		got, err = svc(b).Get("dead", "x")
		return err == nil
	})
	if got.State != task.Ready || got.LastError != task.LeaseExpired || got.Attempts != 0 || got.Timeouts != 2 {
		t.Fatalf("in the dead-letter queue: %+v", got)
	}
}

// TestPolicy_Shared: a policy set on one node is what the other reports
// and applies at once; Queues lists a queue with a policy or a pause
// though it has no task; a pause until resumed holds until resumed from
// the other node, whose waiting reserver is woken.
func TestPolicy_Shared(t *testing.T) {
	ctx := context.Background()
	url := server(t).CreateDatabase(t)
	a := startNode(t, url, "a")
	b := startNode(t, url, "b")
	p, err := service.New(a).SetPolicy(ctx, "q", task.Policy{TTR: 7 * time.Second, MaxAttempts: 4, Rate: &task.Rate{Limit: 100, Per: time.Second}})
	if err != nil || p.Rate.Burst != 100 {
		t.Fatalf("SetPolicy: %+v, %v", p, err)
	}
	if _, err := service.New(a).SetPolicy(ctx, "q2", task.Policy{DeadLetter: "q2"}); !errors.Is(err, task.ErrInvalid) {
		t.Fatalf("a queue its own dead letter: %v", err)
	}
	got, err := b.Policy(ctx, "q")
	if err != nil || got.TTR != 7*time.Second || got.MaxAttempts != 4 || got.Rate == nil || *got.Rate != *p.Rate {
		t.Fatalf("b's Policy: %+v, %v", got, err)
	}
	tk, _, err := svc(b).Put(ctx, "q", task.PutRequest{MaxAttempts: 9})
	if err != nil || tk.TTR != 7*time.Second || tk.MaxAttempts != 9 {
		t.Fatalf("put on b: %+v, %v", tk, err)
	}
	if err := svc(b).Delete(ctx, "q", tk.ID); err != nil {
		t.Fatal(err)
	}
	if err := svc(b).PauseQueue(ctx, "p", task.PauseIndefinitely); err != nil {
		t.Fatal(err)
	}
	qs, err := a.Queues(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]task.QueueStats{}
	for _, q := range qs {
		seen[q.Name] = q
	}
	if q, ok := seen["q"]; !ok || q.Policy.TTR != 7*time.Second || !q.PausedUntil.IsZero() {
		t.Fatalf("Queues: q = %+v (listed %v)", q, ok)
	}
	if q, ok := seen["p"]; !ok || !q.PausedUntil.Equal(task.PausedForever) {
		t.Fatalf("Queues: p = %+v (listed %v)", q, ok)
	}
	if err := svc(b).DeletePolicy(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	if got, err := a.Policy(ctx, "q"); err != nil || !got.IsZero() {
		t.Fatalf("Policy after delete: %+v, %v", got, err)
	}

	if _, _, err := svc(a).Put(ctx, "p", task.PutRequest{ID: "x"}); err != nil {
		t.Fatal(err)
	}
	done := make(chan int, 1)
	go func() {
		ts, _ := svc(a).Reserve(ctx, "p", 1, 5*time.Second)
		done <- len(ts)
	}()
	time.Sleep(300 * time.Millisecond)
	select {
	case <-done:
		t.Fatal("reserved from a queue paused until resumed")
	default:
	}
	if err := svc(b).PauseQueue(ctx, "p", 0); err != nil {
		t.Fatal(err)
	}
	select {
	case k := <-done:
		if k != 1 {
			t.Fatalf("after the resume: %d tasks", k)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the waiting reserver was not woken by the resume on the other node")
	}
}

// TestPolicy_Notify: a policy set or deleted on one node is told to the
// functions registered with NotifyPolicies on every node, the queue
// named, within a notification's round trip.
func TestPolicy_Notify(t *testing.T) {
	ctx := context.Background()
	url := server(t).CreateDatabase(t)
	a, b := startNode(t, url, "a"), startNode(t, url, "b")
	told := make(chan string, 16)
	b.NotifyPolicies(func(queue string) {
		select {
		case told <- queue:
		default:
		}
	})
	expect := func(what string) {
		t.Helper()
		select {
		case q := <-told:
			if q != "pushed" {
				t.Fatalf("%s: told of %q, want pushed", what, q)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s on a: b not told within 5 s", what)
		}
	}
	if _, err := svc(a).SetPolicy(ctx, "pushed", task.Policy{Concurrency: 2}); err != nil {
		t.Fatal(err)
	}
	expect("SetPolicy")
	if err := svc(a).DeletePolicy(ctx, "pushed"); err != nil {
		t.Fatal(err)
	}
	expect("DeletePolicy")
}

// TestPolicy_ZeroMakesNoRow: the zero policy (a DELETE of the policy, a
// PUT of {}) on a queue without a row leaves it without one, so that
// names a client makes up keep no state; on a queue with one it clears
// the policy and keeps the pause.
func TestPolicy_ZeroMakesNoRow(t *testing.T) {
	ctx := context.Background()
	n := startNode(t, server(t).CreateDatabase(t), "a")
	if _, err := svc(n).SetPolicy(ctx, "fresh", task.Policy{}); err != nil {
		t.Fatal(err)
	}
	if err := svc(n).DeletePolicy(ctx, "fresh2"); err != nil {
		t.Fatal(err)
	}
	var rows int
	if err := n.pool.QueryRow(ctx, `SELECT count(*) FROM hourglass_queues WHERE queue IN ('fresh', 'fresh2')`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 0 {
		t.Fatalf("%d rows of hourglass_queues for queues that never had a policy or a pause", rows)
	}
	if _, err := svc(n).SetPolicy(ctx, "kept", task.Policy{MaxAttempts: 3}); err != nil {
		t.Fatal(err)
	}
	if err := svc(n).PauseQueue(ctx, "kept", time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := svc(n).SetPolicy(ctx, "kept", task.Policy{}); err != nil {
		t.Fatal(err)
	}
	if p, err := svc(n).Policy(ctx, "kept"); err != nil || !p.IsZero() {
		t.Fatalf("policy after the zero policy: %+v, %v", p, err)
	}
	qs, err := svc(n).Queues(ctx)
	if err != nil || len(qs) != 1 || qs[0].Name != "kept" || qs[0].PausedUntil.IsZero() {
		t.Fatalf("Queues after the zero policy of a paused queue: %+v, %v", qs, err)
	}
}
