package servicetest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// RunDedupe runs the suite of dedupe windows (task.Policy.Dedupe, the
// rule in service/dedupe.go) over the service open returns: within the
// window a put (alone, in a batch, with replace) of an id that finished
// (acked, dead into a dead-letter queue, deleted) answers the finished
// task and puts nothing; after the window, or in a queue without one, it
// puts a new task; the window is bounded; and the records survive a
// restart: reopen closes the service and opens the same engine again
// over the same data (the embedded engine over its store, a new cluster
// node over the same database), returning the new service.
func RunDedupe(t *testing.T, open func(t *testing.T) (s service.Service, reopen func() service.Service)) {
	ctx := context.Background()
	b, reopen := open(t)

	// The bound, and the record of the policy.
	for _, d := range []time.Duration{-time.Second, task.MaxDedupe + time.Second} {
		_, err := b.SetPolicy(ctx, "dd", task.Policy{Dedupe: d})
		wantErr(t, "SetPolicy with dedupe "+d.String(), err, task.ErrInvalid)
	}
	p, err := b.SetPolicy(ctx, "dd", task.Policy{Dedupe: time.Hour, DeadLetter: "dd-dead"})
	must(t, "SetPolicy dedupe 1h", err)
	if p.Dedupe != time.Hour {
		t.Fatalf("SetPolicy answered dedupe %s, want 1h", p.Dedupe)
	}
	_, err = b.SetPolicy(ctx, "plain", task.Policy{})
	must(t, "SetPolicy of plain", err)

	// finish puts id into queue and makes it leave by how: "ack",
	// "delete" or "bury" (dead, moved to the dead-letter queue); it
	// returns the task as put.
	finish := func(b service.Service, queue, id, how string) task.Task {
		t.Helper()
		put, created, err := b.Put(ctx, queue, task.PutRequest{ID: id, Payload: []byte(`"x"`)})
		if err != nil || !created {
			t.Fatalf("Put %s/%s: created %v, %v", queue, id, created, err)
		}
		if how == "delete" {
			must(t, "Delete "+id, b.Delete(ctx, queue, id))
			return put
		}
		r := ReserveOne(t, b, queue, 5*time.Second)
		if r.ID != id {
			t.Fatalf("reserved %s, want %s", r.ID, id)
		}
		if how == "ack" {
			must(t, "Ack "+id, b.Ack(ctx, queue, id, r.Lease))
		} else {
			_, err := b.Bury(ctx, queue, id, r.Lease, "broken")
			must(t, "Bury "+id, err)
		}
		return put
	}
	// wantDeduped checks that a put's answer is the finished task of
	// put's job with outcome.
	wantDeduped := func(what string, got task.Task, created bool, err error, put task.Task, outcome string) {
		t.Helper()
		if err != nil || created || got.State != task.Done || got.Outcome != outcome || got.JobID != put.JobID ||
			got.ID != put.ID || got.Queue != put.Queue || got.Finished.IsZero() || got.Finished.Before(put.Created.Add(-timeSlack)) {
			t.Fatalf("%s: %+v created %v, %v; want the finished task %s (job %d) %s", what, got, created, err, put.ID, put.JobID, outcome)
		}
	}
	wantNothingReady := func(b service.Service, queue string) {
		t.Helper()
		ts, err := b.Reserve(ctx, queue, 10, 0)
		if err != nil || len(ts) != 0 {
			t.Fatalf("Reserve(%s) after deduped puts: %d tasks, %v; want none", queue, len(ts), err)
		}
	}

	acked := finish(b, "dd", "a1", "ack")
	deleted := finish(b, "dd", "d1", "delete")
	dead := finish(b, "dd", "x1", "bury")
	for _, c := range []struct {
		put     task.Task
		outcome string
	}{{acked, task.FinishedAcked}, {deleted, task.FinishedDeleted}, {dead, task.FinishedDead}} {
		got, created, err := b.Put(ctx, "dd", task.PutRequest{ID: c.put.ID, Payload: []byte(`"again"`)})
		wantDeduped("Put of "+c.put.ID+" after its finish", got, created, err, c.put, c.outcome)
		got, created, err = b.Put(ctx, "dd", task.PutRequest{ID: c.put.ID, Replace: true})
		wantDeduped("Put with replace of "+c.put.ID, got, created, err, c.put, c.outcome)
	}
	if f := func() task.Task { g, _, _ := b.Put(ctx, "dd", task.PutRequest{ID: "x1"}); return g }(); f.LastError != "broken" || f.Attempts != 1 {
		t.Fatalf("deduped put of a buried task: last error %q, attempts %d; want \"broken\", 1", f.LastError, f.Attempts)
	}
	// A batch answers each item alone: the finished ones deduped, a new
	// id put.
	res := b.PutBatch(ctx, "dd", []task.PutRequest{{ID: "a1"}, {ID: "new1"}, {ID: "d1"}})
	wantDeduped("batch item a1", res[0].Task, res[0].Created, res[0].Err, acked, task.FinishedAcked)
	wantDeduped("batch item d1", res[2].Task, res[2].Created, res[2].Err, deleted, task.FinishedDeleted)
	if res[1].Err != nil || !res[1].Created || res[1].Task.State != task.Ready {
		t.Fatalf("batch item new1: %+v; want created, ready", res[1])
	}
	// Nothing but new1 was put.
	r := ReserveOne(t, b, "dd", 5*time.Second)
	if r.ID != "new1" {
		t.Fatalf("reserved %s, want new1", r.ID)
	}
	must(t, "Ack new1", b.Ack(ctx, "dd", "new1", r.Lease))
	wantNothingReady(b, "dd")

	// A live task of the id wins: the put answers it as usual.
	if _, _, err := b.Put(ctx, "dd", task.PutRequest{ID: "live", Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if got, created, err := b.Put(ctx, "dd", task.PutRequest{ID: "live"}); err != nil || created || got.State != task.Delayed {
		t.Fatalf("Put of a live id: %+v created %v, %v; want the delayed task", got, created, err)
	}

	// A queue without a window puts a finished id again, as it always did.
	finish(b, "plain", "p1", "ack")
	if got, created, err := b.Put(ctx, "plain", task.PutRequest{ID: "p1"}); err != nil || !created || got.State != task.Ready {
		t.Fatalf("Put of a finished id into a queue without dedupe: %+v created %v, %v; want a new task", got, created, err)
	}

	// After the window the id is free again.
	_, err = b.SetPolicy(ctx, "short", task.Policy{Dedupe: 300 * time.Millisecond})
	must(t, "SetPolicy dedupe 300ms", err)
	finish(b, "short", "s1", "ack")
	time.Sleep(600 * time.Millisecond)
	if got, created, err := b.Put(ctx, "short", task.PutRequest{ID: "s1"}); err != nil || !created || got.State != task.Ready {
		t.Fatalf("Put after the window: %+v created %v, %v; want a new task", got, created, err)
	}
	// A window set to 0 frees the ids of the queue at once.
	finish(b, "zero", "z1", "ack")
	_, err = b.SetPolicy(ctx, "zero", task.Policy{Dedupe: time.Hour})
	must(t, "SetPolicy of zero", err)
	zero := finish(b, "zero", "z2", "ack")
	if got, created, err := b.Put(ctx, "zero", task.PutRequest{ID: "z1"}); err != nil || !created {
		t.Fatalf("Put of an id finished before the queue had a window: %+v created %v, %v; want a new task", got, created, err)
	}
	got, created, err := b.Put(ctx, "zero", task.PutRequest{ID: "z2"})
	wantDeduped("Put of z2", got, created, err, zero, task.FinishedAcked)
	_, err = b.SetPolicy(ctx, "zero", task.Policy{})
	must(t, "SetPolicy without dedupe", err)
	live, created, err := b.Put(ctx, "zero", task.PutRequest{ID: "z2"})
	if err != nil || !created {
		t.Fatalf("Put after the window was removed: %+v created %v, %v; want a new task", live, created, err)
	}
	// A live task is replaced as ever, though an older task of its id
	// finished within the window set again.
	_, err = b.SetPolicy(ctx, "zero", task.Policy{Dedupe: time.Hour})
	must(t, "SetPolicy of zero again", err)
	got, created, err = b.Put(ctx, "zero", task.PutRequest{ID: "z2", Replace: true, Payload: []byte(`"new"`)})
	if err != nil || created || got.State != task.Ready || got.JobID == live.JobID || string(got.Payload) != `"new"` {
		t.Fatalf("Put with replace of a live task in a queue with a window: %+v created %v, %v; want its replacement", got, created, err)
	}
	_, err = b.SetPolicy(ctx, "zero", task.Policy{})
	must(t, "SetPolicy of zero without dedupe", err)
	must(t, "Delete z1", b.Delete(ctx, "zero", "z1")) // no record: the queue has no window
	_, err = b.SetPolicy(ctx, "zero", task.Policy{Dedupe: time.Hour})
	must(t, "SetPolicy of zero again", err)
	r = ReserveOne(t, b, "zero", 5*time.Second)
	if r.ID != "z2" {
		t.Fatalf("reserved %s, want z2", r.ID)
	}
	must(t, "Ack z2", b.Ack(ctx, "zero", "z2", r.Lease))
	again, created, err := b.Put(ctx, "zero", task.PutRequest{ID: "z2"})
	wantDeduped("Put of z2 acked after its replace", again, created, err, got, task.FinishedAcked)

	// A put racing an ack: every put begun after the ack was answered
	// answers the finished task; none creates a second task.
	_, err = b.SetPolicy(ctx, "race", task.Policy{Dedupe: time.Hour})
	must(t, "SetPolicy of race", err)
	if _, _, err := b.Put(ctx, "race", task.PutRequest{ID: "r1"}); err != nil {
		t.Fatal(err)
	}
	r = ReserveOne(t, b, "race", 5*time.Second)
	var answered atomic.Bool
	racer := make(chan string, 1)
	go func() {
		after := 0
		deadline := time.Now().Add(30 * time.Second)
		for after < 20 && time.Now().Before(deadline) {
			late := answered.Load()
			got, created, err := b.Put(ctx, "race", task.PutRequest{ID: "r1"})
			if late {
				after++
				if err != nil || created || got.State != task.Done {
					racer <- fmt.Sprintf("a put begun after the ack was answered: %+v created %v, %v", got, created, err)
					return
				}
			}
		}
		racer <- ""
	}()
	time.Sleep(time.Millisecond)
	must(t, "Ack r1", b.Ack(ctx, "race", "r1", r.Lease))
	answered.Store(true)
	if msg := <-racer; msg != "" {
		t.Fatal(msg)
	}
	if got, err := b.Get("race", "r1"); err == nil {
		t.Fatalf("after the racing puts a task r1 is live: %+v", got)
	}

	// The records and the policy survive a restart.
	b = reopen()
	if p, err := b.Policy(ctx, "dd"); err != nil || p.Dedupe != time.Hour {
		t.Fatalf("Policy after a restart: %+v, %v; want dedupe 1h", p, err)
	}
	got, created, err = b.Put(ctx, "dd", task.PutRequest{ID: "a1"})
	wantDeduped("Put of a1 after a restart", got, created, err, acked, task.FinishedAcked)
	res = b.PutBatch(ctx, "dd", []task.PutRequest{{ID: "x1"}})
	wantDeduped("batch item x1 after a restart", res[0].Task, res[0].Created, res[0].Err, dead, task.FinishedDead)
	wantNothingReady(b, "dd")
	// A task acked after the restart is deduped too.
	again = finish(b, "dd", "after", "ack")
	got, created, err = b.Put(ctx, "dd", task.PutRequest{ID: "after"})
	wantDeduped("Put of a task acked after a restart", got, created, err, again, task.FinishedAcked)
}
