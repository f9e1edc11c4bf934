package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/api"
)

// TestKill_DueTimes kills the server with SIGKILL right after the puts
// were answered, keeps it down for a second, and checks the due times of
// the crash promise in a setting without load: the tasks that
// fell due while it was down are ready at once after the restart (one
// reserve without waiting takes them all), so are the tasks whose leases
// ran out while it was down (with the attempt counted), a lease that has
// not run out still holds, and the other tasks keep their due times to
// the nanosecond and are handed out at them, not before.
func TestKill_DueTimes(t *testing.T) { engines(t, testKill_DueTimes) }

func testKill_DueTimes(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.client()
	ctx := context.Background()
	put := func(id string, r api.PutRequest) api.Task {
		t.Helper()
		r.ID = id
		task, _, err := c.Put(ctx, "q", r)
		if err != nil {
			t.Fatalf("put %s: %v", id, err)
		}
		return task
	}
	// Leases: one running out while the server is down, one not.
	put("lease-short", api.PutRequest{TTR: new(api.Duration(300 * time.Millisecond)), Priority: new(uint32(0))})
	put("lease-long", api.PutRequest{TTR: new(api.Duration(time.Hour)), Priority: new(uint32(0))})
	leased, err := c.Reserve(ctx, "q", 2, 0)
	if err != nil || len(leased) != 2 {
		t.Fatalf("Reserve: %+v, %v", leased, err)
	}
	lease := map[string]string{leased[0].ID: leased[0].Lease, leased[1].ID: leased[1].Lease}

	const n = 50
	for i := range n {
		put(fmt.Sprint("soon-", i), api.PutRequest{Delay: new(api.Duration(time.Duration(100+5*i) * time.Millisecond))})
	}
	after := put("after-restart", api.PutRequest{Delay: new(api.Duration(3 * time.Second))})
	far := put("far", api.PutRequest{At: new(time.Now().Add(72*time.Hour + 123456789))})

	s.kill()
	time.Sleep(time.Second)
	s.start()

	tasks, err := c.Reserve(ctx, "q", 1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	answered := time.Now()
	got := map[string]api.Task{}
	for _, task := range tasks {
		got[task.ID] = task
	}
	// On a loaded machine the kill, the restart and the reserve may take
	// longer than after-restart's 3 s: then it is due, and rightly taken.
	late := false
	if tk, ok := got["after-restart"]; ok && !answered.Before(after.Due) && !answered.Before(tk.Due) {
		t.Logf("the restart and the first reserve ended %v after after-restart fell due: taken with the rest", answered.Sub(after.Due))
		late = true
		delete(got, "after-restart")
		tasks = slices.DeleteFunc(tasks, func(tk api.Task) bool { return tk.ID == "after-restart" })
	}
	if len(tasks) != n+1 {
		t.Errorf("one reserve right after the restart took %d tasks, want the %d due while the server was down and the expired lease", len(tasks), n+1)
	}
	for i := range n {
		if _, ok := got[fmt.Sprint("soon-", i)]; !ok {
			t.Errorf("soon-%d, due while the server was down, not ready at once", i)
		}
	}
	if task, ok := got["lease-short"]; !ok || task.Attempts != 2 {
		t.Errorf("task whose lease ran out while the server was down: %+v (taken %v); want ready at once, attempt 2", task, ok)
	}
	if _, ok := got["lease-long"]; ok {
		t.Errorf("task with a running lease handed out again after the restart")
	}
	for _, task := range tasks {
		// lease-short's new lease is 300 ms again: under load it may run
		// out before this ack, and the task come back below.
		if err := c.Ack(ctx, "q", task.ID, task.Lease); err != nil && task.ID != "lease-short" {
			t.Errorf("Ack of %s: %v", task.ID, err)
		}
	}
	if err := c.Ack(ctx, "q", "lease-long", lease["lease-long"]); err != nil {
		t.Errorf("Ack with the lease from before the kill: %v", err)
	}
	if task, err := c.Get(ctx, "q", "far"); err != nil || !sameTask(task, far) {
		t.Errorf("far task after the kill: %+v, %v\nwant %+v", task, err, far)
	}
	if late {
		return
	}
	task, err := c.Get(ctx, "q", "after-restart")
	if err == nil && task.State == api.StateReady && !time.Now().Before(after.Due) {
		after.State = api.StateReady // the restart took 3 s: a loaded machine
	}
	if err != nil || !sameTask(task, after) {
		t.Errorf("task due after the restart: %+v, %v\nwant %+v", task, err, after)
	}
	for range 20 { // lease-short may come back every 300 ms meanwhile
		r := reserveOnce(c, "q", 5*time.Second)
		if r.err != nil || len(r.tasks) == 0 {
			t.Fatalf("Reserve of the task due after the restart: %+v, %v", r.tasks, r.err)
		}
		for _, task := range r.tasks {
			if task.ID != "after-restart" {
				if task.ID != "lease-short" {
					t.Errorf("%s handed out again", task.ID)
				}
				continue
			}
			if r.at.Before(after.Due) || r.at.Sub(after.Due) > lateAllowed(t, promptly, after.Due, r.at) {
				t.Errorf("task due %v handed out at %v", after.Due, r.at)
			}
			return
		}
	}
	t.Errorf("the task due after the restart was not handed out")
}

// TestReadyz_Recovering restarts a server over 3,000 tasks and checks
// what it answered while it recovered (the harness polls from the moment
// it listens): /readyz 503 "recovering" as an API error, /healthz 200,
// and the API 503. Recovery may be too quick to be seen; the test says
// so in its log then.
func TestReadyz_Recovering(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.client()
	reqs := make([]api.PutRequest, 1000)
	for i := range 3 {
		for j := range reqs {
			reqs[j] = api.PutRequest{ID: fmt.Sprintf("r-%d-%d", i, j), Delay: new(api.Duration(time.Hour))}
		}
		if _, err := c.PutBatch(context.Background(), "big", reqs); err != nil {
			t.Fatal(err)
		}
	}
	s.stop()
	s.start()
	p := s.runs[len(s.runs)-1]
	if len(p.recovering) == 0 {
		t.Logf("recovery of 3,000 tasks took %v from start to ready; no answer before it", p.ready.Sub(p.started))
		return
	}
	for _, a := range p.recovering {
		switch a.path {
		case "/readyz":
			if a.status != 503 || !isAPIError(a.answer) || !strings.Contains(string(a.body), "recovering") {
				t.Errorf("/readyz while recovering: %v; want 503 recovering", a.answer)
			}
		case "/healthz":
			if a.status != 200 {
				t.Errorf("/healthz while recovering: %v; want 200", a.answer)
			}
		case "/v1/queues":
			if a.status != 503 && a.status != 200 || a.status == 503 && !isAPIError(a.answer) {
				t.Errorf("/v1/queues while recovering: %v; want 503 (or 200 if it became ready meanwhile)", a.answer)
			}
		}
	}
	t.Logf("%d answers before ready, in %v from start to ready", len(p.recovering), p.ready.Sub(p.started))
}
