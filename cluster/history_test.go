package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/cluster"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// attemptsOf returns the attempts of queue/id on n, failing t on an error.
func attemptsOf(t *testing.T, n *testNode, queue, id string) []task.Attempt {
	t.Helper()
	as, err := n.Attempts(context.Background(), queue, id)
	if err != nil {
		t.Fatalf("Attempts(%s, %s) on %s: %v", queue, id, n.Name(), err)
	}
	return as
}

// checkAttempts fails t unless as has the outcomes want ("" running), in
// order, numbered from 1, each ended after it started.
func checkAttempts(t *testing.T, as []task.Attempt, want ...string) {
	t.Helper()
	var got []string
	for _, a := range as {
		got = append(got, a.Outcome)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("attempts %v, want %v: %+v", got, want, as)
	}
	for i, a := range as {
		if a.N != i+1 || a.Started.IsZero() || (a.Outcome != "" && a.Ended.Before(a.Started)) || (a.Outcome == "") != a.Ended.IsZero() {
			t.Fatalf("attempt %d: %+v", i+1, a)
		}
	}
}

// finished returns a page of queue's history on n, failing t on an
// error.
func finished(t *testing.T, n *testNode, queue, outcome string, after uint64, limit int) ([]task.Finished, uint64) {
	t.Helper()
	fs, next, err := svc(n).FinishedTasks(context.Background(), queue, outcome, after, limit)
	if err != nil {
		t.Fatalf("FinishedTasks(%s, %q, %d, %d): %v", queue, outcome, after, limit, err)
	}
	return fs, next
}

// TestHistory_Attempts: a task nacked on one node, left to expire on the
// other, then reserved and acked: its attempts, read on either node, say
// what became of each, with the error and the node that ended it, the
// running one while reserved; once acked they are read from the history,
// which lists the task as acked.
func TestHistory_Attempts(t *testing.T) {
	ctx := context.Background()
	url := server(t).CreateDatabase(t)
	a := startNode(t, url, "a")
	b := startNode(t, url, "b")
	if _, _, err := svc(a).Put(ctx, "q", task.PutRequest{ID: "x", TTR: 200 * time.Millisecond, MaxAttempts: 5}); err != nil {
		t.Fatal(err)
	}
	if as := attemptsOf(t, b, "q", "x"); len(as) != 0 {
		t.Fatalf("attempts of a task never reserved: %+v", as)
	}
	r := reserveOne(t, a, "q", time.Second)
	if _, err := svc(a).Nack(ctx, "q", "x", r.Lease, 0, "boom"); err != nil {
		t.Fatal(err)
	}
	reserveOne(t, b, "q", time.Second)
	eventually(t, 5*time.Second, "the lease runs out", func() bool {
		tk, err := svc(a).Get("q", "x")
		return err == nil && tk.State == task.Ready
	})
	before := time.Now()
	r = reserveOne(t, a, "q", time.Second)
	as := attemptsOf(t, b, "q", "x")
	checkAttempts(t, as, task.AttemptNacked, task.AttemptExpired, "")
	if as[0].Error != "boom" || as[0].Node != "a" {
		t.Fatalf("nacked attempt: %+v", as[0])
	}
	if as[1].Error != task.LeaseExpired || (as[1].Node != "a" && as[1].Node != "b") {
		t.Fatalf("expired attempt: %+v", as[1])
	}
	if d := as[2].Started.Sub(before); d < -time.Second || d > time.Second {
		t.Fatalf("running attempt started %v after the reserve began", d)
	}
	if err := svc(b).Ack(ctx, "q", "x", r.Lease); err != nil {
		t.Fatal(err)
	}
	as = attemptsOf(t, a, "q", "x")
	checkAttempts(t, as, task.AttemptNacked, task.AttemptExpired, task.AttemptAcked)
	if as[2].Node != "b" || as[2].Error != "" {
		t.Fatalf("acked attempt: %+v", as[2])
	}
	fs, next := finished(t, a, "q", "", 0, 10)
	if len(fs) != 1 || next != 0 {
		t.Fatalf("history: %+v, next %d", fs, next)
	}
	if f := fs[0]; f.ID != "x" || f.Queue != "q" || f.Outcome != task.FinishedAcked || f.Attempts != 3 ||
		f.LastError != task.LeaseExpired || f.JobID != r.JobID || time.Since(f.Finished) > 10*time.Second {
		t.Fatalf("finished task: %+v", f)
	}
	if _, err := a.Attempts(ctx, "q", "nope"); !errors.Is(err, task.ErrNotFound) {
		t.Fatalf("attempts of no task: %v, want ErrNotFound", err)
	}
	// A new task of the same id: its own attempts, not the old one's.
	if _, _, err := svc(b).Put(ctx, "q", task.PutRequest{ID: "x"}); err != nil {
		t.Fatal(err)
	}
	if as := attemptsOf(t, a, "q", "x"); len(as) != 0 {
		t.Fatalf("attempts of the new task x: %+v", as)
	}
}

