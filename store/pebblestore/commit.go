package pebblestore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hourglass-go/hourglass/store"
)

// Commit applies b atomically and durably, as one Pebble batch with one
// WAL sync: it returns nil only once the WAL holding the whole batch is
// fsynced. An empty batch (no ops, and no NextJobID above the store's) is
// a no-op that touches no disk.
//
// Writes apply in order and a later write of a key wins: Commit keeps, for
// the batch being built, what its earlier ops did to each task and index
// entry, and reads the store only for what they did not touch. It reads
// the record each put, update and delete replaces (a Get, skipped for a
// job id above every one ever put: a new task reads nothing), so that:
//   - a put or update that moves a task to another queue or id removes its
//     old index and list entries;
//   - an update of a task not in the store fails with an error wrapping
//     [store.ErrNotFound] (a put is needed to create one);
//   - a delete removes the recorded index and list entries (whatever
//     Queue and ID the op carries), and is a no-op for a task not in the
//     store;
//   - a removal of an index entry (delete, move) reads it first and leaves
//     it if it names another task.
//
// Commit does not check that a put's (queue, id) is free: a put or update
// that gives a task the (queue, id) of another live task takes the index
// entry (Lookup then finds the later task, unless the earlier one's id is
// its own job id, which Lookup tries first; the earlier one keeps its
// record and list entry, and its deletion leaves the entry alone). The
// broker never does this (it looks an id up before a put, and generated
// ids need no look-up), and the check would cost a read per new task,
// which the broker takes care to avoid: once the tasks outgrow the block
// cache that read misses it, and a bulk load spends most of its time
// there.
//
// A failing op fails the whole batch, and the store is unchanged. Cost:
// O(len(b.Ops)) Pebble writes; a Get for each update, two for each
// delete (record and index entry); one fsync.
//
// Commit is safe for concurrent use. Commits are built one at a time
// under a mutex, each seeing the ones before it, and handed to Pebble with
// ApplyNoSyncWait, which returns once the batch is applied to the memtable
// and visible; the mutex is released and the fsync awaited after it. So
// concurrent Commits share fsyncs in Pebble's commit pipeline (commit.go
// in Pebble: one WAL sync covers every batch written before it);
// BenchmarkStore_Commit/batch=1/parallel counts the fsyncs a Commit
// takes. Pebble
// marks ApplyNoSyncWait experimental; it has the visibility of Apply with
// Sync (Pebble shows a synced batch to readers before its fsync
// completes in both), and CockroachDB commits through it.
//
// If Pebble fails to write or sync the WAL, the store is failed: this and
// every later Commit return the error (package doc, "Durability").
func (s *Store) Commit(b *store.Batch) error {
	wait, err := s.Apply(b)
	if err != nil {
		return err
	}
	return wait()
}

// Apply is the first half of Commit: it applies b (visible to reads, after
// every batch applied before it) and returns a wait that blocks until b is
// durable and returns what Commit would. Batches applied one after another
// share the fsyncs their waits await, so a caller can apply the next batch
// while the last one syncs (see [store.Pipeliner]).
func (s *Store) Apply(b *store.Batch) (wait func() error, err error) {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	if p := s.failed.Load(); p != nil {
		return nil, *p
	}
	if s.holding.Load() {
		s.releaseCompactions()
	}
	done := func() error { return nil }

	s.commitMu.Lock()
	if len(b.Ops) == 0 && b.NextJobID <= s.pendingNext {
		s.commitMu.Unlock()
		return done, nil
	}
	pb := s.db.NewBatch()
	next, seq, err := s.w.build(s, pb, b)
	if err != nil || pb.Empty() {
		s.commitMu.Unlock()
		_ = pb.Close()
		if err != nil {
			return nil, err
		}
		return done, nil
	}
	if !s.sync {
		err = s.db.Apply(pb, pebble.NoSync)
		if err == nil {
			s.pendingNext, s.pendingSeq = next, seq
		}
		s.commitMu.Unlock()
		if err != nil {
			return nil, s.fail(pebbleErr("commit", err))
		}
		raise(&s.next, next)
		raise(&s.histSeq, seq)
		return done, pb.Close()
	}
	if err := s.db.ApplyNoSyncWait(pb, pebble.Sync); err != nil {
		s.commitMu.Unlock()
		return nil, s.fail(pebbleErr("commit", err))
	}
	s.pendingNext, s.pendingSeq = next, seq
	s.commitMu.Unlock()

	return func() error {
		if err := pb.SyncWait(); err != nil {
			return s.fail(pebbleErr("commit: WAL sync", err))
		}
		raise(&s.next, next)
		raise(&s.histSeq, seq)
		return pb.Close()
	}, nil
}

// raise raises a synced high-water mark (Store.next, Store.histSeq) to v,
// if below. Commits may finish their syncs out of order.
func raise(mark *atomic.Uint64, v uint64) {
	for {
		cur := mark.Load()
		if v <= cur || mark.CompareAndSwap(cur, v) {
			return
		}
	}
}

