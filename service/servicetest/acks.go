package servicetest

import (
	"context"
	"testing"
	"time"

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

	// Answered as if the acks ran one by one: a stale ack of b before its
	// good one finds b there under another lease; and the history has
	// the acks in batch order (newest first: b, then c).
	_, _, err = b.Put(ctx, "acks", task.PutRequest{ID: "c", Payload: []byte(`1`)})
	must(t, "put c again", err)
	r := ReserveOne(t, b, "acks", time.Second)
	lease[r.ID] = r.Lease
	errs, err = b.AckMany(ctx, []task.Ack{
		{Queue: "acks", ID: "b", Lease: lease["a"]},
		{Queue: "acks", ID: "c", Lease: lease["c"]},
		{Queue: "acks", ID: "b", Lease: lease["b"]},
	})
	must(t, "AckMany", err)
	wantErr(t, "a stale ack before the good one", errs[0], task.ErrLease)
	if errs[1] != nil || errs[2] != nil {
		t.Fatalf("the good acks: %v, %v; want nil", errs[1], errs[2])
	}
	fs, _, err := b.FinishedTasks(ctx, "acks", task.FinishedAcked, 0, 2)
	must(t, "history", err)
	if len(fs) != 2 || fs[0].ID != "b" || fs[1].ID != "c" {
		t.Fatalf("history after acks of c then b in one batch: %+v; want b, then c", fs)
	}

	_, err = b.AckMany(ctx, nil)
	wantErr(t, "AckMany of none", err, task.ErrInvalid)
	_, err = b.AckMany(ctx, make([]task.Ack, task.MaxAcks+1))
	wantErr(t, "AckMany of too many", err, task.ErrInvalid)
}