// TestHistory_Pages: acked, dead (buried, and of a lease run out on its
// last attempt) and deleted tasks (Delete, DeleteJob, DeleteDead) page
// newest first, by outcome or all, with the cursor; a bad outcome or
// limit is invalid.
func TestHistory_Pages(t *testing.T) {
	ctx := context.Background()
	url := server(t).CreateDatabase(t)
	a := startNode(t, url, "a")
	b := startNode(t, url, "b")
	for _, id := range []string{"k1", "k2", "k3", "b1", "d1", "d2", "e1", "r1"} {
		if _, _, err := svc(a).Put(ctx, "q", task.PutRequest{ID: id, Priority: 1, TTR: 200 * time.Millisecond, MaxAttempts: 1}); err != nil {
			t.Fatal(err)
		}
	}
	take := func(n *testNode, id string) task.Task {
		t.Helper()
		r := reserveOne(t, n, "q", time.Second)
		if r.ID != id {
			t.Fatalf("reserved %s, want %s", r.ID, id)
		}
		return r
	}
	var want []string // newest last
	for _, id := range []string{"k1", "k2", "k3"} {
		r := take(b, id)
		if err := svc(a).Ack(ctx, "q", id, r.Lease); err != nil {
			t.Fatal(err)
		}
		want = append(want, id+" acked")
	}
	r := take(a, "b1")
	if _, err := svc(b).Bury(ctx, "q", "b1", r.Lease, "bad"); err != nil {
		t.Fatal(err)
	}
	want = append(want, "b1 dead")
	if err := svc(b).Delete(ctx, "q", "d1"); err != nil {
		t.Fatal(err)
	}
	want = append(want, "d1 deleted")
	d2, _ := svc(a).Get("q", "d2")
	if err := svc(a).DeleteJob(ctx, d2.JobID, ""); err != nil {
		t.Fatal(err)
	}
	want = append(want, "d2 deleted")
	take(a, "e1") // its lease runs out on its only attempt
	eventually(t, 5*time.Second, "e1 dies", func() bool {
		tk, err := svc(a).Get("q", "e1")
		return err == nil && tk.State == task.Dead
	})
	want = append(want, "e1 dead")
	r = take(b, "r1") // deleted by job id under its lease: an ack
	if err := svc(a).DeleteJob(ctx, r.JobID, r.Lease); err != nil {
		t.Fatal(err)
	}
	want = append(want, "r1 acked")
	if k, err := svc(b).DeleteDead(ctx, "q"); err != nil || k != 2 {
		t.Fatalf("DeleteDead: %d, %v", k, err)
	}
	want = append(want, "b1 deleted", "e1 deleted") // in either order

	var got []string
	var after uint64
	pages := 0
	for {
		fs, next := finished(t, b, "q", "", after, 3)
		pages++
		for _, f := range fs {
			got = append(got, f.ID+" "+f.Outcome)
		}
		if next == 0 {
			break
		}
		after = next
	}
	if len(got) != len(want) || pages != 4 {
		t.Fatalf("history in %d pages: %v, want (newest first) %v", pages, got, want)
	}
	for i, w := range want[:len(want)-2] {
		if g := got[len(got)-1-i]; g != w {
			t.Fatalf("history: %v, want (newest first) the reverse of %v", got, want)
		}
	}
	for outcome, k := range map[string]int{task.FinishedAcked: 4, task.FinishedDead: 2, task.FinishedDeleted: 4} {
		fs, next := finished(t, a, "q", outcome, 0, task.MaxList)
		if len(fs) != k || next != 0 {
			t.Fatalf("%s: %d tasks, next %d; want %d", outcome, len(fs), next, k)
		}
		for i, f := range fs {
			if f.Outcome != outcome || (i > 0 && !f.Finished.Before(fs[i-1].Finished) && !f.Finished.Equal(fs[i-1].Finished)) {
				t.Fatalf("%s: %+v", outcome, fs)
			}
		}
	}
	fs, _ := finished(t, a, "q", task.FinishedDead, 0, 10)
	if fs[1].ID != "b1" || fs[1].LastError != "bad" || fs[1].Attempts != 1 || fs[0].ID != "e1" || fs[0].LastError != task.LeaseExpired {
		t.Fatalf("dead: %+v", fs)
	}
	if fs, next := finished(t, a, "other", "", 0, 10); len(fs) != 0 || next != 0 {
		t.Fatalf("another queue's history: %+v", fs)
	}
	checkAttempts(t, attemptsOf(t, a, "q", "e1"), task.AttemptExpired)
	checkAttempts(t, attemptsOf(t, a, "q", "r1"), task.AttemptAcked)
	for _, c := range []struct {
		outcome string
		limit   int
	}{{"finished", 10}, {task.FinishedAcked, 0}, {"", task.MaxList + 1}} {
		if _, _, err := service.New(a).FinishedTasks(ctx, "q", c.outcome, 0, c.limit); !errors.Is(err, task.ErrInvalid) {
			t.Fatalf("FinishedTasks(%q, %d): %v, want ErrInvalid", c.outcome, c.limit, err)
		}
	}
}

