package broker_test

import (
	"context"
	"errors"
	"testing"

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
		if _, _, err := b.Put(ctx, "q", task.PutRequest{ID: id, Payload: []byte(id)}); err != nil {
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
		if err := b.Ack(ctx, "q", "a", "0000000000000000"); !errors.Is(err, task.ErrLease) {
			t.Errorf("ack while taken: %v, want ErrLease", err)
		}
		if err := b.Delete(ctx, "q", "a"); err != nil {
			t.Errorf("delete while taken: %v", err)
		}
		if _, _, err := b.Put(ctx, "q", task.PutRequest{ID: "c", Payload: []byte("c2"), Replace: true}); err != nil {
			t.Errorf("replace while taken: %v", err)
		}
	})
	got, err := b.Reserve(ctx, "q", 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != "b" || string(got[0].Payload) != "b" {
		t.Fatalf("reserve gave %v, want only b", got)
	}
	// The replacement of c is ready; a is gone; b is reserved once.
	got, err = b.Reserve(ctx, "q", 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != "c" || string(got[0].Payload) != "c2" || got[0].Attempts != 1 {
		t.Fatalf("second reserve gave %v, want the new c", got)
	}
	if _, err := b.Get("q", "a"); !errors.Is(err, task.ErrNotFound) {
		t.Fatalf("a after delete: %v", err)
	}
	qs, _ := b.Queues(context.Background())
	if len(qs) != 1 || qs[0].Reserved != 2 || qs[0].Ready != 0 || qs[0].Delayed != 0 {
		t.Fatalf("counts %+v, want 2 reserved", qs)
	}
}
