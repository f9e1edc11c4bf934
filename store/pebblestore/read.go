package pebblestore

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/hourglass-go/hourglass/store"
)

// Records returns the records of jobs without payloads, in that order
// (JobID 0 for a job not in the store). It reads them in job id order
// through one iterator over a snapshot, a prefix seek each, so that
// records in one block (job ids put at about the same time, package doc,
// "Layout") cost one block read, and the seeks move forward only. It
// takes O(len(jobs) log len(jobs)) besides the seeks.
func (s *Store) Records(jobs []uint64) ([]store.Task, error) {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	out := make([]store.Task, len(jobs))
	if len(jobs) == 0 {
		return out, nil
	}
	order := make([]int, len(jobs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(jobs[a], jobs[b]) })
	snap := s.db.NewSnapshot()
	defer snap.Close()
	metas, err := snap.NewIter(&pebble.IterOptions{LowerBound: jobLower, UpperBound: jobUpper})
	if err != nil {
		return nil, pebbleErr("read records", err)
	}
	defer metas.Close()
	var kbuf [taskKeyLen]byte
	for _, i := range order {
		key := taskKey(kbuf[:0], kindMeta, jobs[i])
		body, found, err := seekValue(metas, key)
		if err != nil {
			return nil, err
		}
		if !found {
			continue
		}
		out[i].JobID = jobs[i]
		if err := decodeMeta(body, &out[i], nil); err != nil {
			return nil, corrupt(key, "%v", err)
		}
	}
	return out, nil
}

// Task returns the task with jobID, payload included, or
// [store.ErrNotFound] itself (not wrapped: callers compare with ==). When
// the record reads but the payload is damaged, it returns the record
// (Payload nil) with the error, which wraps [store.ErrCorrupt]: the
// caller can still settle the task (the broker makes it dead). Cost:
// two Gets (bloom-filtered) and a copy of the payload. A task deleted
// between the two is not found, as if deleted before: a payload never
// changes while its record lives.
// Task is safe for concurrent use.
func (s *Store) Task(jobID uint64) (store.Task, error) {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return store.Task{}, ErrClosed
	}
	// Two point reads rather than an iterator: a Get consults the bloom
	// filters and opens no merged iterator over every level, which made a
	// reserve's read half of the server's CPU once the store outgrew the
	// block cache (docs/BENCHMARKS.md, beanstalk).
	var kbuf [taskKeyLen]byte
	key := taskKey(kbuf[:0], kindMeta, jobID)
	t := store.Task{JobID: jobID}
	body, found, err := s.get(key)
	if err != nil {
		return store.Task{}, err
	}
	if !found {
		return store.Task{}, store.ErrNotFound
	}
	if err := decodeMeta(body, &t, nil); err != nil {
		return store.Task{}, corrupt(key, "%v", err)
	}
	key = taskKey(kbuf[:0], kindPayload, jobID)
	if t.Payload, found, err = s.get(key); err != nil {
		t.Payload = nil
		return t, err
	}
	if !found {
		// Deleted since the record was read, or lost: read the record again.
		if _, still, err := s.get(taskKey(nil, kindMeta, jobID)); err != nil || still {
			if err == nil {
				err = corrupt(key, "missing for a recorded task")
			}
			return store.Task{}, err
		}
		return store.Task{}, store.ErrNotFound
	}
	return t, nil
}

// Tasks reads the tasks jobs names (job ids in increasing order), payloads
// included, in one snapshot of the store, and calls f with each task it
// finds, in order; a job not in the store, or whose record or payload
// fails to read, is passed over (Task reports such a task's error). It
// stops at f's first false. It is made for reads ahead of need (the
// broker's records kept for reserves): one iterator seeks from key to
// key in increasing order, first every record and then every payload,
// and keys this close to each other (an era's records, then its
// payloads, side by side: package doc, "Layout") are mostly reached by
// Pebble with a step of the iterator rather than a seek from the top of
// every level, as each Get of Task does. Tasks is safe for concurrent
// use.
func (s *Store) Tasks(jobs []uint64, f func(store.Task) bool) error {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	if len(jobs) == 0 {
		return nil
	}
	lower := taskKey(nil, kindMeta, jobs[0])
	upper := eraKey(nil, jobs[len(jobs)-1], kindList+1)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return pebbleErr("read tasks", err)
	}
	defer it.Close()
	var kbuf [taskKeyLen]byte
	tasks := make([]store.Task, 0, len(jobs))
	for _, job := range jobs {
		key := taskKey(kbuf[:0], kindMeta, job)
		body, found, err := seekGEValue(it, key)
		if err != nil || !found {
			continue
		}
		t := store.Task{JobID: job}
		if decodeMeta(body, &t, nil) != nil {
			continue
		}
		tasks = append(tasks, t)
	}
	for i := range tasks {
		t := &tasks[i]
		key := taskKey(kbuf[:0], kindPayload, t.JobID)
		body, found, err := seekGEValue(it, key)
		if err != nil || !found {
			continue
		}
		t.Payload = append([]byte(nil), body...) // as Task: nil when empty
		if !f(*t) {
			return nil
		}
	}
	return it.Error()
}

