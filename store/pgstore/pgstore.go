package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/hourglass-go/hourglass/store"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrClosed is returned by every method of a closed [Store].
var ErrClosed = errors.New("hourglass: pgstore: store closed")

// Timeout bounds each method's work on the database, since the
// [store.Store] methods take no context.
const Timeout = 30 * time.Second

// Store is a [store.Store] on PostgreSQL. It is safe for concurrent use by
// multiple goroutines; each method takes a connection from the pool for
// its duration.
type Store struct {
	db         *pgxpool.Pool
	own        bool  // Close closes db
	partitions int64 // from hourglass_meta
	closed     atomic.Bool
}

// Open connects to the database at url (a PostgreSQL URL or key=value
// string), migrates its schema and returns the store, which owns the
// connection pool: Close closes it.
func Open(ctx context.Context, url string) (*Store, error) {
	db, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("hourglass: pgstore: %w", err)
	}
	s, err := New(ctx, db)
	if err != nil {
		db.Close()
		return nil, err
	}
	s.own = true
	return s, nil
}

// New migrates the schema of db and returns a store over it. The caller
// keeps db: Close leaves it open.
func New(ctx context.Context, db *pgxpool.Pool) (*Store, error) {
	var fsync string
	if err := db.QueryRow(ctx, "SHOW fsync").Scan(&fsync); err != nil {
		return nil, fmt.Errorf("hourglass: pgstore: %w", err)
	}
	if fsync != "on" {
		return nil, errors.New("hourglass: pgstore: the server runs with fsync=off: commits would not be durable")
	}
	if _, _, err := Migrate(ctx, db); err != nil {
		return nil, err
	}
	s := &Store{db: db}
	if err := db.QueryRow(ctx, "SELECT partitions FROM hourglass_meta").Scan(&s.partitions); err != nil {
		return nil, fmt.Errorf("hourglass: pgstore: %w", err)
	}
	return s, nil
}

// Close marks the store closed and closes its pool if Open made it. It
// commits nothing and is idempotent.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if s.own {
		s.db.Close()
	}
	return nil
}

// ctx returns the context of one method's work, or ErrClosed.
func (s *Store) ctx() (context.Context, context.CancelFunc, error) {
	if s.closed.Load() {
		return nil, nil, ErrClosed
	}
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	return ctx, cancel, nil
}

// Columns of a task row in the order scanTask reads them; taskColumns
// leaves out the payload.
const (
	taskColumns = `job_id, queue, id, state, priority, due, created, ttr, attempts, max_attempts,
		lease, lease_until, timeouts, releases, buries, kicks`
	taskColumnsPayload = taskColumns + `, payload`
)

// scanTask reads a row of taskColumns (with the payload if withPayload).
func scanTask(row pgx.Row, withPayload bool) (store.Task, error) {
	var (
		t                                 store.Task
		job, prio, ttr, att, maxAtt       int64
		state                             int16
		timeouts, releases, buries, kicks int64
	)
	dest := []any{&job, &t.Queue, &t.ID, &state, &prio, &t.Due, &t.Created, &ttr, &att, &maxAtt,
		&t.Lease, &t.LeaseUntil, &timeouts, &releases, &buries, &kicks}
	if withPayload {
		dest = append(dest, &t.Payload)
	}
	if err := row.Scan(dest...); err != nil {
		return store.Task{}, err
	}
	t.JobID = uint64(job)
	t.State = store.State(state)
	t.Priority = uint32(prio)
	t.TTR = time.Duration(ttr)
	t.Attempts, t.MaxAttempts = uint32(att), uint32(maxAtt)
	t.Timeouts, t.Releases, t.Buries, t.Kicks = uint32(timeouts), uint32(releases), uint32(buries), uint32(kicks)
	if withPayload && t.Payload == nil {
		t.Payload = []byte{}
	}
	return t, nil
}

