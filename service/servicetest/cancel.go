package servicetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// cancelled: Cancel deletes a task in any state and records it
// cancelled (the history, and a reserved task's running attempt); a
// reserved task's lease is reported to WatchCancels and CancelledLeases,
// and acks, touches and nacks of it answer as for a deleted task; the
// task is never handed out again; a second Cancel, or one of a task never
// put, answers task.ErrNotFound. A Delete of a reserved task (one alone,
// or in bulk) reports its lease too, and stays deleted in the history.
func cancelled(t *testing.T, b service.Service) {
	ctx := context.Background()
	const q = "cancel"
	heard := make(chan string, 16)
	stop := b.WatchCancels(func(lease string) { heard <- lease })
	defer stop()

	setPolicy(t, b, q, task.Policy{MaxAttempts: 1})
	putTask(t, b, q, task.PutRequest{ID: "r"})
	r := ReserveOne(t, b, q, time.Second)
	must(t, "cancel of a reserved task", b.Cancel(ctx, q, "r"))
	wantHeard(t, heard, r.Lease)
	got, err := b.CancelledLeases([]string{"no-such-lease", r.Lease})
	must(t, "CancelledLeases", err)
	if !slices.Equal(got, []string{r.Lease}) {
		t.Fatalf("CancelledLeases = %q; want [%q]", got, r.Lease)
	}
	_, err = b.Get(q, "r")
	wantErr(t, "get of a cancelled task", err, task.ErrNotFound)
	wantErr(t, "ack of a cancelled lease", b.Ack(ctx, q, "r", r.Lease), task.ErrNotFound)
	_, err = b.Touch(ctx, q, "r", r.Lease)
	wantErr(t, "touch of a cancelled lease", err, task.ErrNotFound)
	_, err = b.Nack(ctx, q, "r", r.Lease, 0, "x")
	wantErr(t, "nack of a cancelled lease", err, task.ErrNotFound)
	wantErr(t, "a second cancel", b.Cancel(ctx, q, "r"), task.ErrNotFound)
	wantErr(t, "cancel of a task never put", b.Cancel(ctx, q, "never"), task.ErrNotFound)
	wantAttempts(t, b, q, "r", "1 cancelled")

	// Ready, delayed and dead tasks: deleted, recorded cancelled, no
	// lease reported.
	putTask(t, b, q, task.PutRequest{ID: "x"})
	x := ReserveOne(t, b, q, time.Second)
	if x.ID != "x" {
		t.Fatalf("reserved %s; want x", x.ID)
	}
	if tk, err := b.Nack(ctx, q, "x", x.Lease, 0, "boom"); err != nil || tk.State != task.Dead {
		t.Fatalf("nack of x with max_attempts 1 = %v, %v; want dead", tk.State, err)
	}
	putTask(t, b, q, task.PutRequest{ID: "w"})
	putTask(t, b, q, task.PutRequest{ID: "d", Delay: time.Hour})
	for _, id := range []string{"w", "d", "x"} {
		must(t, "cancel of "+id, b.Cancel(ctx, q, id))
	}
	wantAttempts(t, b, q, "x", "1 nacked")
	fs, _, err := b.FinishedTasks(ctx, q, task.FinishedCancelled, 0, 10)
	must(t, "history of cancelled tasks", err)
	var ids []string
	for _, f := range fs {
		ids = append(ids, f.ID+" "+f.Outcome)
	}
	if want := []string{"x cancelled", "d cancelled", "w cancelled", "r cancelled"}; !slices.Equal(ids, want) {
		t.Fatalf("history of cancelled tasks: %q; want %q", ids, want)
	}
	all, _, err := b.FinishedTasks(ctx, q, "", 0, 10)
	must(t, "history of any outcome", err)
	if len(all) != len(fs)+1 {
		t.Fatalf("history of any outcome: %d records; want the %d cancelled and x dead", len(all), len(fs))
	}
	if ts, err := b.Reserve(ctx, q, 10, 0); err != nil || len(ts) != 0 {
		t.Fatalf("reserve after the cancels: %d tasks, %v; want none", len(ts), err)
	}

	// A Delete of a reserved task reports its lease, and is a delete.
	putTask(t, b, q, task.PutRequest{ID: "del"})
	del := ReserveOne(t, b, q, time.Second)
	must(t, "delete of a reserved task", b.Delete(ctx, q, "del"))
	wantHeard(t, heard, del.Lease)
	if f, err := b.LastFinished(ctx, q, "del"); err != nil || f.Outcome != task.FinishedDeleted {
		t.Fatalf("LastFinished of a deleted task = %+v, %v; want deleted", f, err)
	}
	// So does a bulk delete of reserved tasks.
	putTask(t, b, q, task.PutRequest{ID: "bulk"})
	bulk := ReserveOne(t, b, q, time.Second)
	if res, err := b.Bulk(ctx, q, service.BulkRequest{Action: service.Delete, Filter: service.Filter{State: task.Reserved}}); err != nil || res.Changed != 1 {
		t.Fatalf("bulk delete of the reserved tasks = %+v, %v; want 1 changed", res, err)
	}
	wantHeard(t, heard, bulk.Lease)
	select {
	case l := <-heard:
		t.Fatalf("lease %q reported; want only the reserved tasks'", l)
	default:
	}

	for _, bad := range [][]string{nil, {""}, make([]string, task.MaxAcks+1)} {
		_, err := b.CancelledLeases(bad)
		wantErr(t, fmt.Sprintf("CancelledLeases of %d leases", len(bad)), err, task.ErrInvalid)
	}
	wantErr(t, "cancel of a bad id", b.Cancel(ctx, q, "a b"), task.ErrInvalid)
}

// cancelAcross: a reserved task reserved through a and cancelled through
// b has its lease reported by a (WatchCancels, CancelledLeases): on a
// cluster, a's node heard of it from b's.
func cancelAcross(t *testing.T, a, b service.Service) {
	ctx := context.Background()
	heard := make(chan string, 16)
	stop := a.WatchCancels(func(lease string) { heard <- lease })
	defer stop()
	putTask(t, b, "cancel-across", task.PutRequest{ID: "x"})
	r := ReserveOne(t, a, "cancel-across", time.Second)
	must(t, "cancel through the other", b.Cancel(ctx, "cancel-across", "x"))
	wantHeard(t, heard, r.Lease)
	got, err := a.CancelledLeases([]string{r.Lease})
	must(t, "CancelledLeases", err)
	if !slices.Equal(got, []string{r.Lease}) {
		t.Fatalf("CancelledLeases through the reserving side = %q; want [%q]", got, r.Lease)
	}
}

// wantHeard waits for WatchCancels to report lease.
func wantHeard(t *testing.T, heard <-chan string, lease string) {
	t.Helper()
	select {
	case l := <-heard:
		if l != lease {
			t.Fatalf("WatchCancels reported %q; want %q", l, lease)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("WatchCancels reported nothing in 10 s; want %q", lease)
	}
}

// wantAttempts checks the attempts of id as "N outcome" lines.
func wantAttempts(t *testing.T, b service.Service, queue, id string, want ...string) {
	t.Helper()
	as, err := b.Attempts(context.Background(), queue, id)
	must(t, "attempts of "+id, err)
	got := make([]string, len(as))
	for i, a := range as {
		got[i] = fmt.Sprintf("%d %s", a.N, a.Outcome)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("attempts of %s: %q; want %q", id, got, want)
	}
}