// TestHistory_DeadLetter: a task that uses up its attempts moves to the
// dead-letter queue: dead in its queue's history, its attempts read from
// either queue; a task of the same id deleted from the dead-letter queue
// to make room is in that queue's history as deleted. A release and a
// beanstalkd release end an attempt as released; a lease that runs out in
// the queue, settled by its owner, as expired.
func TestHistory_DeadLetter(t *testing.T) {
	ctx := context.Background()
	url := server(t).CreateDatabase(t)
	a := startNode(t, url, "a")
	b := startNode(t, url, "b")
	if _, err := svc(a).SetPolicy(ctx, "q", task.Policy{MaxAttempts: 2, DeadLetter: "dlq"}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"q", "dlq"} {
		if _, _, err := svc(a).Put(ctx, q, task.PutRequest{ID: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	r := reserveOne(t, a, "q", time.Second)
	if _, err := svc(a).Release(ctx, "q", "x", r.Lease, 0); err != nil {
		t.Fatal(err)
	}
	r = reserveOne(t, b, "q", time.Second)
	if err := svc(b).ReleaseJob(ctx, r.JobID, r.Lease, 0, 0); err != nil {
		t.Fatal(err)
	}
	r = reserveOne(t, a, "q", time.Second) // attempts: 2, its last
	got, err := svc(b).Nack(ctx, "q", "x", r.Lease, task.RetryDelay, "no")
	if err != nil || got.Queue != "dlq" {
		t.Fatalf("nack of the last attempt: %+v, %v; want moved to dlq", got, err)
	}
	want := []string{task.AttemptReleased, task.AttemptReleased, task.AttemptNacked}
	checkAttempts(t, attemptsOf(t, a, "q", "x"), want...)
	checkAttempts(t, attemptsOf(t, b, "dlq", "x"), want...)
	fs, _ := finished(t, a, "q", "", 0, 10)
	if len(fs) != 1 || fs[0].Outcome != task.FinishedDead || fs[0].LastError != "no" || fs[0].Attempts != 2 || fs[0].JobID != r.JobID {
		t.Fatalf("q's history: %+v", fs)
	}
	fs, _ = finished(t, a, "dlq", "", 0, 10)
	if len(fs) != 1 || fs[0].Outcome != task.FinishedDeleted || fs[0].ID != "x" || fs[0].JobID == r.JobID {
		t.Fatalf("dlq's history: %+v", fs)
	}
	r = reserveOne(t, b, "dlq", time.Second)
	if err := svc(a).Ack(ctx, "dlq", "x", r.Lease); err != nil {
		t.Fatal(err)
	}
	checkAttempts(t, attemptsOf(t, a, "dlq", "x"), append(want, task.AttemptAcked)...)
	if fs, _ = finished(t, b, "dlq", task.FinishedAcked, 0, 10); len(fs) != 1 || fs[0].JobID != r.JobID {
		t.Fatalf("dlq's acked: %+v", fs)
	}
	// A lease run out in a queue with a policy, settled by its owner
	// (settleExpired) rather than the flush's statement.
	if _, _, err := svc(a).Put(ctx, "q", task.PutRequest{ID: "z", TTR: 200 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	reserveOne(t, b, "q", time.Second)
	r = reserveOne(t, a, "q", 5*time.Second)
	as := attemptsOf(t, b, "q", "z")
	checkAttempts(t, as, task.AttemptExpired, "")
	if as[0].Error != task.LeaseExpired || (as[0].Node != "a" && as[0].Node != "b") {
		t.Fatalf("expired attempt: %+v", as[0])
	}
}

// TestHistory_None: with a negative retention nothing is written: an
// acked task has no attempts, no queue a history.
func TestHistory_None(t *testing.T) {
	ctx := context.Background()
	url := server(t).CreateDatabase(t)
	a := startNode(t, url, "a", func(o *cluster.Options) { o.History = -1 })
	for _, id := range []string{"x", "y"} {
		if _, _, err := svc(a).Put(ctx, "q", task.PutRequest{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	r := reserveOne(t, a, "q", time.Second)
	if _, err := svc(a).Nack(ctx, "q", r.ID, r.Lease, 0, "no"); err != nil {
		t.Fatal(err)
	}
	if as := attemptsOf(t, a, "q", r.ID); len(as) != 0 {
		t.Fatalf("attempts kept: %+v", as)
	}
	for range 2 {
		r = reserveOne(t, a, "q", time.Second)
		if err := svc(a).Ack(ctx, "q", r.ID, r.Lease); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Attempts(ctx, "q", "x"); !errors.Is(err, task.ErrNotFound) {
		t.Fatalf("attempts of an acked task with no history: %v", err)
	}
	if fs, _ := finished(t, a, "q", "", 0, 10); len(fs) != 0 {
		t.Fatalf("history kept: %+v", fs)
	}
	var k int
	if err := a.pool.QueryRow(ctx, "SELECT (SELECT count(*) FROM hourglass_attempts) + (SELECT count(*) FROM hourglass_history)").Scan(&k); err != nil || k != 0 {
		t.Fatalf("history rows: %d, %v", k, err)
	}
}

// TestHistory_PrunePrimitive: the node's primitive of the history's
// pruner deletes at most max rows older than age, by the database's
// clock, and says how many; rows within age stay.
func TestHistory_PrunePrimitive(t *testing.T) {
	ctx := context.Background()
	url := server(t).CreateDatabase(t)
	a := startNode(t, url, "a", func(o *cluster.Options) { o.History = time.Hour })
	for i := range 5 {
		id := fmt.Sprint(i)
		if _, _, err := svc(a).Put(ctx, "q", task.PutRequest{ID: id}); err != nil {
			t.Fatal(err)
		}
		if err := svc(a).Delete(ctx, "q", id); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := a.PruneHistory(ctx, time.Hour, 10); n != 0 || err != nil {
		t.Fatalf("prune of rows older than an hour: %d, %v; want none", n, err)
	}
	for _, want := range []int{2, 2, 1, 0} {
		if n, err := a.PruneHistory(ctx, 0, 2); n != want || err != nil {
			t.Fatalf("prune of at most 2: %d, %v; want %d", n, err, want)
		}
	}
	if fs, _ := finished(t, a, "q", "", 0, 10); len(fs) != 0 {
		t.Fatalf("history after the prunes: %+v", fs)
	}
}

// TestHistory_Prune: with a short retention the history is pruned, with
// the attempts of the tasks gone, but not those of a task live again
// (a dead task kicked).
func TestHistory_Prune(t *testing.T) {
	ctx := context.Background()
	url := server(t).CreateDatabase(t)
	const keep = 500 * time.Millisecond
	a := startNode(t, url, "a", func(o *cluster.Options) { o.History = keep })
	b := startNode(t, url, "b", func(o *cluster.Options) { o.History = keep })
	for _, id := range []string{"x", "y"} {
		if _, _, err := svc(a).Put(ctx, "q", task.PutRequest{ID: id, Priority: 1}); err != nil {
			t.Fatal(err)
		}
	}
	r := reserveOne(t, a, "q", time.Second)
	if err := svc(b).Ack(ctx, "q", "x", r.Lease); err != nil {
		t.Fatal(err)
	}
	r = reserveOne(t, a, "q", time.Second)
	if _, err := svc(b).Bury(ctx, "q", "y", r.Lease, "later"); err != nil {
		t.Fatal(err)
	}
	if err := svc(b).Kick(ctx, "q", "y"); err != nil {
		t.Fatal(err)
	}
	if fs, _ := finished(t, a, "q", "", 0, 10); len(fs) != 2 {
		t.Fatalf("history before pruning: %+v", fs)
	}
	eventually(t, 10*keep, "the history pruned", func() bool {
		fs, _ := finished(t, b, "q", "", 0, 10)
		return len(fs) == 0
	})
	if _, err := a.Attempts(ctx, "q", "x"); !errors.Is(err, task.ErrNotFound) {
		t.Fatalf("attempts of a task pruned: %v", err)
	}
	checkAttempts(t, attemptsOf(t, b, "q", "y"), task.AttemptBuried)
	var k int
	if err := a.pool.QueryRow(ctx, "SELECT count(*) FROM hourglass_attempts").Scan(&k); err != nil || k != 1 {
		t.Fatalf("attempts rows left: %d, %v; want y's", k, err)
	}
}

// TestPolicy_Push: a push endpoint set on one node reads back the same on
// another, in Policy, Queue and Queues, headers and secret included; a
// policy set again without it, and a deleted policy, have none.
func TestPolicy_Push(t *testing.T) {
	ctx := context.Background()
	url := server(t).CreateDatabase(t)
	a := startNode(t, url, "a")
	b := startNode(t, url, "b")
	for _, push := range []*task.Push{
		{URL: "https://example.com/hook", Timeout: 5 * time.Second,
			Headers: map[string]string{"X-Token": "t", "X-Team": "a b"}, Secret: "s3cret"},
		{URL: "https://example.com/x"},
		{URL: "https://example.com/y", Headers: map[string]string{}},
	} {
		p := task.Policy{MaxAttempts: 3, Push: push}
		set, err := svc(a).SetPolicy(ctx, "q", p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := b.Policy(ctx, "q")
		if err != nil || !reflect.DeepEqual(got, set) || !reflect.DeepEqual(got.Push, push) {
			t.Fatalf("policy on b: %+v (push %+v), %v; want %+v", got, got.Push, err, push)
		}
		qd, err := b.Queue("q")
		if err != nil || !reflect.DeepEqual(qd.Policy.Push, push) {
			t.Fatalf("queue on b: push %+v, %v", qd.Policy.Push, err)
		}
		qs, err := b.Queues(ctx)
		if err != nil || len(qs) != 1 || !reflect.DeepEqual(qs[0].Policy.Push, push) {
			t.Fatalf("queues on b: %+v, %v", qs, err)
		}
	}
	if _, err := svc(b).SetPolicy(ctx, "q", task.Policy{MaxAttempts: 3}); err != nil {
		t.Fatal(err)
	}
	if got, err := a.Policy(ctx, "q"); err != nil || got.Push != nil {
		t.Fatalf("policy without push: %+v, %v", got, err)
	}
	if _, err := svc(b).SetPolicy(ctx, "q", task.Policy{Push: &task.Push{URL: "https://example.com/z"}}); err != nil {
		t.Fatal(err)
	}
	if err := svc(b).DeletePolicy(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	if got, err := a.Policy(ctx, "q"); err != nil || !got.IsZero() {
		t.Fatalf("deleted policy: %+v, %v", got, err)
	}
}

// TestHistory_Replace: a put that replaces a task records the old one as
// deleted, its attempts kept under its job; the new task has none.
func TestHistory_Replace(t *testing.T) {
	ctx := context.Background()
	a := startNode(t, server(t).CreateDatabase(t), "a")
	if _, _, err := svc(a).Put(ctx, "q", task.PutRequest{ID: "x"}); err != nil {
		t.Fatal(err)
	}
	r := reserveOne(t, a, "q", time.Second)
	if _, err := svc(a).Nack(ctx, "q", "x", r.Lease, time.Hour, "again"); err != nil {
		t.Fatal(err)
	}
	if _, created, err := svc(a).Put(ctx, "q", task.PutRequest{ID: "x", Replace: true}); err != nil || created {
		t.Fatalf("replace: created %v, %v", created, err)
	}
	fs, _ := finished(t, a, "q", "", 0, 10)
	if len(fs) != 1 || fs[0].Outcome != task.FinishedDeleted || fs[0].JobID != r.JobID || fs[0].Attempts != 1 || fs[0].LastError != "again" {
		t.Fatalf("history after a replace: %+v", fs)
	}
	if as := attemptsOf(t, a, "q", "x"); len(as) != 0 {
		t.Fatalf("attempts of the new x: %+v", as)
	}
}
