package servicetest

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// RunPoliciesAcross runs the part of the policies' suite that holds
// across a whole service over two handles of one service that open
// returns (two nodes of one cluster; the same broker twice): a policy or
// a pause set through one applies through the other, and the
// concurrency and rate limits hold over reservers on both.
func RunPoliciesAcross(t *testing.T, open func(t *testing.T) (a, b service.Service)) {
	a, b := open(t)
	t.Run("policy", func(t *testing.T) { policyAcross(t, a, b) })
	t.Run("pause", func(t *testing.T) { pauseAcross(t, a, b) })
	t.Run("concurrency", func(t *testing.T) { concurrencyAcross(t, a, b) })
	t.Run("rate", func(t *testing.T) { rateAcross(t, a, b) })
	t.Run("cancel", func(t *testing.T) { cancelAcross(t, a, b) })
	t.Run("per-key-concurrency", func(t *testing.T) { perKeyAcross(t, a, b) })
	t.Run("per-key-rate", func(t *testing.T) { perKeyRateAcross(t, a, b) })
}

// policyAcross: a policy set through a is b's, and deleted through b is
// a's no more.
func policyAcross(t *testing.T, a, b service.Service) {
	ctx := context.Background()
	p := setPolicy(t, a, "across", task.Policy{TTR: 7 * time.Second, MaxAttempts: 2, DeadLetter: "across-dead"})
	got, err := b.Policy(ctx, "across")
	if err != nil || !reflect.DeepEqual(got, p) {
		t.Fatalf("Policy through the other = %s, %v; want %s", showPolicy(got), err, showPolicy(p))
	}
	if s, ok := queueStats(t, b, "across"); !ok || !reflect.DeepEqual(s.Policy, p) {
		t.Fatalf("Queues through the other: %v, %+v", ok, s)
	}
	x := putTask(t, b, "across", task.PutRequest{ID: "x", MaxAttempts: 1})
	y := putTask(t, b, "across", task.PutRequest{ID: "y"})
	if y.TTR != 7*time.Second || y.MaxAttempts != 2 || x.MaxAttempts != 1 {
		t.Fatalf("put through the other: ttr %v, max_attempts %d; want the policy's 7s, 2", y.TTR, y.MaxAttempts)
	}
	r := ReserveOne(t, b, "across", time.Second)
	n, err := b.Nack(ctx, "across", r.ID, r.Lease, 0, "e")
	must(t, "nack through the other", err)
	if n.Queue != "across-dead" {
		t.Fatalf("last failure through the other = %+v; want moved to across-dead", n)
	}
	must(t, "delete the policy through the other", b.DeletePolicy(ctx, "across"))
	if got, err := a.Policy(ctx, "across"); err != nil || !got.IsZero() {
		t.Fatalf("Policy after the other deleted it = %s, %v", showPolicy(got), err)
	}
	z := putTask(t, a, "across", task.PutRequest{ID: "z"})
	if z.TTR != task.DefaultTTR || z.MaxAttempts != service.DefaultMaxAttempts {
		t.Fatalf("put after the other deleted the policy: ttr %v, max_attempts %d", z.TTR, z.MaxAttempts)
	}
}

// pauseAcross: a pause through a holds through b, and a resume through
// b wakes a reserver waiting on a.
func pauseAcross(t *testing.T, a, b service.Service) {
	ctx := context.Background()
	putTask(t, a, "across-paused", task.PutRequest{ID: "x"})
	must(t, "pause", a.PauseQueue(ctx, "across-paused", task.PauseIndefinitely))
	reserveNone(t, b, "across-paused", 50*time.Millisecond)
	if s, _ := queueStats(t, b, "across-paused"); !s.PausedUntil.Equal(task.PausedForever) {
		t.Fatalf("pause seen through the other: PausedUntil %v", s.PausedUntil)
	}
	got := waitingReserve(t, a, "across-paused", 1, 2*lateSlack, 50*time.Millisecond, "a reserve of a queue paused through the other got %d tasks")
	resumed := time.Now()
	must(t, "resume through the other", b.PauseQueue(ctx, "across-paused", 0))
	if ts := <-got; len(ts) != 1 {
		t.Fatalf("a reserver waiting on one got %d tasks after a resume through the other", len(ts))
	}
	if since := time.Since(resumed); since > lateSlack {
		t.Fatalf("a reserver waiting on one got its task %v after a resume through the other", since)
	}
}

