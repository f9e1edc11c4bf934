package servicetest

import (
	"context"
	"testing"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// ackMany checks AckMany over b: each ack answered alone and in order,
// as Ack would answer it (taken; a lease not the task's; a task gone,
// also when acked twice in one batch; a malformed lease), the tasks
// acked gone and the others untouched, and a batch of no acks or of
// more than task.MaxAcks refused whole.
func ackMany(t *testing.T, b service.Service) {
	ctx := context.Background()
	for _, id := range []string{"a", "b", "c"} {
		_, _, err := b.Put(ctx, "acks", task.PutRequest{ID: id, Payload: []byte(`1`)})
		must(t, "put "+id, err)
	}
	ts, err := b.Reserve(ctx, "acks", 3, 0)
	if err != nil || len(ts) != 3 {
		t.Fatalf("Reserve: %d tasks, %v; want 3", len(ts), err)
	}
	lease := map[string]string{}
	for _, x := range ts {
		lease[x.ID] = x.Lease
	}
	errs, err := b.AckMany(ctx, []task.Ack{
		{Queue: "acks", ID: "a", Lease: lease["a"]},
		{Queue: "acks", ID: "b", Lease: lease["c"]},
		{Queue: "acks", ID: "nope", Lease: lease["a"]},
		{Queue: "acks", ID: "a", Lease: lease["a"]},
		{Queue: "acks", ID: "c", Lease: lease["c"]},
		{Queue: "acks", ID: "b", Lease: ""},
	})
	must(t, "AckMany", err)
	if len(errs) != 6 {
		t.Fatalf("AckMany answered %d errors for 6 acks", len(errs))
	}
	if errs[0] != nil || errs[4] != nil {
		t.Fatalf("the good acks: %v, %v; want nil", errs[0], errs[4])
	}
	wantErr(t, "ack under another task's lease", errs[1], task.ErrLease)
	wantErr(t, "ack of no such task", errs[2], task.ErrNotFound)
	wantErr(t, "the same ack twice in one batch", errs[3], task.ErrNotFound)
	wantErr(t, "ack with no lease", errs[5], task.ErrInvalid)
	for _, id := range []string{"a", "c"} {
		_, err := b.Get("acks", id)
		wantErr(t, "get "+id+" after its ack", err, task.ErrNotFound)
	}
	got, err := b.Get("acks", "b")
	must(t, "get b", err)
	if got.State != task.Reserved {
		t.Fatalf("b after acks that failed: %v, want reserved", got.State)
	}
	_, err = b.AckMany(ctx, nil)
	wantErr(t, "AckMany of none", err, task.ErrInvalid)
	_, err = b.AckMany(ctx, make([]task.Ack, task.MaxAcks+1))
	wantErr(t, "AckMany of too many", err, task.ErrInvalid)
}
