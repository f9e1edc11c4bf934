package service

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hourglass-go/hourglass/task"
)

// This file is the operator's console (issue 44): finding a queue's tasks
// by a [Filter], and acting on every task a filter matches in bulk
// ([Action]) — delete, kick, retry or move them.
//
// Finding is one engine operation, FindTasks: a page of the tasks of a
// queue matching a filter, in due order ([Cursor]: due time, then job id)
// after a cursor, that reads at most [FindScan] tasks, so that a page is
// answered in bounded time on a queue of any size; a selective filter may
// then answer a short page, or none, with a cursor to go on from. Each
// engine keeps its queues' tasks ordered by (due, job id): the embedded
// one in memory (broker/dueorder.go), a cluster in an index of
// PostgreSQL's (migration 015).
//
// Acting is a loop here, the same for both engines: a page of up to
// [BulkChunk] matching tasks at a time, then each task's action by the
// engine's own operation of one task (Delete, Kick, conditioned on its
// job id; MoveTask), up to [bulkParallel] at once so that the engine commits them
// in groups. Each task's action is atomic and durable on its own, so a
// crash part-way leaves every task in its old state or its new one, and
// the other work of the engine goes on between them: no lock is held
// across tasks. The cursor makes the loop act on each task once: every
// action leaves its task where it was in the due order or earlier (a
// delete or a move takes it out of the queue; a kick or a retry makes its
// due time the earlier of its own and now), so behind the cursor, never
// to be met again by this pass; a delayed task retried moves from its
// place, at or before the cursor, to now, which is before that place.
// Another client's change during the pass may move a task: one moved
// later than the cursor is met again and acted on only if the filter
// still matches it (dead again after a new failure, say); one moved
// earlier is left to the next pass, as a task put during the pass may be.
// Between a task's match and its action the task may change: an action is
// refused by the engine's rules then (a kick of a task no longer dead, a
// delete of a task since reserved) and counted as not changed.

// Filter selects tasks of a queue: those matching every field given (the
// zero value of a field matches any task).
type Filter struct {
	// State is the task's state (0: any).
	State task.State
	// Error is a substring of the task's last error.
	Error string
	// DueAfter and DueBefore bound the task's due time: at or after
	// DueAfter, before DueBefore.
	DueAfter, DueBefore time.Time
	// CreatedAfter and CreatedBefore bound when the task was put, as the
	// due bounds.
	CreatedAfter, CreatedBefore time.Time
	// IDPrefix is a prefix of the task's id.
	IDPrefix string
	// Key is the task's key (task.PutRequest.Key); "" matches any key.
	Key string
}

// Limits of a filter and of bulk work.
const (
	// MaxFilterText bounds Filter.Error and Filter.IDPrefix (bytes).
	MaxFilterText = task.MaxNameLen
	// FindScan bounds the tasks one page of FindTasks reads, whatever
	// the size of the queue. An engine may read fewer: in due order a
	// queue's records are scattered through the store, a block or a heap
	// page each, so both engines read a quarter of it from the store
	// (broker.findRecords, cluster's findWindow), which is tens of
	// milliseconds at 10M tasks (docs/BENCHMARKS.md, find).
	FindScan = 20 * task.MaxList
	// BulkChunk is the number of matching tasks a bulk action takes at a
	// time.
	BulkChunk = task.MaxList
	// MaxClashes bounds the ids of a move's clashes that its result
	// names.
	MaxClashes = 100
	// bulkParallel is how many tasks' actions are under way at once: an
	// engine commits concurrent writes together, so a chunk costs a few
	// commits rather than one each; 8 leaves most of a cluster node's
	// connections (24, serve_postgres.go) to other work.
	bulkParallel = 8
)

// IsZero reports whether f matches every task.
func (f Filter) IsZero() bool { return f == Filter{} }

// Match reports whether t matches f. It takes O(len(f.Error) ×
// len(t.LastError)) time and no lock.
func (f Filter) Match(t task.Task) bool {
	switch {
	case f.State != 0 && t.State != f.State,
		f.IDPrefix != "" && !strings.HasPrefix(t.ID, f.IDPrefix),
		f.Key != "" && t.Key != f.Key,
		f.Error != "" && !strings.Contains(t.LastError, f.Error),
		!f.DueAfter.IsZero() && t.Due.Before(f.DueAfter),
		!f.DueBefore.IsZero() && !t.Due.Before(f.DueBefore),
		!f.CreatedAfter.IsZero() && t.Created.Before(f.CreatedAfter),
		!f.CreatedBefore.IsZero() && !t.Created.Before(f.CreatedBefore):
		return false
	}
	return true
}

