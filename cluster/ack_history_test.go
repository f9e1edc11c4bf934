package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/task"
)

// countAttemptRows returns how many rows of hourglass_attempts job has.
func countAttemptRows(t *testing.T, n *testNode, job uint64) int {
	t.Helper()
	var k int
	if err := n.pool.QueryRow(context.Background(), "SELECT count(*) FROM hourglass_attempts WHERE job_id = $1",
		int64(job)).Scan(&k); err != nil {
		t.Fatal(err)
	}
	return k
}

// TestHistory_AckInRow: an ack writes one row, the task's history row,
// which carries the acked attempt (migration 018): hourglass_attempts
// keeps the nacked attempt only, and Attempts still answers every field
// of both, the acked one ending when the task finished.
func TestHistory_AckInRow(t *testing.T) {
	ctx := context.Background()
	url := server(t).CreateDatabase(t)
	a := startNode(t, url, "a")
	b := startNode(t, url, "b")
	if _, _, err := svc(a).Put(ctx, "q", task.PutRequest{ID: "x", MaxAttempts: 5}); err != nil {
		t.Fatal(err)
	}
	r := reserveOne(t, a, "q", time.Second)
	if _, err := svc(a).Nack(ctx, "q", "x", r.Lease, 0, "boom"); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	r = reserveOne(t, b, "q", time.Second)
	if err := svc(b).Ack(ctx, "q", "x", r.Lease); err != nil {
		t.Fatal(err)
	}
	if k := countAttemptRows(t, a, r.JobID); k != 1 {
		t.Fatalf("%d rows of hourglass_attempts for a task nacked then acked; want 1, the nack's", k)
	}
	as := attemptsOf(t, a, "q", "x")
	checkAttempts(t, as, task.AttemptNacked, task.AttemptAcked)
	fs, _ := finished(t, a, "q", task.FinishedAcked, 0, 1)
	if len(fs) != 1 {
		t.Fatalf("history: %+v", fs)
	}
	acked := as[1]
	if acked.Attempt != 2 || acked.Queue != "q" || acked.Node != "b" || acked.Error != "" || acked.Status != 0 ||
		!acked.Ended.Equal(fs[0].Finished) || acked.Started.Before(before.Add(-time.Second)) || acked.Started.After(acked.Ended) {
		t.Fatalf("acked attempt: %+v; finished %v", acked, fs[0].Finished)
	}
	if as[0].Attempt != 1 || as[0].Node != "a" || as[0].Error != "boom" || as[0].Queue != "q" {
		t.Fatalf("nacked attempt: %+v", as[0])
	}
}

// TestHistory_AckPastBound: an ack of a task's 106th attempt is a row of
// hourglass_attempts, whose bound (migration 008) drops the 6th: the
// task keeps its first 5 and its last 100 attempts, the last one acked,
// as when every ack wrote its attempt's row.
func TestHistory_AckPastBound(t *testing.T) {
	ctx := context.Background()
	a := startNode(t, server(t).CreateDatabase(t), "a")
	if _, err := svc(a).SetPolicy(ctx, "q", task.Policy{Retry: &task.Retry{}, MaxAttempts: task.UnlimitedAttempts}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc(a).Put(ctx, "q", task.PutRequest{ID: "x"}); err != nil {
		t.Fatal(err)
	}
	const n = task.AttemptsKeptFirst + task.AttemptsKeptLast + 1
	for i := 1; i < n; i++ {
		r := reserveOne(t, a, "q", time.Second)
		if _, err := svc(a).Nack(ctx, "q", "x", r.Lease, task.RetryDelay, "again"); err != nil {
			t.Fatal(err)
		}
	}
	r := reserveOne(t, a, "q", time.Second)
	if err := svc(a).Ack(ctx, "q", "x", r.Lease); err != nil {
		t.Fatal(err)
	}
	as := attemptsOf(t, a, "q", "x")
	const kept = task.AttemptsKeptFirst + task.AttemptsKeptLast
	if len(as) != kept {
		t.Fatalf("a task acked at attempt %d keeps %d attempt records; want %d", n, len(as), kept)
	}
	for i, at := range as {
		want, outcome := i+1, task.AttemptNacked
		if i >= task.AttemptsKeptFirst {
			want = n - kept + i + 1
		}
		if i == kept-1 {
			outcome = task.AttemptAcked
		}
		if at.N != want || at.Attempt != want || at.Outcome != outcome {
			t.Fatalf("attempt record %d: %+v; want number %d, %s", i, at, want, outcome)
		}
	}
}