// seekGEValue positions it at the first key at or after key and returns
// the checked body of key's value (valid until it moves), and whether key
// is there. Seeks in increasing order let Pebble step rather than seek.
func seekGEValue(it *pebble.Iterator, key []byte) ([]byte, bool, error) {
	return seekTo(it, key, false)
}

// seekValue positions it at key and returns the checked body of its value
// (valid until it moves), and whether key is there.
func seekValue(it *pebble.Iterator, key []byte) ([]byte, bool, error) {
	return seekTo(it, key, true)
}

// seekTo is seekValue (prefix: SeekPrefixGE) and seekGEValue (SeekGE).
func seekTo(it *pebble.Iterator, key []byte, prefix bool) ([]byte, bool, error) {
	var at bool
	if prefix {
		at = it.SeekPrefixGE(key)
	} else {
		at = it.SeekGE(key)
	}
	if !at || !bytes.Equal(it.Key(), key) {
		if err := it.Error(); err != nil {
			return nil, false, pebbleErr("read "+describe(key), err)
		}
		return nil, false, nil
	}
	v, err := it.ValueAndErr()
	if err != nil {
		return nil, false, pebbleErr("read "+describe(key), err)
	}
	body, err := unseal(key, v)
	return body, err == nil, err
}

// Lookup returns the job id of the live task named id in queue, or
// [store.ErrNotFound] itself. An id that is a job id in decimal may be a
// task's own (implicitID), which has no index entry: Lookup reads that
// task's record first. Cost: one Get, and one more for a decimal id that
// is not its task's own. Lookup is safe for concurrent use.
func (s *Store) Lookup(queue, id string) (uint64, error) {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return 0, ErrClosed
	}
	if job, ok := parseJobID(id); ok {
		key := taskKey(nil, kindMeta, job)
		body, found, err := s.get(key)
		if err != nil {
			return 0, err
		}
		if found {
			var t store.Task
			if err := decodeMeta(body, &t, nil); err != nil {
				return 0, corrupt(key, "%v", err)
			}
			if t.Queue == queue && t.ID == id {
				return job, nil
			}
		}
	}
	key := indexKey(nil, queue, id)
	body, found, err := s.get(key)
	if err != nil {
		return 0, err
	}
	if !found {
		return 0, store.ErrNotFound
	}
	job, err := decodeUint64(body)
	if err != nil {
		return 0, corrupt(key, "%v", err)
	}
	return job, nil
}

