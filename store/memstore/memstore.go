// Package memstore is a [store.Store] in memory: nothing survives the
// process. It is for tests of the broker's logic in virtual time
// (testing/synctest), where a store doing file I/O would stall the
// bubble's clock, and for trying the service without a disk.
package memstore

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"

	"github.com/hourglass-go/hourglass/store"
)

// Store is a store.Store in memory. It is safe for concurrent use.
type Store struct {
	mu        sync.RWMutex
	tasks     map[uint64]store.Task
	index     map[[2]string]uint64
	schedules map[string]store.Schedule
	queues    map[string]store.Queue // deep copies (see copyQueue)
	next      uint64
	hist      history
	deduped   map[[2]string]store.Deduped
}

// New returns an empty Store.
func New() *Store {
	return &Store{
		tasks:     make(map[uint64]store.Task),
		index:     make(map[[2]string]uint64),
		schedules: make(map[string]store.Schedule),
		queues:    make(map[string]store.Queue),
		next:      1,
		hist:      newHistory(),
		deduped:   make(map[[2]string]store.Deduped),
	}
}

// Commit applies b atomically: an update of a task not in the store fails
// the whole batch and changes nothing. It takes O(len(b.Ops)) time, plus
// O(h) for each PutFinished in a history of h records (see [history]).
func (s *Store) Commit(b *store.Batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Undo log: the old value of every task, index entry, schedule and
	// queue record a write touches, restored in reverse order if an op fails.
	var undo []func()
	setTask := func(job uint64, t store.Task, ok bool) {
		old, had := s.tasks[job]
		undo = append(undo, func() {
			if had {
				s.tasks[job] = old
			} else {
				delete(s.tasks, job)
			}
		})
		if ok {
			s.tasks[job] = t
		} else {
			delete(s.tasks, job)
		}
	}
	setIndex := func(k [2]string, job uint64) {
		old, had := s.index[k]
		undo = append(undo, func() {
			if had {
				s.index[k] = old
			} else {
				delete(s.index, k)
			}
		})
		if job != 0 {
			s.index[k] = job
		} else {
			delete(s.index, k)
		}
	}
	// unindex drops old's index entry if it still names old.
	unindex := func(old store.Task) {
		k := [2]string{old.Queue, old.ID}
		if s.index[k] == old.JobID {
			setIndex(k, 0)
		}
	}
	// The history's writes touch nothing a task op reads, and none of them
	// fails: they wait until every other op has succeeded, in their order.
	var hist []store.Op
	next := s.next
	for _, op := range b.Ops {
		t := op.Task
		switch op.Kind {
		case store.PutTask:
			if old, ok := s.tasks[t.JobID]; ok {
				unindex(old)
			}
			t.Payload = bytes.Clone(t.Payload)
			if t.Payload == nil {
				t.Payload = []byte{}
			}
			setTask(t.JobID, t, true)
			setIndex([2]string{t.Queue, t.ID}, t.JobID)
			next = max(next, t.JobID+1)
		case store.UpdateTask:
			old, ok := s.tasks[t.JobID]
			if !ok {
				for i := len(undo) - 1; i >= 0; i-- {
					undo[i]()
				}
				return fmt.Errorf("memstore: update of task %d, which is not in the store", t.JobID)
			}
			unindex(old)
			t.Payload = old.Payload
			setTask(t.JobID, t, true)
			setIndex([2]string{t.Queue, t.ID}, t.JobID)
		case store.DeleteTask:
			if old, ok := s.tasks[t.JobID]; ok {
				unindex(old)
				setTask(t.JobID, store.Task{}, false)
			}
		case store.PutSchedule:
			sc := op.Schedule
			sc.Payload = bytes.Clone(sc.Payload)
			old, had := s.schedules[sc.Name]
			undo = append(undo, func() {
				if had {
					s.schedules[sc.Name] = old
				} else {
					delete(s.schedules, sc.Name)
				}
			})
			s.schedules[sc.Name] = sc
		case store.DeleteSchedule:
			name := op.Schedule.Name
			if old, had := s.schedules[name]; had {
				undo = append(undo, func() { s.schedules[name] = old })
				delete(s.schedules, name)
			}
		case store.PutQueue:
			q := copyQueue(op.Queue)
			old, had := s.queues[q.Name]
			undo = append(undo, func() {
				if had {
					s.queues[q.Name] = old
				} else {
					delete(s.queues, q.Name)
				}
			})
			s.queues[q.Name] = q
		case store.DeleteQueue:
			name := op.Queue.Name
			if old, had := s.queues[name]; had {
				undo = append(undo, func() { s.queues[name] = old })
				delete(s.queues, name)
			}
		case store.PutAttempt, store.PutFinished, store.DeleteAttempt:
			hist = append(hist, op)
		case store.PutDeduped:
			d := op.Deduped
			k := [2]string{d.Queue, d.ID}
			old, had := s.deduped[k]
			undo = append(undo, func() {
				if had {
					s.deduped[k] = old
				} else {
					delete(s.deduped, k)
				}
			})
			s.deduped[k] = d
		default:
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
			return fmt.Errorf("memstore: op of unknown kind %d", op.Kind)
		}
	}
	for _, op := range hist {
		switch op.Kind {
		case store.PutAttempt:
			s.hist.putAttempt(op.Attempt)
		case store.DeleteAttempt:
			s.hist.deleteAttempt(op.Attempt.JobID, op.Attempt.N)
		default:
			s.hist.putFinished(op.Finished)
		}
	}
	s.next = max(next, b.NextJobID)
	return nil
}

