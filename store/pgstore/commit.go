package pgstore

import (
	"fmt"
	"math"

	"github.com/hourglass-go/hourglass/store"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Statements of Commit, one per kind of op. fire_at is the task's next
// timer as package cluster reads it: due while waiting, the lease's end
// while reserved, none when dead.
const (
	sqlPutTask = `INSERT INTO hourglass_tasks (job_id, partition, queue, id, state, priority, due, fire_at,
		created, ttr, attempts, max_attempts, lease, lease_until, timeouts, releases, buries, kicks, payload)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)
	ON CONFLICT (job_id) DO UPDATE SET
		queue = EXCLUDED.queue, id = EXCLUDED.id, state = EXCLUDED.state, priority = EXCLUDED.priority,
		due = EXCLUDED.due, fire_at = EXCLUDED.fire_at, created = EXCLUDED.created, ttr = EXCLUDED.ttr,
		attempts = EXCLUDED.attempts, max_attempts = EXCLUDED.max_attempts, lease = EXCLUDED.lease,
		lease_until = EXCLUDED.lease_until, timeouts = EXCLUDED.timeouts, releases = EXCLUDED.releases,
		buries = EXCLUDED.buries, kicks = EXCLUDED.kicks, payload = EXCLUDED.payload`
	sqlUpdateTask = `UPDATE hourglass_tasks SET queue = $2, id = $3, state = $4, priority = $5, due = $6,
		fire_at = $7, created = $8, ttr = $9, attempts = $10, max_attempts = $11, lease = $12,
		lease_until = $13, timeouts = $14, releases = $15, buries = $16, kicks = $17
	WHERE job_id = $1`
	sqlDeleteTask  = `DELETE FROM hourglass_tasks WHERE job_id = $1`
	sqlPutSchedule = `INSERT INTO hourglass_schedules (name, cron, queue, timezone, payload, created, last)
	VALUES ($1, $2, $3, $4, $5, $6, $7)
	ON CONFLICT (name) DO UPDATE SET cron = EXCLUDED.cron, queue = EXCLUDED.queue,
		timezone = EXCLUDED.timezone, payload = EXCLUDED.payload, created = EXCLUDED.created, last = EXCLUDED.last`
	sqlDeleteSchedule = `DELETE FROM hourglass_schedules WHERE name = $1`
	sqlRaiseNext      = `UPDATE hourglass_meta SET next_job_id = greatest(next_job_id, $1)`
)

// fireAt returns the fire_at column of t (nil for NULL).
func fireAt(t *store.Task) any {
	switch t.State {
	case store.Waiting:
		return t.Due
	case store.Reserved:
		return t.LeaseUntil
	}
	return nil
}

// Commit applies b in one transaction: its statements are sent in one
// pipeline (one round trip), then COMMIT, which returns once the commit
// is durable (see the package doc). An update of a task not in the store,
// or a put giving a task the queue and id of another live task, fails the
// whole batch and changes nothing. It takes O(len(b.Ops)) statements.
func (s *Store) Commit(b *store.Batch) error {
	ctx, cancel, err := s.ctx()
	if err != nil {
		return err
	}
	defer cancel()
	if len(b.Ops) == 0 && b.NextJobID == 0 {
		return nil
	}
	var pb pgx.Batch
	next := b.NextJobID
	for i := range b.Ops {
		op := &b.Ops[i]
		t := &op.Task
		if (op.Kind == store.PutTask || op.Kind == store.UpdateTask || op.Kind == store.DeleteTask) && t.JobID > math.MaxInt64 {
			return fmt.Errorf("hourglass: pgstore: job id %d out of range", t.JobID)
		}
		switch op.Kind {
		case store.PutTask:
			payload := t.Payload
			if payload == nil {
				payload = []byte{}
			}
			pb.Queue(sqlPutTask, int64(t.JobID), int64(t.JobID%uint64(s.partitions)), t.Queue, t.ID, int16(t.State),
				int64(t.Priority), t.Due, fireAt(t), t.Created, int64(t.TTR), int64(t.Attempts), int64(t.MaxAttempts),
				t.Lease, t.LeaseUntil, int64(t.Timeouts), int64(t.Releases), int64(t.Buries), int64(t.Kicks), payload)
			next = max(next, t.JobID+1)
		case store.UpdateTask:
			job := t.JobID
			pb.Queue(sqlUpdateTask, int64(t.JobID), t.Queue, t.ID, int16(t.State), int64(t.Priority), t.Due, fireAt(t),
				t.Created, int64(t.TTR), int64(t.Attempts), int64(t.MaxAttempts), t.Lease, t.LeaseUntil,
				int64(t.Timeouts), int64(t.Releases), int64(t.Buries), int64(t.Kicks)).Exec(func(tag pgconn.CommandTag) error {
				if tag.RowsAffected() == 0 {
					return fmt.Errorf("hourglass: pgstore: update of task %d, which is not in the store", job)
				}
				return nil
			})
		case store.DeleteTask:
			pb.Queue(sqlDeleteTask, int64(t.JobID))
		case store.PutSchedule:
			sc := &op.Schedule
			payload := sc.Payload
			if payload == nil {
				payload = []byte{}
			}
			pb.Queue(sqlPutSchedule, sc.Name, sc.Cron, sc.Queue, sc.Timezone, payload, sc.Created, sc.Last)
		case store.DeleteSchedule:
			pb.Queue(sqlDeleteSchedule, op.Schedule.Name)
		default:
			return fmt.Errorf("hourglass: pgstore: op of unknown kind %d", op.Kind)
		}
	}
	if next > 0 {
		if next > math.MaxInt64 {
			return fmt.Errorf("hourglass: pgstore: next job id %d out of range", next)
		}
		pb.Queue(sqlRaiseNext, int64(next))
	}
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		return tx.SendBatch(ctx, &pb).Close()
	})
	if err != nil {
		return fmt.Errorf("hourglass: pgstore: commit: %w", err)
	}
	return nil
}
