package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/beanstalk"
	"github.com/hourglass-go/hourglass/cluster"
	"github.com/hourglass-go/hourglass/task"
)

var _ beanstalk.Broker = (*cluster.Node)(nil)

// jobBroker is what jobsScenario calls: the job-id operations, and Put.
type jobBroker interface {
	beanstalk.Broker
	Put(ctx context.Context, queue string, r task.PutRequest) (task.Task, bool, error)
}

// jobsScenario runs the job-id operations (what package beanstalk
// serves) over b, a broker or a cluster node (TestSemantics): the same
// calls must give the same answers and errors.
func jobsScenario(t *testing.T, b jobBroker) {
	ctx := context.Background()
	put := func(queue string, r task.PutRequest) task.Task {
		t.Helper()
		task, _, err := b.Put(ctx, queue, r)
		must(t, "put", err)
		return task
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
	must(t, "pause", b.PauseQueue("k", time.Second))
	wantErr(t, "pause over the limit", b.PauseQueue("k", task.DefaultMaxDelay+time.Second), task.ErrInvalid)
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
	must(t, "pause 0", b.PauseQueue("k", 0))
}
