package broker_test

import (
	"errors"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/broker"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// TestMoveTask_SurvivesRestart: a moved task is in its new queue alone
// after a restart, in the state it had (delayed, ready, dead), with its
// job id and payload, and its old queue has no trace of it.
func TestMoveTask_SurvivesRestart(t *testing.T) {
	for name, newStore := range reopenable(t) {
		t.Run(name, func(t *testing.T) {
			st := newStore()
			b, err := broker.Open(st, broker.Config{Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			put := func(r task.PutRequest) task.Task {
				t.Helper()
				tk, _, err := b.Put(ctx, "q", r)
				if err != nil {
					t.Fatal(err)
				}
				return tk
			}
			dead := put(task.PutRequest{ID: "dead", Payload: []byte(`"d"`), MaxAttempts: 1, Priority: 0})
			r, err := b.Reserve(ctx, "q", 1, 0)
			if err != nil || len(r) != 1 {
				t.Fatal(r, err)
			}
			if _, err := b.Nack(ctx, "q", "dead", r[0].Lease, 0, "boom"); err != nil {
				t.Fatal(err)
			}
			delayed := put(task.PutRequest{ID: "later", Payload: []byte(`"l"`), Delay: time.Hour})
			ready := put(task.PutRequest{ID: "now", Payload: []byte(`"n"`), Priority: 3})
			for _, tk := range []task.Task{dead, delayed, ready} {
				if err := b.MoveTask(ctx, "q", tk.JobID, "q2"); err != nil {
					t.Fatalf("move %s: %v", tk.ID, err)
				}
			}
			if err := b.MoveTask(ctx, "q", ready.JobID, "q2"); !errors.Is(err, task.ErrNotFound) {
				t.Fatalf("move of a task gone from q: %v", err)
			}
			b.Close()
			st.Close()

			b, err = broker.Open(newStore(), broker.Config{Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			for _, c := range []struct {
				was task.Task
				st  task.State
			}{{dead, task.Dead}, {delayed, task.Delayed}, {ready, task.Ready}} {
				g, err := b.Get("q2", c.was.ID)
				if err != nil || g.State != c.st || g.JobID != c.was.JobID || string(g.Payload) != string(c.was.Payload) {
					t.Fatalf("%s in q2 after a restart: %+v, %v; want %s", c.was.ID, g, err, c.st)
				}
				if _, err := b.Get("q", c.was.ID); !errors.Is(err, task.ErrNotFound) {
					t.Fatalf("%s still in q: %v", c.was.ID, err)
				}
			}
			if page, _, err := b.FindTasks(ctx, "q", service.Filter{}, service.Cursor{}, 10); err != nil || len(page) != 0 {
				t.Fatalf("q after a restart: %+v, %v", page, err)
			}
			got, err := b.Reserve(ctx, "q2", 1, 0)
			if err != nil || len(got) != 1 || got[0].ID != "now" {
				t.Fatalf("reserve q2: %+v, %v; want now", got, err)
			}
		})
	}
}
