package broker_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hourglass-go/hourglass/store/memstore"
	"github.com/hourglass-go/hourglass/task"
)

func TestBroker_ReserveAnyAcrossQueues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := open(t, memstore.New())
		put(t, b, "a", task.PutRequest{ID: "a5", Priority: 5})
		put(t, b, "b", task.PutRequest{ID: "b1", Priority: 1})
		put(t, b, "c", task.PutRequest{ID: "c0", Priority: 0})
		got, ok, err := svc(b).ReserveAny(ctx, []string{"a", "b"}, 0)
		if err != nil || !ok || got.ID != "b1" {
			t.Fatalf("first: %+v %v %v", got, ok, err)
		}
		got, _, _ = svc(b).ReserveAny(ctx, []string{"a", "b"}, 0)
		if got.ID != "a5" {
			t.Fatalf("second: %+v", got)
		}
		// A waiter on two queues is woken by either, and only once.
		done := make(chan task.Task)
		go func() {
			t, _, _ := svc(b).ReserveAny(ctx, []string{"x", "y"}, time.Minute)
			done <- t
		}()
		synctest.Wait()
		put(t, b, "y", task.PutRequest{ID: "y1", Delay: time.Second})
		put(t, b, "x", task.PutRequest{ID: "x1", Delay: time.Second})
		if got := <-done; got.ID != "x1" && got.ID != "y1" {
			t.Fatalf("waiter got %+v", got)
		}
		// The waiter may have been handed the first task to fall due while
		// the second was still being made ready: let that finish.
		synctest.Wait()
		left, ok, _ := svc(b).ReserveAny(ctx, []string{"x", "y"}, 0)
		if !ok {
			t.Fatal("the other task was lost")
		}
		_ = left
	})
}

func TestBroker_BuryKickPeek(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := open(t, memstore.New())
		j1 := put(t, b, "q", task.PutRequest{ID: "1"})
		j2 := put(t, b, "q", task.PutRequest{ID: "2"})
		j3 := put(t, b, "q", task.PutRequest{ID: "3", Delay: time.Hour})
		r1, _ := reserve1(t, b, "q")
		r2, _ := reserve1(t, b, "q")
		if err := svc(b).BuryJob(ctx, r2.JobID, r2.Lease, 7); err != nil {
			t.Fatal(err)
		}
		if err := svc(b).BuryJob(ctx, r1.JobID, r1.Lease, 9); err != nil {
			t.Fatal(err)
		}
		if err := svc(b).BuryJob(ctx, r1.JobID, r1.Lease, 9); !errors.Is(err, task.ErrNotFound) {
			t.Fatalf("bury twice: %v", err)
		}
		if p, err := svc(b).Peek("q", task.Dead); err != nil || p.JobID != j2.JobID || p.Priority != 7 {
			t.Fatalf("peek-buried: %+v %v", p, err)
		}
		if p, err := svc(b).Peek("q", task.Delayed); err != nil || p.JobID != j3.JobID {
			t.Fatalf("peek-delayed: %+v %v", p, err)
		}
		if _, err := svc(b).Peek("q", task.Ready); !errors.Is(err, task.ErrNotFound) {
			t.Fatalf("peek-ready: %v", err)
		}
		// kick takes buried ones first, oldest burial first.
		if n, err := svc(b).KickQueue(ctx, "q", 1); err != nil || n != 1 {
			t.Fatalf("kick 1: %d %v", n, err)
		}
		if p, _ := svc(b).Peek("q", task.Ready); p.JobID != j2.JobID {
			t.Fatalf("kicked %+v, want job %d", p, j2.JobID)
		}
		if n, _ := svc(b).KickQueue(ctx, "q", 10); n != 1 {
			t.Fatalf("second kick: %d", n)
		}
		if n, _ := svc(b).KickQueue(ctx, "q", 10); n != 1 {
			t.Fatalf("kick of delayed: %d", n)
		}
		if err := svc(b).KickJob(ctx, j1.JobID); !errors.Is(err, task.ErrNotFound) {
			t.Fatalf("kick-job of a ready job: %v", err)
		}
		if d, _ := b.Queue("q"); d.Ready != 3 || d.Dead != 0 || d.Delayed != 0 || d.Urgent != 3 {
			t.Fatalf("detail %+v", d)
		}
	})
}

func TestBroker_ReleaseReserveJobDelete(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := open(t, memstore.New())
		j := put(t, b, "q", task.PutRequest{ID: "1", Delay: time.Hour})
		r, err := b.ReserveJob(ctx, j.JobID)
		if err != nil || r.Lease == "" {
			t.Fatalf("reserve-job of a delayed job: %+v %v", r, err)
		}
		if err := svc(b).DeleteJob(ctx, j.JobID, "wrong"); !errors.Is(err, task.ErrNotFound) {
			t.Fatalf("delete with another lease: %v", err)
		}
		if err := svc(b).ReleaseJob(ctx, j.JobID, r.Lease, 3, 2*time.Second); err != nil {
			t.Fatal(err)
		}
		if got, _ := svc(b).Job(j.JobID); got.State != task.Delayed || got.Priority != 3 {
			t.Fatalf("after release: %+v", got)
		}
		time.Sleep(2*time.Second + 2*time.Millisecond)
		if got, _ := svc(b).Job(j.JobID); got.State != task.Ready {
			t.Fatalf("after the release delay: %+v", got)
		}
		if err := svc(b).DeleteJob(ctx, j.JobID, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := svc(b).Job(j.JobID); !errors.Is(err, task.ErrNotFound) {
			t.Fatalf("after delete: %v", err)
		}
	})
}

func TestBroker_PauseQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := open(t, memstore.New())
		put(t, b, "q", task.PutRequest{ID: "1"})
		if err := svc(b).PauseQueue(context.Background(), "q", 3*time.Second); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		ts, err := svc(b).Reserve(ctx, "q", 1, time.Minute)
		if err != nil || len(ts) != 1 {
			t.Fatalf("reserve on a paused queue: %v %v", ts, err)
		}
		if w := time.Since(start); w < 3*time.Second || w > 3*time.Second+2*time.Millisecond {
			t.Fatalf("paused queue handed out after %v, want 3s", w)
		}
	})
}

func TestBroker_KickDeadDeleteDead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := open(t, memstore.New())
		for i := range 4 {
			put(t, b, "q", task.PutRequest{MaxAttempts: 1, TTR: time.Second, Priority: uint32(i)})
		}
		ts, _ := svc(b).Reserve(ctx, "q", 4, 0)
		if len(ts) != 4 {
			t.Fatal(ts)
		}
		time.Sleep(1100 * time.Millisecond)
		if d, _ := b.Queue("q"); d.Dead != 4 {
			t.Fatalf("dead: %+v", d)
		}
		if n, err := svc(b).KickDead(ctx, "q"); n != 4 || err != nil {
			t.Fatalf("kick dead: %d %v", n, err)
		}
		svc(b).Reserve(ctx, "q", 4, 0)
		time.Sleep(1100 * time.Millisecond)
		if n, err := svc(b).DeleteDead(ctx, "q"); n != 4 || err != nil {
			t.Fatalf("delete dead: %d %v", n, err)
		}
		if d, _ := b.Queue("q"); d.Dead+d.Ready+d.Delayed+d.Reserved != 0 {
			t.Fatalf("left: %+v", d)
		}
	})
}
