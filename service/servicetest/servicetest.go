// Package servicetest is the conformance suite of [service.Service]: one
// set of tests that every engine must pass with the same answers and
// errors, so that the transports serve either unchanged. Run calls it
// with a constructor, and RunPolicies its part on queue policies
// (policy.go); the tests of this package run them over service.New of
// the embedded engine (package broker on memstore and on Pebble) and of a
// node of a cluster on PostgreSQL (package cluster), in river's manner of
// one driver test suite for every driver. Beyond what the suite asserts,
// TestDifferential runs one random sequence of operations on both
// engines and compares every answer, a model of each in the other.
package servicetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// Run runs the suite over the services open returns: one for each
// subtest, fresh (no queue, task or schedule). open is called from the
// subtest and cleans up through t.Cleanup.
func Run(t *testing.T, open func(t *testing.T) service.Service) {
	t.Run("tasks", func(t *testing.T) { tasks(t, open(t)) })
	t.Run("jobs", func(t *testing.T) { jobs(t, open(t)) })
	t.Run("observe", func(t *testing.T) { observe(t, open(t)) })
	t.Run("push-attempts", func(t *testing.T) { pushAttempts(t, open(t)) })
	t.Run("ack-many", func(t *testing.T) { ackMany(t, open(t)) })
	t.Run("attempts-bound", func(t *testing.T) { attemptsBound(t, open(t)) })
	t.Run("attempt-numbers", func(t *testing.T) { attemptNumbers(t, open(t)) })
	t.Run("webhook-identity", func(t *testing.T) { webhookIdentity(t, open(t)) })
	t.Run("bulk-find", func(t *testing.T) { bulkFind(t, open(t)) })
	t.Run("bulk-actions", func(t *testing.T) { bulkActions(t, open(t)) })
	t.Run("bulk-large", func(t *testing.T) { bulkLarge(t, open(t)) })
	t.Run("bulk-scan", func(t *testing.T) { bulkScan(t, open(t)) })
	t.Run("bulk-due-order", func(t *testing.T) { bulkDueOrder(t, open(t)) })
	t.Run("trace", func(t *testing.T) { trace(t, open(t)) })
	t.Run("expiry-wait", func(t *testing.T) { expiryWait(t, open(t)) })
	t.Run("cancel", func(t *testing.T) { cancelled(t, open(t)) })
	t.Run("keys", func(t *testing.T) { keys(t, open(t)) })
	t.Run("key-list", func(t *testing.T) { keyList(t, open(t)) })
	t.Run("fairness", func(t *testing.T) { fairness(t, open(t)) })
	t.Run("key-rounds", func(t *testing.T) { keyRounds(t, open(t)) })
	t.Run("key-order", func(t *testing.T) { keyOrder(t, open(t)) })
	t.Run("per-key-concurrency", func(t *testing.T) { perKeyConcurrency(t, open(t)) })
	t.Run("per-key-rate", func(t *testing.T) { perKeyRate(t, open(t)) })
	t.Run("per-key-priority", func(t *testing.T) { perKeyPriority(t, open(t)) })
	t.Run("peek-keys", func(t *testing.T) { peekKeys(t, open(t)) })
	t.Run("fairness-limited", func(t *testing.T) { fairnessLimited(t, open(t)) })
	t.Run("urgent-bound", func(t *testing.T) { urgentBound(t, open(t)) })
}

// must fails t on err.
func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// wantErr checks that err is target, and that its text carries the
// prefix "hourglass: " once.
func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: error %v, want %v", what, err, target)
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "hourglass: ") || strings.Count(msg, "hourglass:") != 1 {
		t.Fatalf("%s: error %q: want one prefix \"hourglass: \"", what, msg)
	}
}

