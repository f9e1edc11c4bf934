package broker_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/broker"
	"github.com/hourglass-go/hourglass/task"
)

// TestDeadLetter_SurvivesRestart: a task moved to a dead-letter queue
// keeps, across a restart, what it started there with (no attempts, the
// dead-letter queue policy's max_attempts and ttr: service.DeadLettered),
// and its attempt records keep their numbers and queues, over memstore
// and Pebble (issue 44).
func TestDeadLetter_SurvivesRestart(t *testing.T) {
	for name, newStore := range reopenable(t) {
		t.Run(name, func(t *testing.T) {
			st := newStore()
			b, err := broker.Open(st, broker.Config{Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			setPolicy(t, b, "q", task.Policy{DeadLetter: "q-dead", Retry: &task.Retry{}})
			setPolicy(t, b, "q-dead", task.Policy{MaxAttempts: 2, TTR: 30 * time.Second, Retry: &task.Retry{}})
			put(t, b, "q", task.PutRequest{ID: "x", MaxAttempts: 2, TTR: 5 * time.Second})
			for i := range 2 {
				r, _ := reserve1(t, b, "q")
				if _, err := svc(b).Nack(ctx, "q", "x", r.Lease, 0, fmt.Sprint("e", i)); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			if name == "pebble" {
				st.Close()
			}
			st = newStore()
			if b, err = broker.Open(st, broker.Config{Logger: quiet}); err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			g, err := svc(b).Get("q-dead", "x")
			if err != nil || g.Attempts != 0 || g.MaxAttempts != 2 || g.TTR != 30*time.Second || g.State != task.Ready {
				t.Fatalf("dead-lettered task after a restart = %+v, %v; want ready, attempts 0/2, ttr 30s", g, err)
			}
			for i := 1; i <= 2; i++ {
				r, ok := reserve1(t, b, "q-dead")
				if !ok || r.Attempts != i {
					t.Fatalf("reservation %d in q-dead = %+v; want attempts %d", i, r, i)
				}
				if _, err := svc(b).Nack(ctx, "q-dead", "x", r.Lease, 0, "d"); err != nil {
					t.Fatal(err)
				}
			}
			if g, err := svc(b).Get("q-dead", "x"); err != nil || g.State != task.Dead {
				t.Fatalf("after its dead-letter queue's 2 attempts = %+v, %v; want dead", g, err)
			}
			as, err := b.Attempts(ctx, "q-dead", "x")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, a := range as {
				got = append(got, fmt.Sprintf("%d:%d:%s", a.N, a.Attempt, a.Queue))
			}
			if want := []string{"1:1:q", "2:2:q", "3:1:q-dead", "4:2:q-dead"}; !same(got, want) {
				t.Fatalf("attempt records (N:attempt:queue) %v; want %v", got, want)
			}
		})
	}
}
