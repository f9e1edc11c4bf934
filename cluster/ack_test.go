package cluster_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/task"
)

// TestAck_Concurrent: acks that arrive together share a statement, and
// each still gets the answer it would get alone: nil for the holder of
// the lease, task.ErrLease for a wrong lease, task.ErrNotFound for a
// task already acked (by the same batch or before) or never put.
func TestAck_Concurrent(t *testing.T) {
	ctx := context.Background()
	n := startNode(t, server(t).CreateDatabase(t), "a")
	const k = 60
	reqs := make([]task.PutRequest, k)
	for _, r := range n.PutBatch(ctx, "q", reqs) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	tasks, err := svc(n).Reserve(ctx, "q", k, time.Second)
	if err != nil || len(tasks) != k {
		t.Fatalf("Reserve: %d tasks, %v", len(tasks), err)
	}
	type ack struct {
		id, lease string
		want      []error // any one of them
	}
	var acks []ack
	for i, tk := range tasks {
		switch i % 4 {
		case 0: // the holder
			acks = append(acks, ack{tk.ID, tk.Lease, []error{nil}})
		case 1: // a wrong lease beside the holder: before or after it
			acks = append(acks, ack{tk.ID, "stale", []error{task.ErrLease, task.ErrNotFound}})
			acks = append(acks, ack{tk.ID, tk.Lease, []error{nil}})
		case 2: // the holder twice: one wins, the other finds nothing
			acks = append(acks, ack{tk.ID, tk.Lease, []error{nil, task.ErrNotFound}})
			acks = append(acks, ack{tk.ID, tk.Lease, []error{nil, task.ErrNotFound}})
		case 3: // a wrong lease alone: the task stays reserved
			acks = append(acks, ack{tk.ID, "stale", []error{task.ErrLease}})
		}
	}
	acks = append(acks, ack{"never-put", "x", []error{task.ErrNotFound}})
	errs := make([]error, len(acks))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, a := range acks {
		wg.Go(func() {
			<-start
			errs[i] = svc(n).Ack(ctx, "q", a.id, a.lease)
		})
	}
	close(start)
	wg.Wait()
	won := map[string]int{}
	for i, a := range acks {
		ok := false
		for _, w := range a.want {
			ok = ok || errors.Is(errs[i], w) || (w == nil && errs[i] == nil)
		}
		if !ok {
			t.Errorf("Ack(%s, %s) = %v, want one of %v", a.id, a.lease, errs[i], a.want)
		}
		if errs[i] == nil {
			won[a.id]++
		}
	}
	for i, tk := range tasks {
		want, wantErr := 1, task.ErrNotFound
		if i%4 == 3 {
			want, wantErr = 0, nil
		}
		if won[tk.ID] != want {
			t.Errorf("task %s acked %d times, want %d", tk.ID, won[tk.ID], want)
		}
		if got, err := svc(n).Get("q", tk.ID); err != wantErr && !errors.Is(err, wantErr) {
			t.Errorf("task %s after the acks: %v, want %v", tk.ID, err, wantErr)
		} else if err == nil && got.State != task.Reserved {
			t.Errorf("task %s after a stale ack: %s, want reserved", tk.ID, got.State)
		}
	}
}