// CheckFilter returns an error wrapping task.ErrInvalid, naming the
// query parameter that is wrong (state, error, id_prefix, key, due_after,
// due_before, created_after, created_before), if f is not a valid
// filter: a state of task's, texts of at most MaxFilterText bytes, a
// valid key (CheckKey), times
// in 1970 to 2262, and each after before its before.
func CheckFilter(f Filter) error {
	if f.State > task.Dead {
		return fmt.Errorf("%w: state %d: want delayed, ready, reserved or dead", task.ErrInvalid, f.State)
	}
	if len(f.Error) > MaxFilterText {
		return fmt.Errorf("%w: error: over %d bytes", task.ErrInvalid, MaxFilterText)
	}
	if len(f.IDPrefix) > MaxFilterText {
		return fmt.Errorf("%w: id_prefix: over %d bytes", task.ErrInvalid, MaxFilterText)
	}
	if err := CheckKey(f.Key); err != nil {
		return err
	}
	for _, b := range []struct {
		name string
		t    time.Time
	}{{"due_after", f.DueAfter}, {"due_before", f.DueBefore}, {"created_after", f.CreatedAfter}, {"created_before", f.CreatedBefore}} {
		if y := b.t.Year(); !b.t.IsZero() && (y < 1970 || y > 2262) {
			return fmt.Errorf("%w: %s %s out of range", task.ErrInvalid, b.name, b.t.UTC().Format(time.RFC3339Nano))
		}
	}
	if !f.DueAfter.IsZero() && !f.DueBefore.IsZero() && !f.DueAfter.Before(f.DueBefore) {
		return fmt.Errorf("%w: due_after must be before due_before", task.ErrInvalid)
	}
	if !f.CreatedAfter.IsZero() && !f.CreatedBefore.IsZero() && !f.CreatedAfter.Before(f.CreatedBefore) {
		return fmt.Errorf("%w: created_after must be before created_before", task.ErrInvalid)
	}
	return nil
}

// CheckFind checks a page of up to limit tasks of queue matching f:
// CheckFilter, and limit 1 to task.MaxList.
func CheckFind(queue string, f Filter, limit int) error {
	if err := CheckQueue(queue); err != nil {
		return err
	}
	if limit < 1 || limit > task.MaxList {
		return fmt.Errorf("%w: limit %d: want 1 to %d", task.ErrInvalid, limit, task.MaxList)
	}
	return CheckFilter(f)
}

// Action is what a bulk request does to each task it matches.
type Action uint8

// The actions of a bulk request.
const (
	// Delete deletes the task. A reserved task is deleted only by a
	// filter on state reserved; otherwise one reserved since its match
	// is left to its worker.
	Delete Action = iota + 1
	// Kick makes a dead task ready (the addressed queue's: a task dead
	// in a dead-letter queue is kicked there).
	Kick
	// Retry makes a dead or delayed task ready now.
	Retry
	// Move moves the task, not reserved, into another queue, keeping its
	// id, job id, payload, priority, due time, attempts and state; a
	// task of the same id in the target is a clash, and stays.
	Move
)

// String returns the action's name on the wire.
func (a Action) String() string {
	switch a {
	case Delete:
		return "delete"
	case Kick:
		return "kick"
	case Retry:
		return "retry"
	case Move:
		return "move"
	}
	return "invalid"
}

// BulkRequest is an action on every task of a queue a filter matches.
type BulkRequest struct {
	Action Action
	Filter Filter
	// To is the target queue of a Move.
	To string
	// DryRun only counts the tasks matched, changing nothing.
	DryRun bool
}

// BulkResult is what a bulk request did.
type BulkResult struct {
	// Matched counts the tasks the filter matched.
	Matched int
	// Changed counts those the action changed (0 for a dry run).
	Changed int
	// Clashes names the first MaxClashes tasks a move left in place
	// because the target had a task of their id; Clashed counts them all.
	Clashes []string
	Clashed int
}

