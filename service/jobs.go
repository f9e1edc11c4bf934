package service

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hourglass-go/hourglass/task"
)

// The front's Commands (commands.go), written once over the engine's
// primitives. A reservation's end by key is one Engine.Settle. A
// beanstalkd command names a task by job id: the front reads the task
// (Engine.Read by job id) for its queue and id, then acts by key. Between the two
// the id may have been deleted and put again as another job; the action
// carries what it expects down to the engine, which checks it in the
// same commit or statement as it acts: the job id (DeleteOptions.Job,
// KickOptions.Job), or the lease of a reserved task, which only that
// reservation has. What beanstalkd answers NOT_FOUND (a task gone, of
// another lease, in another state) is task.ErrNotFound here.

// UrgentBelow is the priority below which a ready task counts as urgent
// in its queue's detail (task.QueueDetail.Urgent, beanstalkd's
// current-jobs-urgent): task.DefaultPriority, beanstalkd's 1024. The
// embedded engine asks Urgent of each ready task; a cluster node counts
// in SQL the ready rows whose priority is under it.
const UrgentBelow = task.DefaultPriority

// Urgent reports whether a ready task of priority prio counts as urgent.
func Urgent(prio uint32) bool { return prio < UrgentBelow }

func (f *front) Delete(ctx context.Context, queue, id string) error {
	if err := checkTask(queue, id); err != nil {
		return err
	}
	return f.e.Delete(ctx, queue, id, DeleteOptions{})
}

func (f *front) Nack(ctx context.Context, queue, id, lease string, delay time.Duration, reason string) (task.Task, error) {
	if err := checkRetry(delay, f.lim.MaxDelay); err != nil {
		return task.Task{}, err
	}
	if err := checkHeld(queue, id, lease); err != nil {
		return task.Task{}, err
	}
	msg := CutError(reason)
	return answer(f.e.Settle(ctx, queue, id, lease, Settlement{Outcome: task.AttemptNacked, Delay: delay, Error: &msg}))
}

func (f *front) Release(ctx context.Context, queue, id, lease string, delay time.Duration) (task.Task, error) {
	if err := CheckDelay("delay", delay, f.lim.MaxDelay); err != nil {
		return task.Task{}, err
	}
	if err := checkHeld(queue, id, lease); err != nil {
		return task.Task{}, err
	}
	return answer(f.e.Settle(ctx, queue, id, lease, Settlement{Outcome: task.AttemptReleased, Delay: delay, Refund: true}))
}

func (f *front) Bury(ctx context.Context, queue, id, lease, reason string) (task.Task, error) {
	if err := checkHeld(queue, id, lease); err != nil {
		return task.Task{}, err
	}
	msg := CutError(reason)
	return answer(f.e.Settle(ctx, queue, id, lease, Settlement{Outcome: task.AttemptBuried, Error: &msg}))
}

// answer is the task a Nack, Release or Bury answers: without its
// payload, whatever the engine read (a cluster node's statement returns
// it, the embedded engine does not read it), since the task has left the
// worker that held it; Get has it.
func answer(t task.Task, err error) (task.Task, error) {
	t.Payload = nil
	return t, err
}

func (f *front) Kick(ctx context.Context, queue, id string) error {
	if err := checkTask(queue, id); err != nil {
		return err
	}
	return f.e.Kick(ctx, queue, id, KickOptions{})
}

// Peek is the first task of Engine.Next, read again by job id for its
// payload.
func (f *front) Peek(queue string, st task.State) (task.Task, error) {
	if err := CheckPeek(queue, st); err != nil {
		return task.Task{}, err
	}
	ts, err := f.e.Next(context.Background(), queue, st, 1)
	if err != nil {
		return task.Task{}, err
	}
	if len(ts) == 0 {
		return task.Task{}, task.ErrNotFound
	}
	return f.e.Read(TaskRef{Job: ts[0].JobID})
}

// ReserveAny is ReserveQueues of one task.
func (f *front) ReserveAny(ctx context.Context, queues []string, wait time.Duration) (task.Task, bool, error) {
	if err := CheckReserve(queues, 1, wait); err != nil {
		return task.Task{}, false, err
	}
	if len(queues) > task.MaxWatch {
		return task.Task{}, false, fmt.Errorf("%w: at most %d queues", task.ErrInvalid, task.MaxWatch)
	}
	ts, err := f.e.ReserveQueues(ctx, queues, 1, wait)
	if err != nil || len(ts) == 0 {
		return task.Task{}, false, err
	}
	return ts[0], true, nil
}

