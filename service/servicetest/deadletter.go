package servicetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// deadLetterAttempts: a task moved to a dead-letter queue starts there
// as a task put there would (service.DeadLettered): no attempts, and the
// dead-letter queue policy's max_attempts and ttr, whatever it was put
// with (issue 44). It is reserved and nacked there up to that many
// times, then dies in the dead-letter queue, and its attempt records
// keep every attempt, before and after the move, each numbered as its
// attempts counted in the queue it ran in. A dead-letter queue without
// a policy gives the default max_attempts, and the task keeps its ttr.
func deadLetterAttempts(t *testing.T, b service.Service) {
	ctx := context.Background()
	setPolicy(t, b, "dla", task.Policy{DeadLetter: "dla-dead", Retry: &task.Retry{}})
	setPolicy(t, b, "dla-dead", task.Policy{MaxAttempts: 3, TTR: 30 * time.Second, Retry: &task.Retry{}})
	putTask(t, b, "dla", task.PutRequest{ID: "x", MaxAttempts: 4, TTR: 5 * time.Second})
	for i := 1; i <= 4; i++ {
		r := ReserveOne(t, b, "dla", time.Second)
		if r.Attempts != i || r.MaxAttempts != 4 {
			t.Fatalf("reservation %d in dla: attempts %d/%d; want %d/4", i, r.Attempts, r.MaxAttempts, i)
		}
		_, err := b.Nack(ctx, "dla", "x", r.Lease, 0, fmt.Sprintf("e%d", i))
		must(t, "nack in dla", err)
	}
	g, err := b.Get("dla-dead", "x")
	must(t, "get from the dead-letter queue", err)
	if g.State != task.Ready || g.Attempts != 0 || g.MaxAttempts != 3 || g.TTR != 30*time.Second || g.LastError != "e4" {
		t.Fatalf("dead-lettered task = %+v; want ready, attempts 0/3, ttr 30s (dla-dead's policy), last error e4", g)
	}
	for i := 1; i <= 3; i++ {
		r := ReserveOne(t, b, "dla-dead", time.Second)
		if r.Attempts != i || r.MaxAttempts != 3 {
			t.Fatalf("reservation %d in dla-dead: attempts %d/%d; want %d/3", i, r.Attempts, r.MaxAttempts, i)
		}
		n, err := b.Nack(ctx, "dla-dead", "x", r.Lease, 0, fmt.Sprintf("d%d", i))
		must(t, "nack in dla-dead", err)
		if want := task.Ready; i == 3 {
			if n.State != task.Dead || n.Queue != "dla-dead" {
				t.Fatalf("third nack in dla-dead = %+v; want dead there", n)
			}
		} else if n.State != want {
			t.Fatalf("nack %d in dla-dead = %+v; want ready", i, n)
		}
	}
	as, err := b.Attempts(ctx, "dla-dead", "x")
	must(t, "attempts", err)
	want := []struct {
		n     int
		queue string
	}{{1, "dla"}, {2, "dla"}, {3, "dla"}, {4, "dla"}, {1, "dla-dead"}, {2, "dla-dead"}, {3, "dla-dead"}}
	if len(as) != len(want) {
		t.Fatalf("attempt records: %+v; want %d", as, len(want))
	}
	for i, a := range as {
		if a.Attempt != want[i].n || a.Queue != want[i].queue || a.Outcome != task.AttemptNacked || a.N != i+1 {
			t.Fatalf("attempt record %d = %+v; want attempt %d in %s, record %d, nacked", i, a, want[i].n, want[i].queue, i+1)
		}
	}
	if d := service.DroppedAttempts(as); d != 0 {
		t.Fatalf("DroppedAttempts = %d; want 0", d)
	}

	// Without a policy: the default max_attempts, its own ttr.
	setPolicy(t, b, "dlb", task.Policy{DeadLetter: "dlb-dead"})
	putTask(t, b, "dlb", task.PutRequest{ID: "y", MaxAttempts: 1, TTR: 5 * time.Second})
	r := ReserveOne(t, b, "dlb", time.Second)
	n, err := b.Nack(ctx, "dlb", "y", r.Lease, 0, "e")
	must(t, "nack in dlb", err)
	if n.Queue != "dlb-dead" || n.Attempts != 0 || n.MaxAttempts != service.DefaultMaxAttempts || n.TTR != 5*time.Second {
		t.Fatalf("dead-lettered into a queue without a policy = %+v; want attempts 0/%d, ttr 5s", n, service.DefaultMaxAttempts)
	}
}
