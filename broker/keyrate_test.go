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

// TestKeyRate_Bounded: a per-key rate's buckets live only while they are
// not full: 1,000 keys handed a task each have 1,000 buckets, and none
// once a token's time has passed (a full bucket is no bucket). A key
// spent keeps its bucket until its next token, and its next task comes
// then, to a reserver waiting, not before.
func TestKeyRate_Bounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := open(t, memstore.New())
		const every = 100 * time.Millisecond
		setPolicy(t, b, "q", task.Policy{PerKey: &task.PerKey{Rate: &task.Rate{Limit: 1, Per: every}}})
		const keys = 1000
		for i := range keys {
			put(t, b, "q", task.PutRequest{ID: fmt.Sprint(i), Key: fmt.Sprint("k", i)})
		}
		put(t, b, "q", task.PutRequest{ID: "a2", Key: "k0"})
		ts, err := svc(b).Reserve(ctx, "q", keys, 0)
		if err != nil || len(ts) != keys {
			t.Fatalf("reserve: %d tasks, %v; want one of each of %d keys", len(ts), err, keys)
		}
		if ts, err := svc(b).Reserve(ctx, "q", keys, 0); err != nil || len(ts) != 0 {
			t.Fatalf("second reserve: %d tasks, %v; want none: k0 is spent", len(ts), err)
		}
		if n := broker.KeyRates(b, "q"); n != keys {
			t.Fatalf("%d buckets after a task of each of %d keys", n, keys)
		}
		start := time.Now()
		ts, err = svc(b).Reserve(ctx, "q", 1, time.Second)
		if err != nil || len(ts) != 1 || ts[0].ID != "a2" {
			t.Fatalf("waiting reserve: %v, %v; want a2", ts, err)
		}
		if d := time.Since(start); d < every-time.Millisecond {
			t.Fatalf("k0's second task %v after its first; its rate is 1 a %v", d, every)
		}
		time.Sleep(2 * every)
		synctest.Wait()
		if n := broker.KeyRates(b, "q"); n != 0 {
			t.Fatalf("%d buckets left after every bucket was full again; want 0", n)
		}

		// A change of the per-key rate drops the buckets: full again.
		put(t, b, "q", task.PutRequest{ID: "b1", Key: "k1"})
		put(t, b, "q", task.PutRequest{ID: "b2", Key: "k1"})
		if ts, _ := svc(b).Reserve(ctx, "q", 10, 0); len(ts) != 1 {
			t.Fatalf("reserve of k1's two: %d; want 1", len(ts))
		}
		setPolicy(t, b, "q", task.Policy{PerKey: &task.PerKey{Rate: &task.Rate{Limit: 1, Per: time.Hour}}})
		if n := broker.KeyRates(b, "q"); n != 0 {
			t.Fatalf("%d buckets after a new rate", n)
		}
		if ts, _ := svc(b).Reserve(ctx, "q", 10, 0); len(ts) != 1 {
			t.Fatalf("reserve after a new rate: %d; want k1's second", len(ts))
		}
	})
}

// TestKeyRate_SurvivesRestart: a per-key rate's buckets are written when
// the broker closes and read back when it opens: keys A and B, each
// handed a task under a rate of 1 an hour, get nothing after a restart
// (a restart that refilled them would hand out one of each), on
// memstore and on Pebble.
func TestKeyRate_SurvivesRestart(t *testing.T) {
	for name, newStore := range reopenable(t) {
		t.Run(name, func(t *testing.T) {
			st := newStore()
			b, err := broker.Open(st, broker.Config{Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			setPolicy(t, b, "q", task.Policy{PerKey: &task.PerKey{Rate: &task.Rate{Limit: 1, Per: time.Hour, Burst: 1}}})
			for i := range 3 {
				put(t, b, "q", task.PutRequest{ID: fmt.Sprint("a", i), Key: "A"})
				put(t, b, "q", task.PutRequest{ID: fmt.Sprint("b", i), Key: "B"})
			}
			if ts, err := svc(b).Reserve(ctx, "q", 10, 0); err != nil || len(ts) != 2 {
				t.Fatalf("first reserve: %d, %v; want one of A and one of B", len(ts), err)
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			if c, ok := st.(interface{ Close() error }); ok && name == "pebble" {
				c.Close()
			}
			st = newStore()
			b, err = broker.Open(st, broker.Config{Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			if n := broker.KeyRates(b, "q"); n != 2 {
				t.Fatalf("%d buckets after the restart; want A's and B's", n)
			}
			if ts, err := svc(b).Reserve(ctx, "q", 10, 0); err != nil || len(ts) != 0 {
				t.Fatalf("reserve after the restart: %v, %v; want none, both keys spent for an hour", ts, err)
			}
		})
	}
}