// notFound is err as beanstalkd answers it: a task gone, of another
// lease or in another state is task.ErrNotFound.
func notFound(err error) error {
	if errors.Is(err, task.ErrLease) || errors.Is(err, task.ErrState) {
		return task.ErrNotFound
	}
	return err
}

// DeleteJob acks job if it is reserved under lease (beanstalkd's worker
// deletes the job it reserved), else deletes it unless it is reserved.
func (f *front) DeleteJob(ctx context.Context, job uint64, lease string) error {
	t, err := f.Job(job)
	if err != nil {
		return err
	}
	if t.State == task.Reserved {
		if CheckLease(lease) != nil {
			return task.ErrNotFound
		}
		return notFound(f.Ack(ctx, t.Queue, t.ID, lease))
	}
	return notFound(f.e.Delete(ctx, t.Queue, t.ID, DeleteOptions{Job: job, Unreserved: true}))
}

// ReleaseJob settles job as released, its attempt counted, with priority
// prio.
func (f *front) ReleaseJob(ctx context.Context, job uint64, lease string, prio uint32, delay time.Duration) error {
	if err := CheckDelay("delay", delay, f.lim.MaxDelay); err != nil {
		return err
	}
	return f.settleJob(ctx, job, lease, Settlement{Outcome: task.AttemptReleased, Delay: delay, Priority: &prio})
}

// BuryJob settles job as buried with priority prio, its last error kept.
func (f *front) BuryJob(ctx context.Context, job uint64, lease string, prio uint32) error {
	return f.settleJob(ctx, job, lease, Settlement{Outcome: task.AttemptBuried, Priority: &prio})
}

// settleJob settles job, reserved under lease, as s says.
func (f *front) settleJob(ctx context.Context, job uint64, lease string, s Settlement) error {
	t, err := f.heldJob(job, lease)
	if err != nil {
		return err
	}
	_, err = f.e.Settle(ctx, t.Queue, t.ID, lease, s)
	return notFound(err)
}

// heldJob returns job if it is reserved and lease is a lease; whether it
// is job's is the engine's to check as it acts.
func (f *front) heldJob(job uint64, lease string) (task.Task, error) {
	if CheckLease(lease) != nil {
		return task.Task{}, task.ErrNotFound
	}
	t, err := f.Job(job)
	if err != nil {
		return task.Task{}, err
	}
	if t.State != task.Reserved {
		return task.Task{}, task.ErrNotFound
	}
	return t, nil
}

func (f *front) TouchJob(ctx context.Context, job uint64, lease string) (task.Task, error) {
	t, err := f.heldJob(job, lease)
	if err != nil {
		return task.Task{}, err
	}
	t, err = f.e.Settle(ctx, t.Queue, t.ID, lease, Settlement{Outcome: Renewed})
	return t, notFound(err)
}

// KickJob kicks job if it is dead or delayed.
func (f *front) KickJob(ctx context.Context, job uint64) error {
	t, err := f.Job(job)
	if err != nil {
		return err
	}
	return notFound(f.e.Kick(ctx, t.Queue, t.ID, KickOptions{Job: job, Delayed: true}))
}

// KickQueue kicks up to n tasks of queue, a page of Engine.Next at a
// time: dead ones, oldest death first, if it has any when it starts;
// else delayed ones, soonest due first. Dead tasks keep their due times,
// so they are kicked up to bulkParallel at once; delayed ones become due
// now, one after the other, so that they are handed out in the order
// kicked. It takes O(n) engine operations, and a page of delayed tasks
// costs the embedded engine a scan of its live tasks.
func (f *front) KickQueue(ctx context.Context, queue string, n int) (int, error) {
	if err := CheckQueue(queue); err != nil {
		return 0, err
	}
	if n <= 0 {
		return 0, nil
	}
	st, par := task.Dead, bulkParallel
	if ts, err := f.e.Next(ctx, queue, task.Dead, 1); err != nil {
		return 0, err
	} else if len(ts) == 0 {
		st, par = task.Delayed, 1
	}
	return f.each(ctx, queue, st, n, par, func(t task.Task) error {
		return f.e.Kick(ctx, t.Queue, t.ID, KickOptions{Job: t.JobID, Delayed: st == task.Delayed})
	})
}