// Task returns the task jobID.
func (s *Store) Task(jobID uint64) (store.Task, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t, ok := s.tasks[jobID]
	if !ok {
		return store.Task{}, store.ErrNotFound
	}
	t.Payload = bytes.Clone(t.Payload)
	return t, nil
}

// Records returns the records of jobs without payloads, in that order
// (JobID 0 for a job not in the store).
func (s *Store) Records(jobs []uint64) ([]store.Task, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]store.Task, len(jobs))
	for i, j := range jobs {
		if t, ok := s.tasks[j]; ok {
			t.Payload = nil
			out[i] = t
		}
	}
	return out, nil
}

// Lookup returns the job id of (queue, id).
func (s *Store) Lookup(queue, id string) (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	j, ok := s.index[[2]string{queue, id}]
	if !ok {
		return 0, store.ErrNotFound
	}
	return j, nil
}

// sorted returns the tasks (without payloads) for which keep is true, by
// job id. It takes O(n log n).
func (s *Store) sorted(keep func(store.Task) bool) []store.Task {
	s.mu.RLock()
	out := make([]store.Task, 0)
	for _, t := range s.tasks {
		if keep(t) {
			t.Payload = nil
			out = append(out, t)
		}
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].JobID < out[j].JobID })
	return out
}

// List returns a page of queue's tasks.
func (s *Store) List(queue string, after uint64, limit int) ([]store.Task, error) {
	out := s.sorted(func(t store.Task) bool { return t.Queue == queue && t.JobID > after })
	if len(out) > limit {
		out = out[:max(limit, 0)]
	}
	return out, nil
}

// Recover calls fn for every task by job id.
func (s *Store) Recover(fn func(store.Task) error) error {
	for _, t := range s.sorted(func(store.Task) bool { return true }) {
		if err := fn(t); err != nil {
			return err
		}
	}
	return nil
}

// Schedules returns the schedules by name.
func (s *Store) Schedules() ([]store.Schedule, error) {
	s.mu.RLock()
	out := make([]store.Schedule, 0, len(s.schedules))
	for _, sc := range s.schedules {
		sc.Payload = bytes.Clone(sc.Payload)
		out = append(out, sc)
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// NextJobID returns the lowest job id never used.
func (s *Store) NextJobID() (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.next, nil
}

// Close does nothing; the Store stays readable.
func (s *Store) Close() error { return nil }

// Queues returns every queue record, by name, as copies the caller may
// change. It takes O(n log n) for n records.
func (s *Store) Queues() ([]store.Queue, error) {
	s.mu.RLock()
	out := make([]store.Queue, 0, len(s.queues))
	for _, q := range s.queues {
		out = append(out, copyQueue(q))
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// copyQueue returns q with its policy's Retry, Rate and Push (with its
// headers) copied, so that neither the caller nor the store can change the
// other's through them.
func copyQueue(q store.Queue) store.Queue {
	if p := q.Policy.Push; p != nil {
		c := *p
		c.Headers = maps.Clone(p.Headers)
		q.Policy.Push = &c
	}
	if r := q.Policy.Retry; r != nil {
		c := *r
		q.Policy.Retry = &c
	}
	if r := q.Policy.Rate; r != nil {
		c := *r
		q.Policy.Rate = &c
	}
	q.KeyBuckets = slices.Clone(q.KeyBuckets)
	return q
}

// Attempts returns the attempt records of job, by N. It takes O(a) for a
// records of job.
func (s *Store) Attempts(job uint64) ([]store.Attempt, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.hist.attemptsOf(job), nil
}

// Deduped returns the finished-id record of (queue, id). It takes O(1).
func (s *Store) Deduped(queue, id string) (store.Deduped, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	d, ok := s.deduped[[2]string{queue, id}]
	if !ok {
		return store.Deduped{}, store.ErrNotFound
	}
	return d, nil
}

// PruneDeduped removes up to max finished-id records whose Until is
// before before, soonest first. It takes O(n log n) for n records, under
// the write lock: memstore is for tests.
func (s *Store) PruneDeduped(before int64, max int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var old []store.Deduped
	for _, d := range s.deduped {
		if d.Until < before {
			old = append(old, d)
		}
	}
	slices.SortFunc(old, func(a, b store.Deduped) int { return cmp.Compare(a.Until, b.Until) })
	old = old[:min(len(old), max)]
	for _, d := range old {
		delete(s.deduped, [2]string{d.Queue, d.ID})
	}
	return len(old), nil
}

// LastFinished returns the newest Finished record of id in queue (the one
// put last), or store.ErrNotFound. It takes O(1).
func (s *Store) LastFinished(queue, id string) (store.Finished, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.hist.lastFinished(queue, id)
}

// History returns up to limit Finished records of queue with Seq below
// before (0: any), newest first, of outcome ("" any). It takes O(log h +
// k) for h records of queue and k of them looked at.
func (s *Store) History(queue, outcome string, before uint64, limit int) ([]store.Finished, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.hist.page(queue, outcome, before, limit), nil
}

// HistorySeq returns the highest Seq committed, pruned ones included.
func (s *Store) HistorySeq() (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.hist.seq, nil
}

// PruneHistory removes up to max Finished records older than before,
// oldest first, with their jobs' attempts. It takes O(max × h) for h
// records in the history (slices shift), under the write lock.
func (s *Store) PruneHistory(before int64, max int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hist.prune(before, max), nil
}
