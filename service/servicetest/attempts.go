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
