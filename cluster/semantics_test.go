package cluster_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/broker"
	"github.com/hourglass-go/hourglass/httpapi"
	"github.com/hourglass-go/hourglass/store/memstore"
	"github.com/hourglass-go/hourglass/task"
)

// TestSemantics runs one scenario over a broker (on memstore) and over a
// cluster node: the same calls must give the same answers and errors, so
// that httpapi serves either unchanged; then the scenario of the job-id
// operations (jobs_test.go), so that package beanstalk does too.
func TestSemantics(t *testing.T) {
	t.Run("broker", func(t *testing.T) {
		b, err := broker.Open(memstore.New(), broker.Config{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		scenario(t, b)
		jobsScenario(t, b)
	})
	t.Run("cluster", func(t *testing.T) {
		srv := server(t)
		url := srv.CreateDatabase(t)
		a := startNode(t, url, "a")
		startNode(t, url, "b") // a second node owning half the partitions
		scenario(t, a)
		jobsScenario(t, a)
	})
}

// must fails t on err.
func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// wantErr checks that err is target.
func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: error %v, want %v", what, err, target)
	}
}

// reserveOne reserves one task of queue, waiting up to wait, and checks
// that it is not early.
func reserveOne(t *testing.T, b httpapi.Broker, queue string, wait time.Duration) task.Task {
	t.Helper()
	ts, err := b.Reserve(context.Background(), queue, 1, wait)
	if err != nil || len(ts) != 1 {
		t.Fatalf("Reserve(%s): %d tasks, %v; want 1", queue, len(ts), err)
	}
	if now := time.Now(); now.Before(ts[0].Due) {
		t.Fatalf("task %s delivered %s before its due time", ts[0].ID, ts[0].Due.Sub(now))
	}
	return ts[0]
}