// concurrencyAcross: reservers on both never hold more than the limit,
// and a place freed through one wakes a reserver waiting on the other.
func concurrencyAcross(t *testing.T, a, b service.Service) {
	ctx := context.Background()
	setPolicy(t, a, "across-wake", task.Policy{Concurrency: 1})
	putTask(t, a, "across-wake", task.PutRequest{ID: "x"})
	putTask(t, a, "across-wake", task.PutRequest{ID: "y"})
	x := ReserveOne(t, a, "across-wake", time.Second)
	got := waitingReserve(t, b, "across-wake", 1, 2*lateSlack, 50*time.Millisecond, "a reserve on the other got %d tasks at the concurrency limit")
	acked := time.Now()
	must(t, "ack", a.Ack(ctx, "across-wake", x.ID, x.Lease))
	if ts := <-got; len(ts) != 1 {
		t.Fatalf("a reserver waiting on the other got %d tasks after an ack; want 1", len(ts))
	}
	if since := time.Since(acked); since > lateSlack {
		t.Fatalf("a reserver waiting on the other got its task %v after the ack", since)
	}

	holdAtMost(t, []service.Service{a, b}, "across-conc", 2)
}

// rateAcross: reservers on both are handed out no more than burst +
// limit × elapsed / per between them.
func rateAcross(t *testing.T, a, b service.Service) {
	ctx := context.Background()
	const limit, per, total = 5, 500 * time.Millisecond, 20
	every := per / limit
	setPolicy(t, a, "across-rate", task.Policy{Rate: &task.Rate{Limit: limit, Per: per}})
	for i := range total {
		putTask(t, a, "across-rate", task.PutRequest{ID: fmt.Sprint(i)})
	}
	var got atomic.Int64
	var over atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(10 * time.Second)
	for i := range 4 {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			for got.Load() < total && time.Now().Before(deadline) {
				ts, err := s.Reserve(ctx, "across-rate", total, 300*time.Millisecond)
				if err != nil {
					over.CompareAndSwap(nil, err.Error())
					return
				}
				n := got.Add(int64(len(ts)))
				since := sinceEither(start)
				if allowed := int64(limit) + int64((since+timeSlack)/every); n > allowed {
					over.CompareAndSwap(nil, fmt.Sprintf("%d tasks handed out in %v; a rate of 5/500ms allows %d", n, since, allowed))
				}
			}
		})
	}
	wg.Wait()
	if msg := over.Load(); msg != nil {
		t.Fatalf("reservers on both: %s", msg)
	}
	if n := got.Load(); n != total {
		t.Fatalf("reservers on both got %d of %d tasks in 10s", n, total)
	}
}

// RunPoliciesOrder runs over the service open returns the test that a
// reserve over several queues hands out in delivery order across them
// whatever their limits (Tasks.ReserveQueues, Jobs.ReserveAny): a queue
// with a rate or concurrency limit within it does not lose its place to
// one without.
func RunPoliciesOrder(t *testing.T, open func(t *testing.T) service.Service) {
	b := open(t)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		p    task.Policy
	}{
		{"concurrency", task.Policy{Concurrency: 5}},
		{"rate", task.Policy{Rate: &task.Rate{Limit: 5, Per: time.Second}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			limited, free := "order-"+c.name, "order-free-"+c.name
			setPolicy(t, b, limited, c.p)
			putTask(t, b, free, task.PutRequest{ID: "f1", Priority: 10})
			putTask(t, b, free, task.PutRequest{ID: "f2", Priority: 10})
			putTask(t, b, limited, task.PutRequest{ID: "l1", Priority: 1})
			putTask(t, b, limited, task.PutRequest{ID: "l2", Priority: 20})
			ts, err := b.ReserveQueues(ctx, []string{free, limited}, 2, 0)
			must(t, "reserve over two queues", err)
			if len(ts) != 2 || ts[0].ID != "l1" || ts[1].ID != "f1" {
				t.Fatalf("reserve of 2 over a queue with a %s limit and one without: %s; want l1 (priority 1), then f1 (10)", c.name, ids(ts))
			}
			tk, ok, err := b.ReserveAny(ctx, []string{free, limited}, 0)
			if err != nil || !ok || tk.ID != "f2" {
				t.Fatalf("ReserveAny = %s/%s, %v, %v; want f2 (priority 10 before 20)", tk.Queue, tk.ID, ok, err)
			}
			tk, ok, err = b.ReserveAny(ctx, []string{free, limited}, 0)
			if err != nil || !ok || tk.ID != "l2" {
				t.Fatalf("ReserveAny = %s/%s, %v, %v; want l2", tk.Queue, tk.ID, ok, err)
			}
		})
	}
}

// ids lists tasks as queue/id, priority, for a message.
func ids(ts []task.Task) string {
	var s []string
	for _, tk := range ts {
		s = append(s, fmt.Sprintf("%s/%s (priority %d)", tk.Queue, tk.ID, tk.Priority))
	}
	return "[" + strings.Join(s, ", ") + "]"
}
