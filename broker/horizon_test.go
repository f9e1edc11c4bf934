package broker_test

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hourglass-go/hourglass/broker"
	"github.com/hourglass-go/hourglass/store/memstore"
	"github.com/hourglass-go/hourglass/task"
)

// TestBroker_FarDelaysOnTime: tasks due beyond the delay wheel's horizon
// (a minute) wait in their slots until a sweep arms them; each is still
// delivered at its due time (or at the restart when it fell due while
// the broker was down), never before, whether put before or after a
// restart, released with a long delay, or due right at the horizon.
func TestBroker_FarDelaysOnTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		b, err := broker.Open(st, broker.Config{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		delays := []time.Duration{
			10 * time.Second, 59 * time.Second, time.Minute, 61 * time.Second,
			90 * time.Second, 150 * time.Second, 7 * time.Minute, 2*time.Hour + 3*time.Millisecond,
		}
		for i, d := range delays {
			put(t, b, "q", task.PutRequest{ID: fmt.Sprint(i), Delay: d})
		}
		// Restart halfway through the first window: recovery re-arms only
		// what is near.
		time.Sleep(45 * time.Second)
		b.Close()
		b, err = broker.Open(st, broker.Config{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		got := map[string]time.Duration{}
		for len(got) < len(delays) && time.Since(start) < 3*time.Hour {
			ts, err := svc(b).Reserve(ctx, "q", 10, task.MaxWait)
			if err != nil {
				t.Fatal(err)
			}
			for _, tk := range ts {
				got[tk.ID] = time.Since(start)
				if err := svc(b).Ack(ctx, "q", tk.ID, tk.Lease); err != nil {
					t.Fatal(err)
				}
			}
		}
		for i, d := range delays {
			at, ok := got[fmt.Sprint(i)]
			if !ok {
				t.Errorf("task due after %v never delivered", d)
				continue
			}
			if want := max(d, 45*time.Second); at < want || at > want+2*time.Millisecond {
				t.Errorf("task due after %v delivered after %v", d, at)
			}
		}
		// A release with a delay past the horizon, then a put after a sweep.
		put(t, b, "q", task.PutRequest{ID: "r"})
		ts, _ := svc(b).Reserve(ctx, "q", 1, 0)
		if len(ts) != 1 {
			t.Fatalf("reserve: %v", ts)
		}
		rel := time.Now()
		if _, err := svc(b).Nack(ctx, "q", "r", ts[0].Lease, 5*time.Minute, ""); err != nil {
			t.Fatal(err)
		}
		for ts = nil; len(ts) == 0 && time.Since(rel) < time.Hour; {
			if ts, err = svc(b).Reserve(ctx, "q", 1, time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		if w := time.Since(rel); w < 5*time.Minute || w > 5*time.Minute+2*time.Millisecond {
			t.Fatalf("released task delivered after %v, want 5m", w)
		}
	})
}

// TestBroker_DelayAtHorizon: tasks due exactly at, just before and just
// after the wheel's horizon when put, without a restart, are each
// delivered at their due time.
func TestBroker_DelayAtHorizon(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := open(t, memstore.New())
		start := time.Now()
		delays := []time.Duration{time.Minute - time.Millisecond, time.Minute, time.Minute + time.Millisecond, 91 * time.Second}
		for i, d := range delays {
			put(t, b, "q", task.PutRequest{ID: fmt.Sprint(i), Delay: d})
		}
		for i, d := range delays {
			ts, err := svc(b).Reserve(ctx, "q", 1, 2*time.Minute)
			if err != nil || len(ts) != 1 || ts[0].ID != fmt.Sprint(i) {
				t.Fatalf("reserve %d: %v %v", i, ts, err)
			}
			if at := time.Since(start); at < d || at > d+2*time.Millisecond {
				t.Errorf("task due after %v delivered after %v", d, at)
			}
		}
	})
}