// writer turns a [store.Batch] into a Pebble batch. It is used under
// Store.commitMu only, and keeps its maps between commits to save
// allocations.
type writer struct {
	s  *Store
	pb *pebble.Batch
	// tasks holds, for each task an op of this batch wrote, its queue and
	// id (live) or that it was deleted.
	tasks map[uint64]taskEntry
	// owners holds, for each index key this batch wrote, the job id it
	// names (0: deleted).
	owners map[string]uint64
	// maxJob is the highest job id put or updated by this batch.
	maxJob uint64
	// maxSeq is the highest Seq of a Finished record this batch puts.
	maxSeq uint64
	// key and val are scratch buffers.
	key, val []byte
}

// taskEntry is what a commit needs to know of a task's current record: is
// it there, and under which index and list keys.
type taskEntry struct {
	live      bool
	queue, id string
}

func (w *writer) init() {
	w.tasks = make(map[uint64]taskEntry)
	w.owners = make(map[string]uint64)
}

// maxKeptEntries bounds the entries of the writer's maps that reset
// clears for the next commit: clearing a Go map costs time in its
// capacity, not in its entries, so maps that a large batch (a bulk put)
// grew are dropped instead; cleared, they would cost each small commit
// after (a worker's acks) their whole capacity.
const maxKeptEntries = 256

// reset empties the maps for the next commit.
func (w *writer) reset() {
	if len(w.tasks) > maxKeptEntries || len(w.owners) > maxKeptEntries {
		w.init()
		return
	}
	clear(w.tasks)
	clear(w.owners)
}

// build writes the ops of b into pb and returns the job id and history
// high-water marks after b. On error pb holds a part of b and must be
// dropped.
func (w *writer) build(s *Store, pb *pebble.Batch, b *store.Batch) (next, seq uint64, err error) {
	w.s, w.pb, w.maxJob, w.maxSeq = s, pb, 0, 0
	defer func() {
		w.reset()
		w.s, w.pb = nil, nil
	}()
	for i := range b.Ops {
		op := &b.Ops[i]
		switch op.Kind {
		case store.PutTask:
			err = w.putTask(&op.Task, true)
		case store.UpdateTask:
			err = w.putTask(&op.Task, false)
		case store.DeleteTask:
			err = w.deleteTask(&op.Task)
		case store.PutSchedule:
			sc := &op.Schedule
			w.key = scheduleKey(w.key[:0], sc.Name)
			w.val = seal(w.key, appendSchedule(w.val[:0], sc))
			err = pb.Set(w.key, w.val, nil)
		case store.DeleteSchedule:
			w.key = scheduleKey(w.key[:0], op.Schedule.Name)
			err = pb.Delete(w.key, nil)
		case store.PutQueue:
			q := &op.Queue
			w.key = queueRecordKey(w.key[:0], q.Name)
			w.val = seal(w.key, appendQueue(w.val[:0], q))
			err = pb.Set(w.key, w.val, nil)
		case store.DeleteQueue:
			w.key = queueRecordKey(w.key[:0], op.Queue.Name)
			err = pb.Delete(w.key, nil)
		case store.PutAttempt:
			err = w.putAttempt(&op.Attempt)
		case store.DeleteAttempt:
			w.key = attemptKey(w.key[:0], op.Attempt.JobID, op.Attempt.N)
			err = pb.Delete(w.key, nil)
		case store.PutFinished:
			err = w.putFinished(&op.Finished)
		case store.PutDeduped:
			err = w.putDeduped(&op.Deduped)
		default:
			err = fmt.Errorf("unknown op kind %d", op.Kind)
		}
		if err != nil {
			return 0, 0, fmt.Errorf("hourglass: commit: op %d of %d: %w", i, len(b.Ops), err)
		}
	}
	next = max(s.pendingNext, b.NextJobID)
	if w.maxJob >= next {
		next = w.maxJob + 1
	}
	if next > s.pendingNext {
		if err := pb.Set(keyNextJob, seal(keyNextJob, appendUint64(nil, next)), nil); err != nil {
			return 0, 0, pebbleErr("commit", err)
		}
	}
	seq = max(s.pendingSeq, w.maxSeq)
	if seq > s.pendingSeq {
		if err := pb.Set(keyHistorySeq, seal(keyHistorySeq, appendUint64(nil, seq)), nil); err != nil {
			return 0, 0, pebbleErr("commit", err)
		}
	}
	return next, seq, nil
}

