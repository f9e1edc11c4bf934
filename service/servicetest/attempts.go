package servicetest

import (
	"context"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// attemptsBound: a live task that fails again and again keeps its first
// task.AttemptsKeptFirst and its last task.AttemptsKeptLast attempt
// records, the ones between dropped (service.DroppedAttempts counts
// them), on every engine; explicit immediate retries and unlimited
// attempts let it fail 300 times at once.
func attemptsBound(t *testing.T, b service.Service) {
	ctx := context.Background()
	const n = 300
	setPolicy(t, b, "bound", task.Policy{Retry: &task.Retry{}, MaxAttempts: task.UnlimitedAttempts})
	putTask(t, b, "bound", task.PutRequest{ID: "x"})
	for i := 1; i <= n; i++ {
		r := ReserveOne(t, b, "bound", time.Second)
		if r.Attempts != i {
			t.Fatalf("reservation %d: attempts %d", i, r.Attempts)
		}
		tk, err := b.Nack(ctx, "bound", "x", r.Lease, task.RetryDelay, "again")
		must(t, "nack", err)
		if tk.State != task.Ready {
			t.Fatalf("nack %d under immediate retries, unlimited attempts = %+v; want ready", i, tk)
		}
	}
	as, err := b.Attempts(ctx, "bound", "x")
	must(t, "attempts", err)
	const kept = task.AttemptsKeptFirst + task.AttemptsKeptLast
	if len(as) != kept {
		t.Fatalf("a task nacked %d times keeps %d attempt records; want %d", n, len(as), kept)
	}
	for i, a := range as {
		want := i + 1
		if i >= task.AttemptsKeptFirst {
			want = n - kept + i + 1
		}
		if a.N != want || a.Outcome != task.AttemptNacked {
			t.Fatalf("attempt record %d: number %d, outcome %q; want %d, nacked", i, a.N, a.Outcome, want)
		}
	}
	if d := service.DroppedAttempts(as); d != n-kept {
		t.Fatalf("DroppedAttempts = %d; want %d", d, n-kept)
	}
}

// attemptNumbers: a task's attempt records and its attempts count agree
// (issue 44): each record is numbered as the count numbered the attempt
// it ran, so a release, which gives its attempt back, gives its number
// back too and the attempt after it has the same number, while N still
// numbers every record. The running attempt's number is the task's
// attempts.
func attemptNumbers(t *testing.T, b service.Service) {
	ctx := context.Background()
	putTask(t, b, "num", task.PutRequest{ID: "x"})
	r := ReserveOne(t, b, "num", time.Second)
	_, err := b.Release(ctx, "num", "x", r.Lease, 0)
	must(t, "release", err)
	r = ReserveOne(t, b, "num", time.Second)
	n, err := b.Nack(ctx, "num", "x", r.Lease, 0, "e")
	must(t, "nack", err)
	if n.Attempts != 1 {
		t.Fatalf("after a release and a nack: attempts %d; want 1", n.Attempts)
	}
	r = ReserveOne(t, b, "num", time.Second)
	if r.Attempts != 2 {
		t.Fatalf("reserved after a release and a nack: attempts %d; want 2", r.Attempts)
	}
	as, err := b.Attempts(ctx, "num", "x")
	must(t, "attempts", err)
	want := []struct {
		attempt int
		outcome string
	}{{1, task.AttemptReleased}, {1, task.AttemptNacked}, {2, ""}}
	if len(as) != len(want) {
		t.Fatalf("attempt records %+v; want %d", as, len(want))
	}
	for i, a := range as {
		if a.N != i+1 || a.Attempt != want[i].attempt || a.Outcome != want[i].outcome || a.Queue != "num" {
			t.Fatalf("attempt record %d = %+v; want record %d, attempt %d, outcome %q, queue num", i, a, i+1, want[i].attempt, want[i].outcome)
		}
	}
	if last := as[len(as)-1]; last.Attempt != r.Attempts {
		t.Fatalf("running attempt numbered %d; the task counts %d", last.Attempt, r.Attempts)
	}
	must(t, "ack", b.Ack(ctx, "num", "x", r.Lease))
	as, err = b.Attempts(ctx, "num", "x")
	must(t, "attempts of the acked task", err)
	if len(as) != 3 || as[2].Attempt != 2 || as[2].Outcome != task.AttemptAcked {
		t.Fatalf("attempts of the acked task: %+v; want its third record attempt 2, acked", as)
	}
}
