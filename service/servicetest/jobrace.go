package servicetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// RunJobRaces checks that the front's commands that read a task, then act
// on it by key (beanstalkd's job-id commands, service/jobs.go; bulk
// actions, service/bulk.go), act on the task they read only, and that a
// schedule's run, put by the front before it records it, stands when the
// schedule is deleted in between. Between the
// read (Engine.Read by job id, Engine.FindTasks) and the action, the test changes
// the task: deletes it and puts its id again as another job, or reserves
// it; the action must then change nothing, and answer task.ErrNotFound
// where beanstalkd answers NOT_FOUND. open returns a fresh engine,
// closed when t ends.
func RunJobRaces(t *testing.T, open func(t *testing.T) service.Engine) {
	ctx := context.Background()
	// start returns the service over a fresh engine, the engine's hook
	// to set, and the job id of the task x of queue q, put (delayed by
	// delay).
	start := func(t *testing.T, delay time.Duration) (service.Service, *between, uint64) {
		e := &between{Engine: open(t)}
		s := service.New(e)
		x, _, err := s.Put(ctx, "q", task.PutRequest{ID: "x", Delay: delay})
		must(t, "put x", err)
		return s, e, x.JobID
	}
	// again deletes x and puts it again (delayed by delay), another job.
	again := func(t *testing.T, s service.Service, delay time.Duration) func() {
		return func() {
			must(t, "delete x", s.Delete(ctx, "q", "x"))
			_, _, err := s.Put(ctx, "q", task.PutRequest{ID: "x", Delay: delay})
			must(t, "put x again", err)
		}
	}
	// kept checks that x is a job other than old, in state st.
	kept := func(t *testing.T, s service.Service, old uint64, st task.State) {
		t.Helper()
		x, err := s.Get("q", "x")
		must(t, "get x", err)
		if x.JobID == old || x.State != st {
			t.Fatalf("x after the race: job %d, %s; want the new job (not %d), %s", x.JobID, x.State, old, st)
		}
	}

	t.Run("delete-job-replaced", func(t *testing.T) {
		s, e, job := start(t, 0)
		e.set(again(t, s, 0))
		wantErr(t, "DeleteJob of a job replaced", s.DeleteJob(ctx, job, ""), task.ErrNotFound)
		kept(t, s, job, task.Ready)
	})
	t.Run("delete-job-reserved", func(t *testing.T) {
		s, e, job := start(t, 0)
		e.set(func() { ReserveOne(t, s, "q", time.Second) })
		wantErr(t, "DeleteJob of a job reserved meanwhile", s.DeleteJob(ctx, job, ""), task.ErrNotFound)
		x, err := s.Get("q", "x")
		if err != nil || x.JobID != job || x.State != task.Reserved {
			t.Fatalf("x after the race: %+v, %v; want job %d reserved", x, err, job)
		}
	})
	t.Run("kick-job-replaced", func(t *testing.T) {
		s, e, job := start(t, time.Hour)
		e.set(again(t, s, time.Hour))
		wantErr(t, "KickJob of a job replaced", s.KickJob(ctx, job), task.ErrNotFound)
		kept(t, s, job, task.Delayed)
	})
	t.Run("release-job-replaced", func(t *testing.T) {
		s, e, job := start(t, 0)
		r := ReserveOne(t, s, "q", time.Second)
		e.set(func() {
			again(t, s, 0)()
			ReserveOne(t, s, "q", time.Second)
		})
		wantErr(t, "ReleaseJob of a job replaced", s.ReleaseJob(ctx, job, r.Lease, 1, 0), task.ErrNotFound)
		kept(t, s, job, task.Reserved)
	})
	t.Run("run-schedule-deleted", func(t *testing.T) {
		// A schedule deleted between its run's put and the record of the
		// run has had that run: the task stays, as a deleted schedule's
		// tasks do, and the run answers it.
		s, e, _ := start(t, 0)
		_, _, err := s.SetSchedule(ctx, task.ScheduleSpec{Name: "s", Cron: "0 3 * * *", Queue: "runs"})
		must(t, "set schedule", err)
		e.setPut(func() { must(t, "delete the schedule", s.DeleteSchedule(ctx, "s")) })
		got, err := s.RunSchedule(ctx, "s")
		must(t, "run a schedule deleted meanwhile", err)
		if x, err := s.Get("runs", got.ID); err != nil || x.JobID != got.JobID {
			t.Fatalf("the run's task %q: %+v, %v; want it put", got.ID, x, err)
		}
		_, err = s.Schedule(ctx, "s")
		wantErr(t, "the schedule after", err, task.ErrNoSchedule)
	})
	t.Run("bulk-delete-replaced", func(t *testing.T) {
		s, e, job := start(t, 0)
		e.setFind(again(t, s, 0))
		res, err := s.Bulk(ctx, "q", service.BulkRequest{Action: service.Delete})
		must(t, "bulk delete", err)
		if res.Matched != 1 || res.Changed != 0 {
			t.Fatalf("bulk delete of a task replaced: %+v; want 1 matched, none changed", res)
		}
		kept(t, s, job, task.Ready)
	})
	t.Run("bulk-retry-replaced", func(t *testing.T) {
		s, e, job := start(t, time.Hour)
		e.setFind(again(t, s, time.Hour))
		res, err := s.Bulk(ctx, "q", service.BulkRequest{Action: service.Retry})
		must(t, "bulk retry", err)
		if res.Matched != 1 || res.Changed != 0 {
			t.Fatalf("bulk retry of a task replaced: %+v; want 1 matched, none changed", res)
		}
		kept(t, s, job, task.Delayed)
	})
}

// between is an engine that runs a hook once, right after the next read
// of a task by job id (Read) or of a page (FindTasks), or the next put
// (PutBatch): where the front has read a task, or a schedule's run is
// put, and not yet acted on it or recorded it.
type between struct {
	service.Engine
	mu              sync.Mutex
	job, found, put func()
}

func (e *between) set(f func()) {
	e.mu.Lock()
	e.job = f
	e.mu.Unlock()
}

func (e *between) setPut(f func()) {
	e.mu.Lock()
	e.put = f
	e.mu.Unlock()
}

func (e *between) setFind(f func()) {
	e.mu.Lock()
	e.found = f
	e.mu.Unlock()
}

// take returns *f and clears it.
func (e *between) take(f *func()) func() {
	e.mu.Lock()
	defer e.mu.Unlock()
	h := *f
	*f = nil
	return h
}

func (e *between) Read(r service.TaskRef) (task.Task, error) {
	t, err := e.Engine.Read(r)
	if r.Job != 0 {
		if h := e.take(&e.job); h != nil {
			h()
		}
	}
	return t, err
}

func (e *between) PutBatch(ctx context.Context, queue string, rs []task.PutRequest) []task.PutResult {
	res := e.Engine.PutBatch(ctx, queue, rs)
	if h := e.take(&e.put); h != nil {
		h()
	}
	return res
}

func (e *between) FindTasks(ctx context.Context, queue string, f service.Filter, after service.Cursor, limit int) ([]task.Task, service.Cursor, error) {
	ts, next, err := e.Engine.FindTasks(ctx, queue, f, after, limit)
	if h := e.take(&e.found); h != nil {
		h()
	}
	return ts, next, err
}