// KickDead kicks every dead task of queue, as KickQueue does, and
// returns how many: as many as it had when it started, at most.
func (f *front) KickDead(ctx context.Context, queue string) (int, error) {
	n, err := f.deadCount(queue)
	if err != nil || n == 0 {
		return 0, err
	}
	return f.each(ctx, queue, task.Dead, n, bulkParallel, func(t task.Task) error {
		return f.e.Kick(ctx, t.Queue, t.ID, KickOptions{Job: t.JobID})
	})
}

// DeleteDead deletes every dead task of queue, up to bulkParallel at
// once (their deletions commit together, so the history may record them
// in another order than they died), and returns how many: as many as it
// had when it started, at most.
func (f *front) DeleteDead(ctx context.Context, queue string) (int, error) {
	n, err := f.deadCount(queue)
	if err != nil || n == 0 {
		return 0, err
	}
	return f.each(ctx, queue, task.Dead, n, bulkParallel, func(t task.Task) error {
		return f.e.Delete(ctx, t.Queue, t.ID, DeleteOptions{Job: t.JobID, Unreserved: true})
	})
}

// deadCount checks queue and counts its dead tasks.
func (f *front) deadCount(queue string) (int, error) {
	if err := CheckQueue(queue); err != nil {
		return 0, err
	}
	d, err := f.e.Queue(queue)
	return d.Dead, err
}

// each does act on up to n tasks of queue in state st, taken in pages of
// Engine.Next in its order, up to par at once (in order when par is 1),
// and returns how many act changed. A task's refusal (task.ErrNotFound,
// task.ErrState: gone, or changed since the page was read) is not an
// error; a page that changes none ends it.
func (f *front) each(ctx context.Context, queue string, st task.State, n, par int, act func(task.Task) error) (int, error) {
	done := 0
	for done < n {
		ts, err := f.e.Next(ctx, queue, st, min(n-done, task.MaxList))
		if err != nil || len(ts) == 0 {
			return done, err
		}
		errs := make([]error, len(ts))
		sem := make(chan struct{}, par)
		var wg sync.WaitGroup
		for i, t := range ts {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				errs[i] = act(t)
			}()
		}
		wg.Wait()
		k := 0
		for _, err := range errs {
			switch {
			case err == nil:
				k++
			case errors.Is(err, task.ErrNotFound), errors.Is(err, task.ErrState):
			default:
				return done + k, err
			}
		}
		done += k
		if k == 0 {
			return done, nil
		}
	}
	return done, nil
}

func (f *front) PauseSchedule(ctx context.Context, name string) error {
	return f.setPaused(ctx, name, true)
}

func (f *front) ResumeSchedule(ctx context.Context, name string) error {
	return f.setPaused(ctx, name, false)
}

// setPaused is Engine.SetSchedule of Paused.
func (f *front) setPaused(ctx context.Context, name string, paused bool) error {
	_, _, err := f.e.SetSchedule(ctx, name, ScheduleChange{Paused: &paused})
	return err
}

// RunSchedule puts a task of the schedule name now, paused or not: the
// schedule's task (SchedulePut) with the id RunID, by Engine.PutBatch,
// then records it as the schedule's last (SetSchedule's Run); its next
// occurrence stays. Two commits: a schedule deleted between them has
// had its run (the task stays, as a deleted schedule's tasks do), and a
// crash between them leaves the task put and the schedule's last as it
// was. O(1) engine calls.
func (f *front) RunSchedule(ctx context.Context, name string) (task.Task, error) {
	info, err := f.Schedule(ctx, name)
	if err != nil {
		return task.Task{}, err
	}
	now := time.Now()
	r := SchedulePut(info.ScheduleSpec, RunID(name, now))
	res := f.e.PutBatch(ctx, info.Queue, []task.PutRequest{r})
	if res[0].Err != nil {
		return task.Task{}, res[0].Err
	}
	_, _, err = f.e.SetSchedule(ctx, name, ScheduleChange{Run: &LastRun{At: now, ID: r.ID}})
	if err != nil && !errors.Is(err, task.ErrNoSchedule) {
		return task.Task{}, err
	}
	return res[0].Task, nil
}