// ErrClash is a move's answer for a task whose id the target queue
// already has: the task stays where it is.
var ErrClash = fmt.Errorf("%w: the target queue has a task of that id", task.ErrState)

// CheckBulk checks a bulk request on queue.
func CheckBulk(queue string, r BulkRequest) error {
	if err := CheckQueue(queue); err != nil {
		return err
	}
	if r.Action < Delete || r.Action > Move {
		return fmt.Errorf("%w: no action %d", task.ErrInvalid, r.Action)
	}
	if r.Action == Move {
		if r.To == "" {
			return fmt.Errorf("%w: to: a move needs a target queue", task.ErrInvalid)
		}
		if err := CheckQueue(r.To); err != nil {
			return fmt.Errorf("%w: to: %s", task.ErrInvalid, strings.TrimPrefix(err.Error(), task.ErrInvalid.Error()+": "))
		}
		if r.To == queue {
			return fmt.Errorf("%w: to: a move needs another queue than %q", task.ErrInvalid, queue)
		}
	} else if r.To != "" {
		return fmt.Errorf("%w: to: only a move has a target queue", task.ErrInvalid)
	}
	return CheckFilter(r.Filter)
}

// bulk runs r on queue over e: see the top of this file. It returns what
// it did up to an error, with the error: a failing engine, or ctx done.
func bulk(ctx context.Context, e Engine, queue string, r BulkRequest) (BulkResult, error) {
	var res BulkResult
	var after Cursor
	for {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		page, next, err := e.FindTasks(ctx, queue, r.Filter, after, BulkChunk)
		if err != nil {
			return res, err
		}
		res.Matched += len(page)
		if !r.DryRun && len(page) > 0 {
			if err := act(ctx, e, queue, r, page, &res); err != nil {
				return res, err
			}
		}
		if next.IsZero() {
			return res, nil
		}
		after = next
	}
}

// act does r's action on each task of page, up to bulkParallel at once,
// and adds to res what changed. It returns the first error that is not
// one task's refusal (task.ErrNotFound, task.ErrState, task.ErrLease).
func act(ctx context.Context, e Engine, queue string, r BulkRequest, page []task.Task, res *BulkResult) error {
	errs := make([]error, len(page))
	sem := make(chan struct{}, bulkParallel)
	var wg sync.WaitGroup
	for i := range page {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = actOne(ctx, e, queue, r, page[i])
		}()
	}
	wg.Wait()
	for i, err := range errs {
		switch {
		case err == nil:
			res.Changed++
		case errors.Is(err, ErrClash):
			res.Clashed++
			if len(res.Clashes) < MaxClashes {
				res.Clashes = append(res.Clashes, page[i].ID)
			}
		case errors.Is(err, task.ErrNotFound), errors.Is(err, task.ErrState), errors.Is(err, task.ErrLease):
		default:
			return err
		}
	}
	return nil
}

// actOne does r's action on t, by the engine's operation on one task.
func actOne(ctx context.Context, e Engine, queue string, r BulkRequest, t task.Task) error {
	switch r.Action {
	case Delete:
		return e.Delete(ctx, queue, t.ID, DeleteOptions{Job: t.JobID, Unreserved: r.Filter.State != task.Reserved})
	case Kick:
		return e.Kick(ctx, queue, t.ID, KickOptions{Job: t.JobID})
	case Retry:
		if t.State != task.Dead && t.State != task.Delayed {
			return task.ErrState
		}
		return e.Kick(ctx, queue, t.ID, KickOptions{Job: t.JobID, Delayed: true})
	case Move:
		return e.MoveTask(ctx, queue, t.JobID, r.To)
	}
	return fmt.Errorf("%w: no action %d", task.ErrInvalid, r.Action)
}

func (f *front) FindTasks(ctx context.Context, queue string, fl Filter, after Cursor, limit int) ([]task.Task, Cursor, error) {
	if err := CheckFind(queue, fl, limit); err != nil {
		return nil, Cursor{}, err
	}
	return f.e.FindTasks(ctx, queue, fl, after, limit)
}

func (f *front) Bulk(ctx context.Context, queue string, r BulkRequest) (BulkResult, error) {
	if err := CheckBulk(queue, r); err != nil {
		return BulkResult{}, err
	}
	return bulk(ctx, f.e, queue, r)
}