// List returns up to limit tasks of queue with job ids above after, in job
// id order, without payloads. A queue's list entries lie in the era of
// each task (keys.go): List seeks to the queue's entries in each era from
// after's on, and reads each task's record, all in one snapshot of the
// store. Cost: O(limit) reads, and a seek for each era it passes, so a
// page of a queue with few tasks among many may visit every era: about
// 2,400 seeks at 10M tasks. List is safe for concurrent use.
func (s *Store) List(queue string, after uint64, limit int) ([]store.Task, error) {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	if limit <= 0 || after == ^uint64(0) {
		return nil, nil
	}
	snap := s.db.NewSnapshot()
	defer snap.Close()
	list, err := snap.NewIter(&pebble.IterOptions{LowerBound: jobLower, UpperBound: jobUpper})
	if err != nil {
		return nil, pebbleErr(fmt.Sprintf("list %q", queue), err)
	}
	defer list.Close()
	metas, err := snap.NewIter(nil)
	if err != nil {
		return nil, pebbleErr(fmt.Sprintf("list %q", queue), err)
	}
	defer metas.Close()

	var tasks []store.Task
	var kbuf [taskKeyLen]byte
	// era is the era being searched; start is where queue's entries in it
	// begin (in after's era: the first above after).
	era := (after + 1) >> eraBits
	start := listKey(nil, queue, after+1)
	ok := list.SeekGE(start)
	for ok && len(tasks) < limit {
		lk := list.Key()
		kind, job, q, valid := parseTaskKey(lk)
		if !valid {
			return nil, errNotTaskKey(lk)
		}
		switch {
		case job>>eraBits > era:
			// The era searched has no more entries of queue: search the
			// era the iterator reached, from the start of queue's entries.
			era = job >> eraBits
			start = eraListKey(start[:0], era, queue)
			if bytes.Compare(lk, start) < 0 {
				ok = list.SeekGE(start)
			}
			continue
		case kind != kindList || string(q) != queue:
			// Past queue's entries in this era.
			if era == lastEra {
				ok = false
				continue
			}
			era++
			start = eraListKey(start[:0], era, queue)
			ok = list.SeekGE(start)
			continue
		}
		v, err := list.ValueAndErr()
		if err != nil {
			return nil, pebbleErr(fmt.Sprintf("list %q", queue), err)
		}
		if _, err := unseal(lk, v); err != nil {
			return nil, err
		}
		key := taskKey(kbuf[:0], kindMeta, job)
		body, found, err := seekValue(metas, key)
		if err != nil {
			return nil, err
		}
		if !found {
			return nil, corrupt(lk, "names task %d, which is not recorded", job)
		}
		t := store.Task{JobID: job}
		if err := decodeMeta(body, &t, nil); err != nil {
			return nil, corrupt(key, "%v", err)
		}
		tasks = append(tasks, t)
		ok = list.Next()
	}
	if err := errors.Join(list.Error(), metas.Error()); err != nil {
		return nil, pebbleErr(fmt.Sprintf("list %q", queue), err)
	}
	return tasks, nil
}

// eraListKey appends to dst the start of queue's list entries in era.
func eraListKey(dst []byte, era uint64, queue string) []byte {
	dst = eraKey(dst, era<<eraBits, kindList)
	dst = binary.AppendUvarint(dst, uint64(len(queue)))
	return append(dst, queue...)
}

// recoverChunk is the number of records Recover's scanning goroutine
// reads before handing them over: large enough that the hand-over costs
// little a task, small enough that the chunks in flight (recoverChunks of
// them, about 100 KiB each) are no memory to speak of.
const (
	recoverChunk  = 1024
	recoverChunks = 3
)

// records is a chunk of records as Recover's scan reads them: job ids and
// their values (checksums included), one after another in vals, the i-th
// ending at ends[i].
type records struct {
	jobs []uint64
	vals []byte
	ends []int
}

func (r *records) reset() {
	r.jobs, r.vals, r.ends = r.jobs[:0], r.vals[:0], r.ends[:0]
}

// Recover calls fn for every task in job id order, without payloads,
// stopping at the first error fn returns and returning it. It reads only
// the record keys (about 100 bytes a task), era by era, seeking past each
// era's payloads and list entries, which are never read; through one
// iterator, so it sees one state of the store. Tasks of one queue share
// one Queue string. O(n) for n tasks, and a seek an era.
//
// The work is split between two goroutines: a scanning goroutine reads
// the records from Pebble a chunk ahead, and the caller's checks their
// checksums, decodes them and calls fn (the broker rebuilding its slots
// and wheels). Reading is the larger part, so it runs beside fn rather
// than before it. fn is called on the caller's goroutine, one
// task at a time; the scanning goroutine has exited when Recover returns,
// also when fn fails or panics. Recover is safe for concurrent use; fn
// must not call Close.
func (s *Store) Recover(fn func(store.Task) error) (err error) {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	defer s.releaseCompactions()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: jobLower, UpperBound: jobUpper})
	if err != nil {
		return pebbleErr("recover", err)
	}
	chunks := make(chan *records, recoverChunks-2)
	free := make(chan *records, recoverChunks)
	stop := make(chan struct{})
	var scanErr error // set before chunks is closed
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(chunks)
		scanErr = scan(it, chunks, free, stop)
		if e := it.Close(); scanErr == nil && e != nil {
			scanErr = pebbleErr("recover", e)
		}
	})
	defer func() {
		close(stop)
		for range chunks {
		}
		wg.Wait()
		if err == nil {
			err = scanErr
		}
	}()
	queues := make(map[string]string)
	intern := func(b []byte) string {
		if q, ok := queues[string(b)]; ok {
			return q
		}
		q := string(b)
		queues[q] = q
		return q
	}
	var key []byte
	for chunk := range chunks {
		start := 0
		for i, job := range chunk.jobs {
			key = taskKey(key[:0], kindMeta, job)
			body, err := unseal(key, chunk.vals[start:chunk.ends[i]])
			if err != nil {
				return err
			}
			start = chunk.ends[i]
			t := store.Task{JobID: job}
			if err := decodeMeta(body, &t, intern); err != nil {
				return corrupt(key, "%v", err)
			}
			if err := fn(t); err != nil {
				return err
			}
		}
		chunk.reset()
		select {
		case free <- chunk:
		default:
		}
	}
	return nil
}

