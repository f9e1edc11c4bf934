package broker_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hourglass-go/hourglass/broker"
	"github.com/hourglass-go/hourglass/store/memstore"
	"github.com/hourglass-go/hourglass/task"
)

// TestReserve_ChangedWhileTaken: a reserve reads the records of the tasks
// it picked with the broker's lock released; a task deleted or replaced
// in that window is not handed out, and the others are, in order.
func TestReserve_ChangedWhileTaken(t *testing.T) {
	b := open(t, memstore.New())
	for _, id := range []string{"a", "b", "c"} {
		if _, _, err := svc(b).Put(ctx, "q", task.PutRequest{ID: id, Payload: []byte(id)}); err != nil {
			t.Fatal(err)
		}
	}
	once := true
	broker.SetTakenHook(b, func() {
		if !once {
			return
		}
		once = false
		// Nothing the reserve picked is reserved under a lease yet.
		if err := svc(b).Ack(ctx, "q", "a", "0000000000000000"); !errors.Is(err, task.ErrLease) {
			t.Errorf("ack while taken: %v, want ErrLease", err)
		}
		if err := svc(b).Delete(ctx, "q", "a"); err != nil {
			t.Errorf("delete while taken: %v", err)
		}
		if _, _, err := svc(b).Put(ctx, "q", task.PutRequest{ID: "c", Payload: []byte("c2"), Replace: true}); err != nil {
			t.Errorf("replace while taken: %v", err)
		}
	})
	got, err := svc(b).Reserve(ctx, "q", 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != "b" || string(got[0].Payload) != "b" {
		t.Fatalf("reserve gave %v, want only b", got)
	}
	// The replacement of c is ready; a is gone; b is reserved once.
	got, err = svc(b).Reserve(ctx, "q", 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != "c" || string(got[0].Payload) != "c2" || got[0].Attempts != 1 {
		t.Fatalf("second reserve gave %v, want the new c", got)
	}
	if _, err := svc(b).Get("q", "a"); !errors.Is(err, task.ErrNotFound) {
		t.Fatalf("a after delete: %v", err)
	}
	qs, _ := b.Queues(context.Background())
	if len(qs) != 1 || qs[0].Reserved != 2 || qs[0].Ready != 0 || qs[0].Delayed != 0 {
		t.Fatalf("counts %+v, want 2 reserved", qs)
	}
}

// TestFire_WallClockBack: a delay wheel that fires before the task's due
// time by the wall clock (the wall clock was stepped back after the
// wheel was armed: the wheel runs on the monotonic clock) hands out
// nothing early. The task stays delayed, armed again for the rest, and
// comes when that runs out. Without the check it was ready at once.
func TestFire_WallClockBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := open(t, memstore.New())
		tk := put(t, b, "q", task.PutRequest{ID: "a", Delay: time.Hour})
		broker.Fire(b, tk.JobID)
		if got, err := svc(b).Get("q", "a"); err != nil || got.State != task.Delayed {
			t.Fatalf("after a fire an hour early: %v, %v; want delayed", got.State, err)
		}
		if ts, err := svc(b).Reserve(ctx, "q", 1, 0); err != nil || len(ts) != 0 {
			t.Fatalf("reserve after a fire an hour early: %v, %v; want nothing", ts, err)
		}
		time.Sleep(time.Hour - time.Minute)
		ts, err := svc(b).Reserve(ctx, "q", 1, 5*time.Minute)
		if err != nil || len(ts) != 1 {
			t.Fatalf("reserve waiting from a minute before its due time: %v, %v", ts, err)
		}
		if now := time.Now(); now.Before(tk.Due) {
			t.Fatalf("handed out at %v, before its due time %v", now, tk.Due)
		}
	})
}