// Task returns task jobID with its payload.
func (s *Store) Task(jobID uint64) (store.Task, error) {
	ctx, cancel, err := s.ctx()
	if err != nil {
		return store.Task{}, err
	}
	defer cancel()
	if jobID > math.MaxInt64 {
		return store.Task{}, store.ErrNotFound
	}
	t, err := scanTask(s.db.QueryRow(ctx, "SELECT "+taskColumnsPayload+" FROM hourglass_tasks WHERE job_id = $1", int64(jobID)), true)
	if err == pgx.ErrNoRows {
		return store.Task{}, store.ErrNotFound
	}
	if err != nil {
		return store.Task{}, fmt.Errorf("hourglass: pgstore: task %d: %w", jobID, err)
	}
	return t, nil
}

// Lookup returns the job id of the live task id of queue.
func (s *Store) Lookup(queue, id string) (uint64, error) {
	ctx, cancel, err := s.ctx()
	if err != nil {
		return 0, err
	}
	defer cancel()
	var job int64
	err = s.db.QueryRow(ctx, "SELECT job_id FROM hourglass_tasks WHERE queue = $1 AND id = $2", queue, id).Scan(&job)
	if err == pgx.ErrNoRows {
		return 0, store.ErrNotFound
	}
	if err != nil {
		return 0, fmt.Errorf("hourglass: pgstore: lookup: %w", err)
	}
	return uint64(job), nil
}

// List returns up to limit tasks of queue after job id after, by job id,
// without payloads. It reads one index range.
func (s *Store) List(queue string, after uint64, limit int) ([]store.Task, error) {
	ctx, cancel, err := s.ctx()
	if err != nil {
		return nil, err
	}
	defer cancel()
	if limit <= 0 || after >= math.MaxInt64 {
		return nil, nil
	}
	rows, err := s.db.Query(ctx, "SELECT "+taskColumns+` FROM hourglass_tasks
		WHERE queue = $1 AND job_id > $2 ORDER BY job_id LIMIT $3`, queue, int64(after), limit)
	if err != nil {
		return nil, fmt.Errorf("hourglass: pgstore: list: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Task, error) { return scanTask(r, false) })
	if err != nil {
		return nil, fmt.Errorf("hourglass: pgstore: list: %w", err)
	}
	return out, nil
}

// Recover calls fn for every task by job id, without payloads, reading
// the rows as a stream: memory stays flat however many tasks there are.
func (s *Store) Recover(fn func(store.Task) error) error {
	if s.closed.Load() {
		return ErrClosed
	}
	// No timeout: reading millions of rows takes as long as it takes.
	rows, err := s.db.Query(context.Background(), "SELECT "+taskColumns+" FROM hourglass_tasks ORDER BY job_id")
	if err != nil {
		return fmt.Errorf("hourglass: pgstore: recover: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		t, err := scanTask(rows, false)
		if err != nil {
			return fmt.Errorf("hourglass: pgstore: recover: %w", err)
		}
		if err := fn(t); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("hourglass: pgstore: recover: %w", err)
	}
	return nil
}

// Schedules returns every schedule by name.
func (s *Store) Schedules() ([]store.Schedule, error) {
	ctx, cancel, err := s.ctx()
	if err != nil {
		return nil, err
	}
	defer cancel()
	rows, err := s.db.Query(ctx, `SELECT name, cron, queue, timezone, payload, created, last
		FROM hourglass_schedules ORDER BY name COLLATE "C"`)
	if err != nil {
		return nil, fmt.Errorf("hourglass: pgstore: schedules: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Schedule, error) {
		var sc store.Schedule
		err := r.Scan(&sc.Name, &sc.Cron, &sc.Queue, &sc.Timezone, &sc.Payload, &sc.Created, &sc.Last)
		return sc, err
	})
	if err != nil {
		return nil, fmt.Errorf("hourglass: pgstore: schedules: %w", err)
	}
	return out, nil
}

// NextJobID returns the lowest job id never used.
func (s *Store) NextJobID() (uint64, error) {
	ctx, cancel, err := s.ctx()
	if err != nil {
		return 0, err
	}
	defer cancel()
	var next int64
	if err := s.db.QueryRow(ctx, "SELECT next_job_id FROM hourglass_meta").Scan(&next); err != nil {
		return 0, fmt.Errorf("hourglass: pgstore: next job id: %w", err)
	}
	return uint64(next), nil
}