func scenario(t *testing.T, b httpapi.Broker) {
	ctx := context.Background()

	// Puts: created, idempotent, replaced; bad input.
	x, created, err := b.Put(ctx, "q", task.PutRequest{ID: "x", Payload: []byte(`1`), Priority: 7})
	must(t, "put x", err)
	if !created || x.State != task.Ready || x.Priority != 7 || x.TTR != task.DefaultTTR {
		t.Fatalf("put x = %+v, created %v", x, created)
	}
	again, created, err := b.Put(ctx, "q", task.PutRequest{ID: "x", Payload: []byte(`2`)})
	must(t, "put x again", err)
	if created || again.JobID != x.JobID || string(again.Payload) != `1` {
		t.Fatalf("idempotent put = %+v, created %v; want x unchanged", again, created)
	}
	rep, created, err := b.Put(ctx, "q", task.PutRequest{ID: "x", Payload: []byte(`3`), Replace: true})
	must(t, "replace x", err)
	if created || rep.JobID == x.JobID || string(rep.Payload) != `3` {
		t.Fatalf("replace = %+v, created %v; want a new job", rep, created)
	}
	_, _, err = b.Put(ctx, "q", task.PutRequest{Delay: time.Second, At: time.Now()})
	wantErr(t, "delay and at", err, task.ErrInvalid)
	_, _, err = b.Put(ctx, "q", task.PutRequest{Payload: make([]byte, task.DefaultMaxPayload+1)})
	wantErr(t, "payload too large", err, task.ErrTooLarge)
	_, _, err = b.Put(ctx, "bad queue", task.PutRequest{})
	wantErr(t, "bad queue", err, task.ErrInvalid)
	gen, created, err := b.Put(ctx, "q", task.PutRequest{Payload: []byte(`4`)})
	must(t, "put without id", err)
	if !created || gen.ID == "" {
		t.Fatalf("put without id = %+v", gen)
	}
	got, err := b.Get("q", gen.ID)
	must(t, "get", err)
	if got.JobID != gen.JobID || string(got.Payload) != `4` {
		t.Fatalf("get = %+v", got)
	}
	_, err = b.Get("q", "nothing")
	wantErr(t, "get unknown", err, task.ErrNotFound)

	// Reserve in priority order, ack with the lease only.
	must(t, "delete gen", b.Delete(ctx, "q", gen.ID))
	wantErr(t, "delete again", b.Delete(ctx, "q", gen.ID), task.ErrNotFound)
	for _, p := range []uint32{5, 1, 3} {
		_, _, err := b.Put(ctx, "prio", task.PutRequest{ID: string(rune('a' + p)), Priority: p})
		must(t, "put prio", err)
	}
	ts, err := b.Reserve(ctx, "prio", 3, 0)
	must(t, "reserve 3", err)
	if len(ts) != 3 || ts[0].Priority != 1 || ts[1].Priority != 3 || ts[2].Priority != 5 {
		t.Fatalf("reserve order: %+v", ts)
	}
	for _, tk := range ts {
		if tk.Lease == "" || tk.Attempts != 1 || tk.State != task.Reserved {
			t.Fatalf("reserved task %+v", tk)
		}
	}
	wantErr(t, "ack without lease", b.Ack(ctx, "prio", ts[0].ID, ""), task.ErrInvalid)
	wantErr(t, "ack wrong lease", b.Ack(ctx, "prio", ts[0].ID, "nope"), task.ErrLease)
	wantErr(t, "ack unknown", b.Ack(ctx, "prio", "zz", "nope"), task.ErrNotFound)
	must(t, "ack", b.Ack(ctx, "prio", ts[0].ID, ts[0].Lease))
	wantErr(t, "ack again", b.Ack(ctx, "prio", ts[0].ID, ts[0].Lease), task.ErrNotFound)
	_, err = b.Get("prio", ts[0].ID)
	wantErr(t, "get acked", err, task.ErrNotFound)

	// Touch renews; nack gives back, at once or after a delay.
	touched, err := b.Touch(ctx, "prio", ts[1].ID, ts[1].Lease)
	must(t, "touch", err)
	if touched.Lease != ts[1].Lease || !touched.LeaseUntil.After(ts[1].LeaseUntil) {
		t.Fatalf("touch = %+v after %+v", touched, ts[1])
	}
	must(t, "nack now", b.Nack(ctx, "prio", ts[1].ID, ts[1].Lease, 0))
	wantErr(t, "nack again", b.Nack(ctx, "prio", ts[1].ID, ts[1].Lease, 0), task.ErrLease)
	r := reserveOne(t, b, "prio", time.Second)
	if r.ID != ts[1].ID || r.Attempts != 2 || r.Releases != 1 {
		t.Fatalf("after nack: %+v", r)
	}
	start := time.Now()
	must(t, "nack delayed", b.Nack(ctx, "prio", r.ID, r.Lease, 300*time.Millisecond))
	if g, _ := b.Get("prio", r.ID); g.State != task.Delayed {
		t.Fatalf("after a delayed nack: %s", g.State)
	}
	r2s, err := b.Reserve(ctx, "prio", 2, 3*time.Second)
	must(t, "reserve after nack", err)
	if len(r2s) == 0 {
		t.Fatal("reserve after nack: nothing")
	}
	// ts[2] was still reserved: only the nacked one can come back.
	if r2s[0].ID != r.ID || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("after a nack of 300ms: %s after %s", r2s[0].ID, time.Since(start))
	}

	// A lease that runs out makes the task ready, then dead.
	_, _, err = b.Put(ctx, "ttr", task.PutRequest{ID: "t", TTR: 200 * time.Millisecond, MaxAttempts: 2})
	must(t, "put ttr", err)
	first := reserveOne(t, b, "ttr", time.Second)
	second := reserveOne(t, b, "ttr", 2*time.Second)
	if second.Attempts != 2 || second.Timeouts != 1 || second.Lease == first.Lease {
		t.Fatalf("after one expiry: %+v", second)
	}
	wantErr(t, "ack expired lease", b.Ack(ctx, "ttr", "t", first.Lease), task.ErrLease)
	deadline := time.Now().Add(3 * time.Second)
	for {
		g, err := b.Get("ttr", "t")
		must(t, "get ttr", err)
		if g.State == task.Dead {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("task with max_attempts 2 after two expiries: %s", g.State)
		}
		time.Sleep(20 * time.Millisecond)
	}
	wantErr(t, "kick ready", b.Kick(ctx, "prio", ts[2].ID), task.ErrState)
	must(t, "kick", b.Kick(ctx, "ttr", "t"))
	k := reserveOne(t, b, "ttr", time.Second)
	if k.Kicks != 1 || k.Attempts != 3 {
		t.Fatalf("kicked: %+v", k)
	}

	// A delayed put is not delivered early, and long-polls wake.
	start = time.Now()
	_, _, err = b.Put(ctx, "later", task.PutRequest{ID: "l", Delay: 250 * time.Millisecond})
	must(t, "put later", err)
	if ts, _ := b.Reserve(ctx, "later", 1, 0); len(ts) != 0 {
		t.Fatal("a task delayed 250ms was reserved at once")
	}
	l := reserveOne(t, b, "later", 3*time.Second)
	if l.ID != "l" || time.Since(start) < 250*time.Millisecond {
		t.Fatalf("delayed task after %s", time.Since(start))
	}
	if ts, err := b.Reserve(ctx, "empty", 1, 100*time.Millisecond); err != nil || len(ts) != 0 {
		t.Fatalf("reserve on an empty queue: %v, %v", ts, err)
	}
	_, err = b.Reserve(ctx, "q", 0, 0)
	wantErr(t, "reserve max 0", err, task.ErrInvalid)

	// A batch with a bad item.
	res := b.PutBatch(ctx, "batch", []task.PutRequest{{ID: "a"}, {ID: "bad id"}, {ID: "c", Delay: time.Hour}, {ID: "a"}})
	if res[0].Err != nil || !res[0].Created || res[1].Err == nil || res[2].Err != nil || res[2].Task.State != task.Delayed ||
		res[3].Err != nil || res[3].Created || res[3].Task.JobID != res[0].Task.JobID {
		t.Fatalf("batch results: %+v", res)
	}
	var bs task.QueueStats
	for _, s := range b.Queues() {
		if s.Name == "batch" {
			bs = s
		}
	}
	if bs.Ready != 1 || bs.Delayed != 1 {
		t.Fatalf("queue stats of batch: %+v", bs)
	}

	// Schedules.
	_, _, err = b.SetSchedule(ctx, task.ScheduleSpec{Name: "s", Cron: "not cron", Queue: "cron"})
	wantErr(t, "bad cron", err, task.ErrInvalid)
	info, created, err := b.SetSchedule(ctx, task.ScheduleSpec{Name: "s", Cron: "@every 1s", Queue: "cron", Payload: []byte(`"tick"`)})
	must(t, "set schedule", err)
	if !created || info.Next.IsZero() {
		t.Fatalf("set schedule: %+v, created %v", info, created)
	}
	occ := reserveOne(t, b, "cron", 4*time.Second)
	if !strings.HasPrefix(occ.ID, "s@") || string(occ.Payload) != `"tick"` {
		t.Fatalf("occurrence %+v", occ)
	}
	if scheds := b.Schedules(); len(scheds) != 1 || scheds[0].Name != "s" {
		t.Fatalf("schedules: %+v", scheds)
	}
	must(t, "delete schedule", b.DeleteSchedule(ctx, "s"))
	wantErr(t, "delete schedule again", b.DeleteSchedule(ctx, "s"), task.ErrNoSchedule)
}