// ReserveOne reserves one task of queue on b, waiting up to wait, and
// fails t unless exactly one came, not before its due time.
func ReserveOne(t *testing.T, b service.Service, queue string, wait time.Duration) task.Task {
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

// tasks runs the operations on tasks by queue and id (what package
// httpapi serves) over b.
func tasks(t *testing.T, b service.Service) {
	ctx := context.Background()
	must(t, "Ready of a service that serves", b.Ready())

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
	must(t, "nack now", nack(b, ctx, "prio", ts[1].ID, ts[1].Lease, 0))
	wantErr(t, "nack again", nack(b, ctx, "prio", ts[1].ID, ts[1].Lease, 0), task.ErrLease)
	r := ReserveOne(t, b, "prio", time.Second)
	if r.ID != ts[1].ID || r.Attempts != 2 || r.Releases != 1 {
		t.Fatalf("after nack: %+v", r)
	}
	start := time.Now()
	must(t, "nack delayed", nack(b, ctx, "prio", r.ID, r.Lease, 300*time.Millisecond))
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
	first := ReserveOne(t, b, "ttr", time.Second)
	second := ReserveOne(t, b, "ttr", 2*time.Second)
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
	k := ReserveOne(t, b, "ttr", time.Second)
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
	l := ReserveOne(t, b, "later", 3*time.Second)
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
	qs, _ := b.Queues(context.Background())
	for _, s := range qs {
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
	occ := ReserveOne(t, b, "cron", 4*time.Second)
	if !strings.HasPrefix(occ.ID, "s@") || string(occ.Payload) != `"tick"` {
		t.Fatalf("occurrence %+v", occ)
	}
	if scheds, _ := b.Schedules(context.Background()); len(scheds) != 1 || scheds[0].Name != "s" {
		t.Fatalf("schedules: %+v", scheds)
	}
	must(t, "delete schedule", b.DeleteSchedule(ctx, "s"))
	wantErr(t, "delete schedule again", b.DeleteSchedule(ctx, "s"), task.ErrNoSchedule)
}

// jobs runs the operations on tasks by job id (what package beanstalk
// serves) over b.
func jobs(t *testing.T, b service.Service) {
	ctx := context.Background()
	put := func(queue string, r task.PutRequest) task.Task {
		t.Helper()
		tk, _, err := b.Put(ctx, queue, r)
		must(t, "put", err)
		return tk
	}
	x := put("j", task.PutRequest{Payload: []byte("x"), Priority: 5})
	got, err := b.Job(x.JobID)
	must(t, "job", err)
	if got.ID != x.ID || string(got.Payload) != "x" || got.State != task.Ready {
		t.Fatalf("Job = %+v", got)
	}
	_, err = b.Job(1 << 62)
	wantErr(t, "job unknown", err, task.ErrNotFound)
	_, err = b.Job(1<<64 - 1)
	wantErr(t, "job over int64", err, task.ErrNotFound)

	// ReserveAny: the first in delivery order across queues.
	y := put("k", task.PutRequest{Payload: []byte("y"), Priority: 1})
	r, ok, err := b.ReserveAny(ctx, []string{"j", "k"}, 0)
	must(t, "reserve any", err)
	if !ok || r.JobID != y.JobID || r.Lease == "" || r.State != task.Reserved {
		t.Fatalf("ReserveAny = %+v, %v; want job %d", r, ok, y.JobID)
	}
	_, _, err = b.ReserveAny(ctx, nil, 0)
	wantErr(t, "reserve any of none", err, task.ErrInvalid)
	_, ok, err = b.ReserveAny(ctx, []string{"k"}, 50*time.Millisecond)
	if err != nil || ok {
		t.Fatalf("ReserveAny of an empty queue: %v, %v", ok, err)
	}

	// Leases: a wrong one is not found; touch, release with a delay.
	wantErr(t, "delete under another lease", b.DeleteJob(ctx, y.JobID, "nope"), task.ErrNotFound)
	wantErr(t, "delete without the lease", b.DeleteJob(ctx, y.JobID, ""), task.ErrNotFound)
	_, err = b.TouchJob(ctx, y.JobID, "nope")
	wantErr(t, "touch under another lease", err, task.ErrNotFound)
	touched, err := b.TouchJob(ctx, y.JobID, r.Lease)
	must(t, "touch", err)
	if touched.Lease != r.Lease || touched.LeaseUntil.Before(r.LeaseUntil) {
		t.Fatalf("TouchJob = %+v", touched)
	}
	wantErr(t, "release with a delay over the limit", b.ReleaseJob(ctx, y.JobID, r.Lease, 1, task.DefaultMaxDelay+time.Second), task.ErrInvalid)
	must(t, "release", b.ReleaseJob(ctx, y.JobID, r.Lease, 9, time.Hour))
	wantErr(t, "release again", b.ReleaseJob(ctx, y.JobID, r.Lease, 9, 0), task.ErrNotFound)
	got, err = b.Job(y.JobID)
	must(t, "job after release", err)
	if got.State != task.Delayed || got.Priority != 9 || got.Releases != 1 {
		t.Fatalf("released job = %+v", got)
	}
	d, err := b.Peek("k", task.Delayed)
	must(t, "peek delayed", err)
	if d.JobID != y.JobID {
		t.Fatalf("peek delayed = %+v", d)
	}
	_, err = b.Peek("k", task.Ready)
	wantErr(t, "peek ready of none", err, task.ErrNotFound)
	_, err = b.Peek("k", task.Reserved)
	wantErr(t, "peek reserved", err, task.ErrInvalid)

	// Bury two, kick: dead ones first, oldest death first; then delayed.
	z := put("k", task.PutRequest{Payload: []byte("z")})
	w := put("k", task.PutRequest{Payload: []byte("w")})
	rz, err := b.ReserveJob(ctx, z.JobID)
	must(t, "reserve z", err)
	rw, err := b.ReserveJob(ctx, w.JobID)
	must(t, "reserve w", err)
	_, err = b.ReserveJob(ctx, w.JobID)
	wantErr(t, "reserve a reserved job", err, task.ErrNotFound)
	must(t, "bury w", b.BuryJob(ctx, w.JobID, rw.Lease, 2))
	must(t, "bury z", b.BuryJob(ctx, z.JobID, rz.Lease, 3))
	wantErr(t, "bury again", b.BuryJob(ctx, z.JobID, rz.Lease, 3), task.ErrNotFound)
	dead, err := b.Peek("k", task.Dead)
	must(t, "peek dead", err)
	if dead.JobID != w.JobID || dead.Buries != 1 || dead.Priority != 2 {
		t.Fatalf("peek dead = %+v; want w, buried first", dead)
	}
	qd, err := b.Queue("k")
	must(t, "queue", err)
	if qd.Dead != 2 || qd.Delayed != 1 || qd.Ready != 0 || qd.Reserved != 0 {
		t.Fatalf("Queue(k) = %+v", qd)
	}
	n, err := b.KickQueue(ctx, "k", 1)
	if err != nil || n != 1 {
		t.Fatalf("kick 1 = %d, %v", n, err)
	}
	if got, _ := b.Job(w.JobID); got.State != task.Ready || got.Kicks != 1 {
		t.Fatalf("w after the kick = %+v", got)
	}
	n, err = b.KickQueue(ctx, "k", 10)
	if err != nil || n != 1 {
		t.Fatalf("kick 10 = %d, %v; want z alone (dead before delayed)", n, err)
	}
	n, err = b.KickQueue(ctx, "k", 10)
	if err != nil || n != 1 {
		t.Fatalf("kick 10 again = %d, %v; want the delayed y", n, err)
	}
	n, err = b.KickQueue(ctx, "k", 10)
	if err != nil || n != 0 {
		t.Fatalf("kick with nothing to kick = %d, %v", n, err)
	}
	wantErr(t, "kick-job of a ready job", b.KickJob(ctx, y.JobID), task.ErrNotFound)
	must(t, "delete a ready job without a lease", b.DeleteJob(ctx, y.JobID, ""))
	wantErr(t, "delete again", b.DeleteJob(ctx, y.JobID, ""), task.ErrNotFound)

	// Pause: no reserve hands out the queue's tasks until it ends.
	paused := time.Now()
	must(t, "pause", b.PauseQueue(ctx, "k", time.Second))
	wantErr(t, "pause over the limit", b.PauseQueue(ctx, "k", task.DefaultMaxDelay+time.Second), task.ErrInvalid)
	if _, ok, err := b.ReserveAny(ctx, []string{"k"}, 0); ok || err != nil {
		t.Fatalf("reserve of a paused queue: %v, %v", ok, err)
	}
	qd, err = b.Queue("k")
	must(t, "queue while paused", err)
	if qd.PauseLeft <= 0 || qd.Pauses != 1 || qd.Ready != 2 || qd.Urgent != 2 {
		t.Fatalf("Queue(k) while paused = %+v", qd)
	}
	got, ok, err = b.ReserveAny(ctx, []string{"k"}, 5*time.Second)
	if err != nil || !ok {
		t.Fatalf("reserve after the pause: %v, %v", ok, err)
	}
	if since := time.Since(paused); since < time.Second {
		t.Fatalf("reserved %v into a pause of 1s", since)
	}
	must(t, "delete", b.DeleteJob(ctx, got.JobID, got.Lease))
	must(t, "pause 0", b.PauseQueue(ctx, "k", 0))
}

// observe runs what the dashboard calls over b: pages of tasks, the due
// histogram, the dead tasks' kick and delete, one schedule, a cron line's
// check, delivery lateness and the queues' counters.
func observe(t *testing.T, b service.Service) {
	ctx := context.Background()
	for _, id := range []string{"a", "b", "c"} {
		_, _, err := b.Put(ctx, "obs", task.PutRequest{ID: id, Payload: []byte(`"p"`), Priority: 10})
		must(t, "put "+id, err)
	}
	for _, d := range []time.Duration{30 * time.Minute, 90 * time.Minute} {
		_, _, err := b.Put(ctx, "obs", task.PutRequest{Delay: d})
		must(t, "put delayed", err)
	}
	_, _, err := b.Put(ctx, "obs", task.PutRequest{ID: "d", MaxAttempts: 1, Priority: 0})
	must(t, "put d", err)
	d := ReserveOne(t, b, "obs", time.Second)
	if d.ID != "d" {
		t.Fatalf("reserved %s, want d (priority 0)", d.ID)
	}
	must(t, "nack d", nack(b, ctx, "obs", "d", d.Lease, 0))
	if g, err := b.Get("obs", "d"); err != nil || g.State != task.Dead {
		t.Fatalf("d after its one attempt: %+v, %v", g, err)
	}

	// Pages in due order, without payloads.
	var all []task.Task
	var after service.Cursor
	for pages := 0; ; pages++ {
		page, next, err := b.FindTasks(ctx, "obs", service.Filter{}, after, 2)
		must(t, "list", err)
		if len(page) > 2 || pages > 5 {
			t.Fatalf("page of %d (limit 2), page %d", len(page), pages)
		}
		all = append(all, page...)
		if next.IsZero() {
			break
		}
		after = next
	}
	if len(all) != 6 {
		t.Fatalf("listed %d tasks, want 6: %+v", len(all), all)
	}
	for i, tk := range all {
		if tk.Payload != nil || (i > 0 && (tk.Due.Before(all[i-1].Due) || tk.Due.Equal(all[i-1].Due) && tk.JobID <= all[i-1].JobID)) {
			t.Fatalf("listing: %+v", all)
		}
	}
	for st, want := range map[task.State]int{task.Ready: 3, task.Delayed: 2, task.Dead: 1, task.Reserved: 0} {
		page, next, err := b.FindTasks(ctx, "obs", service.Filter{State: st}, service.Cursor{}, 10)
		must(t, "list "+st.String(), err)
		if len(page) != want || !next.IsZero() {
			t.Fatalf("list %s: %d tasks, next %d; want %d", st, len(page), next, want)
		}
		for _, tk := range page {
			if tk.State != st {
				t.Fatalf("list %s: %+v", st, tk)
			}
		}
	}
	_, _, err = b.FindTasks(ctx, "obs", service.Filter{}, service.Cursor{}, 0)
	wantErr(t, "list limit 0", err, task.ErrInvalid)
	_, _, err = b.FindTasks(ctx, "bad queue", service.Filter{}, service.Cursor{}, 10)
	wantErr(t, "list bad queue", err, task.ErrInvalid)

	// When the delayed ones fall due: one in each of the first two hours.
	start, counts, err := b.DueHistogram(ctx, "obs", time.Hour, 3)
	must(t, "due histogram", err)
	if len(counts) != 3 || counts[0] != 1 || counts[1] != 1 || counts[2] != 0 || time.Since(start).Abs() > time.Minute {
		t.Fatalf("due histogram from %v: %v; want [1 1 0]", start, counts)
	}
	if _, counts, err := b.DueHistogram(ctx, "", time.Hour, 3); err != nil || counts[0]+counts[1] < 2 {
		t.Fatalf("due histogram of every queue: %v, %v", counts, err)
	}
	_, _, err = b.DueHistogram(ctx, "obs", 0, 3)
	wantErr(t, "due histogram of width 0", err, task.ErrInvalid)

	// Dead tasks: kicked all at once, then deleted all at once.
	n, err := b.KickDead(ctx, "obs")
	if err != nil || n != 1 {
		t.Fatalf("kick dead: %d, %v; want 1", n, err)
	}
	if g, err := b.Get("obs", "d"); err != nil || g.State != task.Ready {
		t.Fatalf("d after the kick: %+v, %v", g, err)
	}
	d = ReserveOne(t, b, "obs", time.Second)
	must(t, "nack d again", nack(b, ctx, "obs", d.ID, d.Lease, 0))
	if n, err = b.DeleteDead(ctx, "obs"); err != nil || n != 1 {
		t.Fatalf("delete dead: %d, %v; want 1", n, err)
	}
	_, err = b.Get("obs", "d")
	wantErr(t, "get a deleted dead task", err, task.ErrNotFound)
	if n, err = b.KickDead(ctx, "obs"); err != nil || n != 0 {
		t.Fatalf("kick dead with none: %d, %v", n, err)
	}

	// One schedule by name; a cron line checked.
	_, _, err = b.SetSchedule(ctx, task.ScheduleSpec{Name: "nightly", Cron: "0 3 * * *", Queue: "obs", Timezone: "Europe/Paris"})
	must(t, "set schedule", err)
	info, err := b.Schedule(ctx, "nightly")
	must(t, "schedule", err)
	if info.Name != "nightly" || info.Cron != "0 3 * * *" || info.Queue != "obs" || info.Timezone != "Europe/Paris" || info.Next.IsZero() {
		t.Fatalf("schedule nightly: %+v", info)
	}
	_, err = b.Schedule(ctx, "nothing")
	wantErr(t, "unknown schedule", err, task.ErrNoSchedule)
	times, err := b.CheckCron("*/5 * * * *", "", 3)
	must(t, "check cron", err)
	if len(times) != 3 || !times[0].After(time.Now()) || times[1].Sub(times[0]) != 5*time.Minute {
		t.Fatalf("check cron: %v", times)
	}
	_, err = b.CheckCron("not a line", "", 3)
	wantErr(t, "check a bad cron line", err, task.ErrInvalid)
	_, err = b.CheckCron("* * * * *", "Mars/Olympus", 3)
	wantErr(t, "check a bad time zone", err, task.ErrInvalid)

	// What was handed out is counted, and its lateness reported.
	r, err := b.Reserve(ctx, "obs", 3, 0)
	must(t, "reserve", err)
	if len(r) != 3 {
		t.Fatalf("reserved %d, want 3", len(r))
	}
	must(t, "ack", b.Ack(ctx, "obs", r[0].ID, r[0].Lease))
	qs, err := b.Queues(ctx)
	must(t, "queues", err)
	var q task.QueueStats
	for _, s := range qs {
		if s.Name == "obs" {
			q = s
		}
	}
	if q.Ready != 0 || q.Reserved != 2 || q.Delayed != 2 || q.Dead != 0 || q.Puts != 6 || q.Deliveries != 5 || q.Acks != 1 {
		t.Fatalf("queue obs: %+v; want 2 delayed, 2 reserved, 6 puts, 5 deliveries, 1 ack", q)
	}
	ws, err := b.Lateness(ctx)
	must(t, "lateness", err)
	delivered := 0
	for _, w := range ws {
		delivered += w.Deliveries
		if w.P50 > w.P99 || w.P99 > w.Max {
			t.Fatalf("lateness window %+v", w)
		}
	}
	if delivered < 5 {
		t.Fatalf("lateness counts %d deliveries, want 5 or more: %+v", delivered, ws)
	}
}

// nack nacks a task with no reason, for the tests that want only its
// error.
func nack(b service.Service, ctx context.Context, queue, id, lease string, delay time.Duration) error {
	_, err := b.Nack(ctx, queue, id, lease, delay, "")
	return err
}

// waitingReserve starts a reserve on s of up to max tasks of queue that
// waits up to wait, and fails t with msg (given the count) if it answers
// within hold, when it should still be waiting; the channel gives its
// answer.
func waitingReserve(t *testing.T, s service.Service, queue string, max int, wait, hold time.Duration, msg string) <-chan []task.Task {
	t.Helper()
	got := make(chan []task.Task, 1)
	go func() {
		ts, _ := s.Reserve(context.Background(), queue, max, wait)
		got <- ts
	}()
	time.Sleep(hold)
	select {
	case ts := <-got:
		t.Fatalf(msg, len(ts))
	default:
	}
	return got
}