// scan copies every record it reaches into chunks of recoverChunk and
// sends them on chunks, taking buffers from free when it can, until the
// end, an error, or stop.
func scan(it *pebble.Iterator, chunks, free chan *records, stop chan struct{}) error {
	send := func(chunk *records) bool {
		select {
		case chunks <- chunk:
			return true
		case <-stop:
			return false
		}
	}
	chunk := new(records)
	var seek []byte
	for ok := it.First(); ok; {
		key := it.Key()
		kind, job, _, valid := parseTaskKey(key)
		if !valid {
			return errNotTaskKey(key)
		}
		if kind != kindMeta {
			// Past the records of this era: on to the next era's, skipping
			// payloads and list entries.
			era := job>>eraBits + 1
			if era > lastEra {
				break
			}
			seek = eraKey(seek[:0], era<<eraBits, kindMeta)
			ok = it.SeekGE(seek)
			continue
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return pebbleErr("recover", err)
		}
		chunk.jobs = append(chunk.jobs, job)
		chunk.vals = append(chunk.vals, v...)
		chunk.ends = append(chunk.ends, len(chunk.vals))
		if len(chunk.jobs) == recoverChunk {
			if !send(chunk) {
				return nil
			}
			select {
			case chunk = <-free:
			default:
				chunk = new(records)
			}
		}
		ok = it.Next()
	}
	if err := it.Error(); err != nil {
		return pebbleErr("recover", err)
	}
	if len(chunk.jobs) > 0 {
		send(chunk)
	}
	return nil
}

// Schedules returns every schedule, ordered by name (bytewise). O(n) for
// n schedules. Schedules is safe for concurrent use.
func (s *Store) Schedules() ([]store.Schedule, error) {
	var out []store.Schedule
	err := s.scanPrefix("schedules", prefixSchedule, func(key, body []byte) error {
		sc := store.Schedule{Name: string(key[1:])}
		if err := decodeSchedule(body, &sc); err != nil {
			return corrupt(key, "%v", err)
		}
		out = append(out, sc)
		return nil
	})
	return out, err
}

// Queues returns every queue record, ordered by name (bytewise), each
// with a policy of its own (no two share a Retry or a Rate). O(n) for n
// records. Queues is safe for concurrent use.
func (s *Store) Queues() ([]store.Queue, error) {
	var out []store.Queue
	err := s.scanPrefix("queues", prefixQueue, func(key, body []byte) error {
		q := store.Queue{Name: string(key[1:])}
		if err := decodeQueue(body, &q); err != nil {
			return corrupt(key, "%v", err)
		}
		out = append(out, q)
		return nil
	})
	return out, err
}

// scanPrefix calls fn with every key that starts with prefix, in order, and
// its value's checked body; both are valid until fn returns. what names
// the read in errors.
func (s *Store) scanPrefix(what string, prefix byte, fn func(key, body []byte) error) error {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	p := []byte{prefix}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return pebbleErr(what, err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		key := it.Key()
		v, err := it.ValueAndErr()
		if err != nil {
			return pebbleErr(what, err)
		}
		body, err := unseal(key, v)
		if err != nil {
			return err
		}
		if err := fn(key, body); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return pebbleErr(what, err)
	}
	return nil
}