// putTask writes t's record, its index and list entries if they moved or
// are new, and its payload if withPayload (a put; an update leaves it).
func (w *writer) putTask(t *store.Task, withPayload bool) error {
	job := t.JobID
	if job == 0 {
		return errors.New("task with job id 0 (job ids start at 1)")
	}
	if t.State != store.Waiting && t.State != store.Reserved && t.State != store.Dead {
		return fmt.Errorf("task %d: invalid state %d", job, t.State)
	}
	// A put of a new task reads nothing (its job id is above every one
	// put before); nor does an update, which keeps the task's queue and id
	// (store.UpdateTask), so its index and list entries stay.
	old := taskEntry{live: !withPayload, queue: t.Queue, id: t.ID}
	if withPayload {
		var err error
		if old, err = w.task(job); err != nil {
			return err
		}
	}
	if moved := !old.live || old.queue != t.Queue || old.id != t.ID; moved {
		if old.live {
			if err := w.unindex(job, old); err != nil {
				return err
			}
		}
		// The index entry is set without reading it first: if it named
		// another live task, that task loses it (see Commit). A task whose
		// id is its job id has none (implicitID).
		if !implicitID(t.ID, job) {
			w.key = indexKey(w.key[:0], t.Queue, t.ID)
			w.owners[string(w.key)] = job
			if err := w.pb.Set(w.key, seal(w.key, appendUint64(w.val[:0], job)), nil); err != nil {
				return err
			}
		}
		w.key = listKey(w.key[:0], t.Queue, job)
		if err := w.pb.Set(w.key, seal(w.key, w.val[:0]), nil); err != nil {
			return err
		}
	}
	w.key = taskKey(w.key[:0], kindMeta, job)
	w.val = seal(w.key, appendMeta(w.val[:0], t))
	if err := w.pb.Set(w.key, w.val, nil); err != nil {
		return err
	}
	if withPayload {
		// Written in place in the batch: a payload is copied once.
		w.key = taskKey(w.key[:0], kindPayload, job)
		op := w.pb.SetDeferred(len(w.key), len(t.Payload)+crcLen)
		copy(op.Key, w.key)
		n := copy(op.Value, t.Payload)
		binary.LittleEndian.PutUint32(op.Value[n:], checksum(w.key, t.Payload))
		if err := op.Finish(); err != nil {
			return err
		}
	}
	w.tasks[job] = taskEntry{live: true, queue: t.Queue, id: t.ID}
	w.maxJob = max(w.maxJob, job)
	return nil
}

// deleteTask removes task t.JobID's record, payload, list entry and
// index entry (if it still names the task), under the queue and id t
// carries (store.DeleteTask): nothing is read, except an index entry an
// earlier op of the batch wrote. A task not in the store is a no-op.
func (w *writer) deleteTask(t *store.Task) error {
	job := t.JobID
	old := taskEntry{live: true, queue: t.Queue, id: t.ID}
	if e, ok := w.tasks[job]; ok {
		old = e
	}
	if !old.live {
		return nil
	}
	if err := w.unindexTrusted(job, old); err != nil {
		return err
	}
	w.key = taskKey(w.key[:0], kindMeta, job)
	if err := w.pb.Delete(w.key, nil); err != nil {
		return err
	}
	w.key = taskKey(w.key[:0], kindPayload, job)
	if err := w.pb.Delete(w.key, nil); err != nil {
		return err
	}
	w.tasks[job] = taskEntry{}
	return nil
}

// unindex removes the list entry of job under old.queue and the index
// entry of (old.queue, old.id) if it names job.
func (w *writer) unindex(job uint64, old taskEntry) error {
	w.key = listKey(w.key[:0], old.queue, job)
	if err := w.pb.Delete(w.key, nil); err != nil || implicitID(old.id, job) {
		return err
	}
	w.key = indexKey(w.key[:0], old.queue, old.id)
	owner, err := w.owner(w.key)
	if err != nil || owner != job {
		return err
	}
	w.owners[string(w.key)] = 0
	return w.pb.Delete(w.key, nil)
}

// unindexTrusted removes the list entry of job under old.queue and the
// index entry of (old.queue, old.id), reading nothing: the entry names
// job unless an earlier op of this batch gave it to another task.
func (w *writer) unindexTrusted(job uint64, old taskEntry) error {
	w.key = listKey(w.key[:0], old.queue, job)
	if err := w.pb.Delete(w.key, nil); err != nil || implicitID(old.id, job) {
		return err
	}
	w.key = indexKey(w.key[:0], old.queue, old.id)
	if owner, ok := w.owners[string(w.key)]; ok && owner != job {
		return nil
	}
	w.owners[string(w.key)] = 0
	return w.pb.Delete(w.key, nil)
}

// task returns what the batch so far leaves of task job: from an earlier
// op of the batch, else from the store. A job id at or above the
// high-water mark was never put, which saves the Get for new tasks.
func (w *writer) task(job uint64) (taskEntry, error) {
	if e, ok := w.tasks[job]; ok {
		return e, nil
	}
	if job >= w.s.pendingNext {
		return taskEntry{}, nil
	}
	key := taskKey(w.key[:0], kindMeta, job)
	body, found, err := w.s.get(key)
	if err != nil || !found {
		return taskEntry{}, err
	}
	var t store.Task
	if err := decodeMeta(body, &t, nil); err != nil {
		return taskEntry{}, corrupt(key, "%v", err)
	}
	return taskEntry{live: true, queue: t.Queue, id: t.ID}, nil
}

// owner returns the job id the index key names after the batch so far, 0
// for none.
func (w *writer) owner(key []byte) (uint64, error) {
	if job, ok := w.owners[string(key)]; ok {
		return job, nil
	}
	body, found, err := w.s.get(key)
	if err != nil || !found {
		return 0, err
	}
	job, err := decodeUint64(body)
	if err != nil {
		return 0, corrupt(key, "%v", err)
	}
	return job, nil
}
