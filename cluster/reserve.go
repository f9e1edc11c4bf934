package cluster

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/hourglass-go/hourglass/broker"
)

// sqlReserve takes up to $2 ready tasks of queue $1 in delivery order
// (priority, due time, job id), skipping rows other reservers hold, and
// leases them for their TTR by the database's clock. One statement, so
// one transaction, committed (and flushed) before it returns.
const sqlReserve = `WITH picked AS (
		SELECT job_id FROM hourglass_tasks
		WHERE queue = $1 AND state = 1 AND fire_at IS NULL
		ORDER BY priority, due, job_id
		LIMIT $2
		FOR UPDATE SKIP LOCKED
	), now AS (SELECT hourglass_now() AS ns)
	UPDATE hourglass_tasks t SET state = 2, attempts = t.attempts + 1,
		lease = substr(md5(random()::text || t.job_id::text || now.ns::text), 1, 16),
		lease_until = now.ns + t.ttr, fire_at = now.ns + t.ttr
	FROM picked, now
	WHERE t.job_id = picked.job_id
	RETURNING ` + `t.job_id, t.queue, t.id, t.state, t.priority, t.due, t.fire_at, t.created, t.ttr, t.attempts,
		t.max_attempts, t.lease, t.lease_until, t.timeouts, t.releases, t.buries, t.kicks, t.payload, t.partition, now.ns`

// Reserve hands out up to max ready tasks of queue, from any partition,
// in priority order, then due time, then job id, each leased for its TTR,
// as broker.Broker.Reserve does. When none is ready it waits up to wait
// for the first one: the node listens to the queue's channel, where the
// owners announce tasks they make ready, and looks again when woken. The
// reservations are durable when it returns.
func (n *Node) Reserve(ctx context.Context, queue string, max int, wait time.Duration) ([]broker.Task, error) {
	if err := checkQueue(queue); err != nil {
		return nil, err
	}
	if max < 1 || max > broker.MaxReserve {
		return nil, fmt.Errorf("%w: max must be 1 to %d", broker.ErrInvalid, broker.MaxReserve)
	}
	if wait < 0 || wait > broker.MaxWait {
		return nil, fmt.Errorf("%w: wait must be 0 to %s", broker.ErrInvalid, broker.MaxWait)
	}
	var timer *time.Timer
	for {
		if err := n.Err(); err != nil {
			return nil, err
		}
		var w *waiter
		var q *queueWait
		if wait > 0 {
			// Listen and register before looking, so that a task made
			// ready while we look wakes us.
			if err := n.listenQueue(ctx, queue); err != nil {
				if ctx.Err() != nil {
					return nil, nil
				}
				return nil, dbErr(err)
			}
			w = &waiter{ch: make(chan struct{}, 1)}
			n.mu.Lock()
			q = n.queueWait(queue)
			q.waiters = append(q.waiters, w)
			n.mu.Unlock()
		}
		tasks, err := n.take(ctx, queue, max)
		if err != nil || len(tasks) > 0 || wait == 0 {
			if w != nil {
				n.leave(q, w)
			}
			if err != nil && ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return tasks, err
		}
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		}
		select {
		case <-w.ch:
			continue
		case <-ctx.Done():
		case <-timer.C:
		}
		n.leave(q, w)
		return nil, nil
	}
}

// leave takes w off q's list; if w was signalled meanwhile, the signal
// goes to the next waiter.
func (n *Node) leave(q *queueWait, w *waiter) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !q.remove(w) && len(w.ch) > 0 {
		q.wake(1)
	}
}

// take runs one reservation and announces the leases' timers to their
// partitions' owners.
func (n *Node) take(ctx context.Context, queue string, max int) ([]broker.Task, error) {
	rows, err := n.db.Query(ctx, sqlReserve, queue, max)
	if err != nil {
		return nil, dbErr(err)
	}
	var got []row
	var dbNow int64
	for rows.Next() {
		t, err := scanRow(rows, &dbNow)
		if err != nil {
			rows.Close()
			return nil, dbErr(err)
		}
		got = append(got, t)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, dbErr(err)
	}
	if len(got) == 0 {
		return nil, nil
	}
	sort.Slice(got, func(i, j int) bool {
		a, b := &got[i], &got[j]
		if a.priority != b.priority {
			return a.priority < b.priority
		}
		if a.due != b.due {
			return a.due < b.due
		}
		return a.job < b.job
	})
	out := make([]broker.Task, len(got))
	dues := make([]int64, len(got))
	for i := range got {
		t := &got[i]
		out[i] = t.view()
		out[i].Lease = t.lease
		dues[i] = t.due
		n.announce(uint64(t.job), t.leaseUntil, dbNow)
	}
	n.metrics.delivered(dues, dbNow)
	n.count(queue, func(c *counts) { c.deliveries += uint64(len(got)) })
	return out, nil
}

// count updates queue's counters.
func (n *Node) count(queue string, f func(*counts)) {
	n.mu.Lock()
	c := n.stats[queue]
	if c == nil {
		c = &counts{}
		n.stats[queue] = c
	}
	f(c)
	n.mu.Unlock()
}
