package broker

import (
	"context"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/hourglass-go/hourglass/store"
)

// Reserve hands out up to max ready tasks of queue, in priority order,
// then due time, then put order, each leased for its TTR: the answer's
// tasks carry Lease, which Ack, Touch and Nack take. When none is ready it
// waits up to wait for the first one and answers as soon as one is (an
// empty answer when none came, or when ctx ends or the broker closes).
// The reservations are durable when it returns. max must be 1 to
// MaxReserve and wait 0 to MaxWait.
func (b *Broker) Reserve(ctx context.Context, queue string, max int, wait time.Duration) ([]Task, error) {
	if err := checkQueue(queue); err != nil {
		return nil, err
	}
	if max < 1 || max > MaxReserve {
		return nil, fmt.Errorf("%w: max must be 1 to %d", ErrInvalid, MaxReserve)
	}
	if wait < 0 || wait > MaxWait {
		return nil, fmt.Errorf("%w: wait must be 0 to %s", ErrInvalid, MaxWait)
	}
	var timer *time.Timer
	for {
		b.mu.Lock()
		if err := b.usable(); err != nil {
			b.mu.Unlock()
			return nil, err
		}
		q := b.queue(queue)
		tasks, err := b.take(q, max)
		if err != nil || len(tasks) > 0 || wait == 0 {
			g := b.barrier()
			if werr := b.commitWait(ctx, g); err == nil && werr != nil {
				if len(tasks) > 0 && werr == ctx.Err() {
					// The reservations stand and their leases run out as
					// usual; this caller is gone.
					return nil, werr
				}
				err = werr
			}
			return tasks, err
		}
		w := &waiter{ch: make(chan struct{}, 1)}
		q.waiters = append(q.waiters, w)
		b.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		}
		select {
		case <-w.ch:
			continue // a task became ready: try again
		case <-ctx.Done():
		case <-timer.C:
		}
		b.mu.Lock()
		if !q.remove(w) {
			// Signalled while leaving: pass the signal on.
			<-w.ch
			q.wakeOne()
		}
		b.mu.Unlock()
		return nil, nil
	}
}

// take reserves up to max ready tasks of q. b.mu is held.
func (b *Broker) take(q *queueState, max int) ([]Task, error) {
	var out []Task
	now := time.Now()
	for len(out) < max {
		it, ok := q.ready.pop()
		if !ok {
			break
		}
		s, ok := b.tasks[it.job]
		if !ok || s.state() != Ready || s.queue() != q.index {
			continue // deleted or replaced while ready
		}
		rec, err := b.record(it.job)
		if err != nil {
			q.ready.push(it)
			return out, err
		}
		t := b.lease(it.job, s, rec, q, now)
		q.deliveries++
		b.metrics.delivered(now.Sub(time.Unix(0, rec.Due)))
		out = append(out, t)
	}
	return out, nil
}

// lease reserves job (ready, with record rec) until now+TTR and returns
// the task with its lease. b.mu is held.
func (b *Broker) lease(job uint64, s slot, rec store.Task, q *queueState, now time.Time) Task {
	rec.State = store.Reserved
	rec.Attempts++
	rec.Lease = newLease()
	rec.LeaseUntil = now.Add(rec.TTR).UnixNano()
	payload := rec.Payload
	rec.Payload = nil // an update leaves the stored payload as it is
	b.writeTask(store.UpdateTask, rec)
	q.count(s.state(), Reserved)
	s.set(Reserved)
	b.tasks[job] = s
	b.leases.Set(job, rec.TTR)
	rec.Payload = payload
	t := view(rec, s)
	t.Lease = rec.Lease
	return t
}

// newLease returns a fresh lease token: 64 random bits in hex.
func newLease() string {
	var buf [8]byte
	v := rand.Uint64()
	for i := range buf {
		buf[i] = byte(v >> (8 * i))
	}
	return hex.EncodeToString(buf[:])
}

// fire is the delay wheel's callback: job has fallen due. It runs on the
// wheel's goroutine.
func (b *Broker) fire(job uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.tasks[job]
	if !ok || s.state() != Delayed || b.closed {
		return // deleted, kicked or replaced since it was armed
	}
	q := b.queues[s.queue()]
	q.count(Delayed, Ready)
	s.set(Ready)
	b.tasks[job] = s
	q.ready.push(readyItem{due: s.due, prio: s.prio, job: job})
	q.wakeOne()
}

// expireLease is the lease wheel's callback: job's reservation may have
// run out. It runs on the wheel's goroutine.
func (b *Broker) expireLease(job uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.tasks[job]
	if !ok || s.state() != Reserved || b.closed || b.failed != nil {
		return
	}
	rec, err := b.record(job)
	if err != nil {
		b.log.Error("hourglass: lease expiry: reading the task", "job_id", job, "err", err)
		return
	}
	now := time.Now()
	if left := rec.LeaseUntil - now.UnixNano(); left > 0 {
		// Touched after the wheel took it, or the wall clock moved back:
		// wait out the rest.
		b.leases.Set(job, time.Duration(left))
		return
	}
	b.metrics.leaseExpiries.Inc()
	rec.Timeouts++
	b.requeue(job, s, rec, now.UnixNano(), rec.Due)
}

// requeue ends job's reservation (the caller has taken it off the lease
// wheel or the wheel fired): the task is dead when its attempts are used
// up, else waiting again until due. b.mu is held.
func (b *Broker) requeue(job uint64, s slot, rec store.Task, now, due int64) {
	q := b.queues[s.queue()]
	rec.Lease, rec.LeaseUntil = "", 0
	rec.Payload = nil
	if rec.MaxAttempts > 0 && rec.Attempts >= rec.MaxAttempts {
		rec.State = store.Dead
		b.writeTask(store.UpdateTask, rec)
		q.count(s.state(), Dead)
		s.set(Dead)
		b.tasks[job] = s
		b.metrics.dead.Inc()
		return
	}
	rec.State = store.Waiting
	rec.Due = due
	b.writeTask(store.UpdateTask, rec)
	s.due = due
	b.place(job, s, q, now)
}
