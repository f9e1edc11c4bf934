package servicetest

import (
	"context"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// expiryWait: a task whose lease ran out waits for a worker from when it
// was ready again, not from its first due time (issue 44). It is put due
// now and reserved at once, its lease of waitTTR runs out, and it is
// reserved again as soon as it reads ready: the longest wait Lateness
// reports is then far below waitTTR, which a wait counted from its due
// time cannot be. No reserver waits meanwhile, so the task goes through
// the ordinary reserve (a flush handing it to a waiting reserver counts
// no wait, and would not show the difference).
func expiryWait(t *testing.T, b service.Service) {
	ctx := context.Background()
	const waitTTR = 4 * time.Second
	putTask(t, b, "wait", task.PutRequest{ID: "x", TTR: waitTTR, MaxAttempts: task.UnlimitedAttempts})
	first := ReserveOne(t, b, "wait", time.Second)
	deadline := first.LeaseUntil.Add(lateSlack + 10*time.Second)
	for {
		g, err := b.Get("wait", "x")
		must(t, "get", err)
		if g.State == task.Ready {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("task still %v %v after its lease's end", g.State, time.Since(first.LeaseUntil))
		}
		time.Sleep(20 * time.Millisecond)
	}
	again := ReserveOne(t, b, "wait", 0)
	if again.Attempts != 2 {
		t.Fatalf("reserved again = %+v; want attempts 2", again)
	}
	ws, err := b.Lateness(ctx)
	must(t, "lateness", err)
	var n int
	var wait, late time.Duration
	for _, w := range ws {
		n += w.Deliveries
		wait, late = max(wait, w.Wait.Max), max(late, w.Max)
	}
	if n != 2 {
		t.Fatalf("lateness counts %d deliveries; want 2: %+v", n, ws)
	}
	if late < waitTTR {
		t.Fatalf("a task delivered again after its lease of %v ran out: lateness %v; want at least the lease", waitTTR, late)
	}
	if wait >= waitTTR-time.Second {
		t.Fatalf("a task reserved as soon as its lease of %v ran out waited %v for a worker; want its time since the lease's end, not since its due time", waitTTR, wait)
	}
}
