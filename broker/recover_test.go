package broker_test

import (
	"slices"
	"testing"

	"github.com/hourglass-go/hourglass/broker"
	"github.com/hourglass-go/hourglass/task"
)

// TestRecover_DeadInOrderOfDeath: after a restart a queue's dead tasks
// are kicked, peeked and listed for deletion in the order they died (as
// on a cluster node), not in job id order.
func TestRecover_DeadInOrderOfDeath(t *testing.T) {
	for name, newStore := range reopenable(t) {
		t.Run(name, func(t *testing.T) {
			st := newStore()
			b, err := broker.Open(st, broker.Config{Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			ids := []string{"a", "b", "c", "d"}
			for _, id := range ids {
				put(t, b, "q", task.PutRequest{ID: id})
			}
			leases := map[string]string{}
			for range ids {
				r, ok := reserve1(t, b, "q")
				if !ok {
					t.Fatal("nothing to reserve")
				}
				leases[r.ID] = r.Lease
			}
			died := []string{"c", "a", "d", "b"}
			for _, id := range died {
				if _, err := svc(b).Bury(ctx, "q", id, leases[id], "no"); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			if name == "pebble" {
				st.Close()
				st = newStore()
				defer st.Close()
			}
			b, err = broker.Open(st, broker.Config{Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			var got []string
			for range died {
				p, err := svc(b).Peek("q", task.Dead)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, p.ID)
				if err := svc(b).Kick(ctx, "q", p.ID); err != nil {
					t.Fatal(err)
				}
			}
			if !slices.Equal(got, died) {
				t.Fatalf("dead after a restart, first to last: %v, want the order they died, %v", got, died)
			}
		})
	}
}
