package pebblestore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/cockroachdb/pebble/v2"

	"github.com/hourglass-go/hourglass/store"
)

// The history: the attempts of tasks and the Finished records of tasks
// that left their queues, under four prefixes (keys.go):
//
//	A job N                 → an attempt: Attempts(job) is one range, by N
//	H len queue seq         → a Finished record: History is one range, read backwards
//	I len queue id          → the Seq of (queue, id)'s record put last: LastFinished
//	T time seq              → job, queue and id: PruneHistory takes the oldest first
//	h                       → the highest Seq ever put (HistorySeq)
//
// A PutFinished writes H, I and T (and raises h); a PutAttempt writes A.
// Nothing is read to commit them. PruneHistory reads T keys from the
// start and, for each one before its time, deletes it, its H key, the I
// key if it still names its Seq (a later record of the same task keeps
// its own), and the job's A keys, found by one seek of an iterator kept
// for the batch: point deletions, not a range deletion per job. Pebble
// fragments a memtable's range deletions again for the first read after
// each batch that adds some, O(range deletions in the memtable): with a
// range deletion per job, that would be most of a prune's time and memory
// (BenchmarkStore_PruneHistory). The broker gives
// each Seq once, in increasing order; a second PutFinished of a Seq is
// not undone by the first's keys (if its queue or time differ, the
// first's H or T key stays, until pruned).
//
// An attempt's value is Started, Ended (8 bytes each), Status (4 bytes),
// then Outcome, Error and Node (strings), then, when either is set,
// Attempt (uvarint) and Queue (string): a record written before they
// were kept ends after Node, and reads with Attempt 0 and Queue "". As
// with the task record's trace context, there was no format bump: a
// record with them reads as corrupt to an older binary. A Finished record's is JobID,
// Finished (8 bytes each), Attempts (4 bytes), then ID, Outcome and
// LastError (strings); a time entry's is JobID (8 bytes), then Queue and
// ID (strings). Integers are little-endian, strings a uvarint length and
// their bytes, and every value is sealed with its checksum (codec.go).
// The job, N, queue and Seq are in the keys.

// appendAttempt appends the body of a (without job and N) to dst.
func appendAttempt(dst []byte, a *store.Attempt) []byte {
	le := binary.LittleEndian
	dst = le.AppendUint64(dst, uint64(a.Started))
	dst = le.AppendUint64(dst, uint64(a.Ended))
	dst = le.AppendUint32(dst, uint32(a.Status))
	dst = appendString(dst, a.Outcome)
	dst = appendString(dst, a.Error)
	dst = appendString(dst, a.Node)
	if a.Attempt != 0 || a.Queue != "" {
		dst = binary.AppendUvarint(dst, uint64(a.Attempt))
		dst = appendString(dst, a.Queue)
	}
	return dst
}

// decodeAttempt decodes an attempt body into a, leaving JobID and N.
func decodeAttempt(body []byte, a *store.Attempt) error {
	if len(body) < 20 {
		return errShort
	}
	le := binary.LittleEndian
	a.Started = int64(le.Uint64(body))
	a.Ended = int64(le.Uint64(body[8:]))
	a.Status = int32(le.Uint32(body[16:]))
	d := decoder{b: body[20:]}
	a.Outcome, a.Error, a.Node = d.string(), d.string(), d.string()
	if d.err == nil && len(d.b) > 0 {
		n := d.uvarint()
		if n > math.MaxUint32 && d.err == nil {
			d.err = fmt.Errorf("attempt number %d out of range", n)
		}
		a.Attempt, a.Queue = uint32(n), d.string()
	}
	return d.end()
}

// appendFinished appends the body of f (without queue and Seq) to dst.
func appendFinished(dst []byte, f *store.Finished) []byte {
	le := binary.LittleEndian
	dst = le.AppendUint64(dst, f.JobID)
	dst = le.AppendUint64(dst, uint64(f.Finished))
	dst = le.AppendUint32(dst, f.Attempts)
	dst = appendString(dst, f.ID)
	dst = appendString(dst, f.Outcome)
	return appendString(dst, f.LastError)
}

// decodeFinished decodes a Finished body into f, leaving Queue and Seq.
func decodeFinished(body []byte, f *store.Finished) error {
	if len(body) < 20 {
		return errShort
	}
	le := binary.LittleEndian
	f.JobID = le.Uint64(body)
	f.Finished = int64(le.Uint64(body[8:]))
	f.Attempts = le.Uint32(body[16:])
	d := decoder{b: body[20:]}
	f.ID, f.Outcome, f.LastError = d.string(), d.string(), d.string()
	return d.end()
}

// appendTimeEntry appends the value of f's time key to dst.
func appendTimeEntry(dst []byte, f *store.Finished) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, f.JobID)
	dst = appendString(dst, f.Queue)
	return appendString(dst, f.ID)
}

// decodeTimeEntry decodes the value of a time key.
func decodeTimeEntry(body []byte) (job uint64, queue, id string, err error) {
	if len(body) < 8 {
		return 0, "", "", errShort
	}
	d := decoder{b: body[8:]}
	queue, id = d.string(), d.string()
	return binary.LittleEndian.Uint64(body), queue, id, d.end()
}

// end returns the decoder's error, or one for bytes left after the record.
func (d *decoder) end() error {
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%d bytes after the record", len(d.b))
	}
	return d.err
}

// putFinished writes f's H, I and T keys into the batch being built.
func (w *writer) putFinished(f *store.Finished) error {
	w.key = finishedKey(w.key[:0], f.Queue, f.Seq)
	w.val = seal(w.key, appendFinished(w.val[:0], f))
	if err := w.pb.Set(w.key, w.val, nil); err != nil {
		return err
	}
	w.key = finishedIDKey(w.key[:0], f.Queue, f.ID)
	w.val = seal(w.key, appendUint64(w.val[:0], f.Seq))
	if err := w.pb.Set(w.key, w.val, nil); err != nil {
		return err
	}
	w.key = finishedTimeKey(w.key[:0], f.Finished, f.Seq)
	w.val = seal(w.key, appendTimeEntry(w.val[:0], f))
	if err := w.pb.Set(w.key, w.val, nil); err != nil {
		return err
	}
	w.maxSeq = max(w.maxSeq, f.Seq)
	return nil
}

// putAttempt writes a's key into the batch being built.
func (w *writer) putAttempt(a *store.Attempt) error {
	w.key = attemptKey(w.key[:0], a.JobID, a.N)
	w.val = seal(w.key, appendAttempt(w.val[:0], a))
	return w.pb.Set(w.key, w.val, nil)
}

// Attempts returns the attempt records of job, by N: one range of keys.
// O(a) for a attempts. Attempts is safe for concurrent use.
func (s *Store) Attempts(job uint64) ([]store.Attempt, error) {
	var out []store.Attempt
	err := s.scanRange("attempts", attemptsKey(nil, job), nil, false, func(key, body []byte) (bool, error) {
		if len(key) != attemptKeyLen {
			return false, corrupt(key, "not an attempt key")
		}
		a := store.Attempt{JobID: job, N: binary.BigEndian.Uint32(key[9:])}
		if err := decodeAttempt(body, &a); err != nil {
			return false, corrupt(key, "%v", err)
		}
		out = append(out, a)
		return true, nil
	})
	return out, err
}

// LastFinished returns the Finished record of (queue, id) put last, or
// [store.ErrNotFound] itself. Two Gets. LastFinished is safe for
// concurrent use.
func (s *Store) LastFinished(queue, id string) (store.Finished, error) {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return store.Finished{}, ErrClosed
	}
	key := finishedIDKey(nil, queue, id)
	body, found, err := s.get(key)
	if err != nil {
		return store.Finished{}, err
	}
	if !found {
		return store.Finished{}, store.ErrNotFound
	}
	seq, err := decodeUint64(body)
	if err != nil {
		return store.Finished{}, corrupt(key, "%v", err)
	}
	rkey := finishedKey(nil, queue, seq)
	if body, found, err = s.get(rkey); err != nil {
		return store.Finished{}, err
	}
	if !found {
		return store.Finished{}, corrupt(key, "names finished record %d, which is not recorded", seq)
	}
	f := store.Finished{Seq: seq, Queue: queue}
	if err := decodeFinished(body, &f); err != nil {
		return store.Finished{}, corrupt(rkey, "%v", err)
	}
	return f, nil
}

// History returns up to limit Finished records of queue with Seq below
// before (0: any), newest first, whose Outcome is outcome ("": any): the
// queue's H range read backwards from before. O(k) for k records read,
// which with an outcome filter may be many more than it returns. History
// is safe for concurrent use.
func (s *Store) History(queue, outcome string, before uint64, limit int) ([]store.Finished, error) {
	if limit <= 0 {
		s.closeMu.RLock()
		defer s.closeMu.RUnlock()
		if s.closed {
			return nil, ErrClosed
		}
		return nil, nil
	}
	lower := queueKey(nil, prefixFinished, queue)
	var upper []byte
	if before != 0 {
		upper = binary.BigEndian.AppendUint64(append([]byte(nil), lower...), before)
	}
	var out []store.Finished
	err := s.scanRange("history", lower, upper, true, func(key, body []byte) (bool, error) {
		if len(key) != len(lower)+8 {
			return false, corrupt(key, "not a finished record key of queue %q", queue)
		}
		f := store.Finished{Seq: binary.BigEndian.Uint64(key[len(lower):]), Queue: queue}
		if err := decodeFinished(body, &f); err != nil {
			return false, corrupt(key, "%v", err)
		}
		if outcome == "" || f.Outcome == outcome {
			out = append(out, f)
		}
		return len(out) < limit, nil
	})
	return out, err
}

// HistorySeq returns the highest Seq of any Finished record committed,
// pruned ones included, 0 for none. It reads a counter kept in memory:
// O(1), no I/O.
func (s *Store) HistorySeq() (uint64, error) {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return 0, ErrClosed
	}
	return s.histSeq.Load(), nil
}

// PruneHistory removes up to max Finished records finished before before,
// oldest first (by time, then Seq), each with its keys and its job's
// attempts, in one batch, durable when it returns (one WAL sync), and
// returns how many it removed. Cost: O(max) reads (a T key and a Get of
// an I key each) and writes. It builds its batch under the commit mutex,
// so that no commit changes an I key between its read and the delete.
// PruneHistory is safe for concurrent use.
func (s *Store) PruneHistory(before int64, max int) (int, error) {
	return s.pruneBatch("prune history", max, func(pb *pebble.Batch) (int, error) { return s.prune(pb, before, max) })
}

// pruneBatch runs fill under commitMu to build a batch of deletes of up
// to max records, applies it and returns once it is durable (one WAL
// sync, waited for after commitMu is released), answering fill's count.
// what names the operation in errors. A closed or failed store, max ≤ 0
// or an empty batch write nothing. Safe for concurrent use.
func (s *Store) pruneBatch(what string, max int, fill func(pb *pebble.Batch) (int, error)) (int, error) {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return 0, ErrClosed
	}
	if p := s.failed.Load(); p != nil {
		return 0, *p
	}
	if max <= 0 {
		return 0, nil
	}
	s.commitMu.Lock()
	pb := s.db.NewBatch()
	n, err := fill(pb)
	if err != nil || n == 0 {
		s.commitMu.Unlock()
		_ = pb.Close()
		return 0, err
	}
	if !s.sync {
		err = s.db.Apply(pb, pebble.NoSync)
		s.commitMu.Unlock()
		if err != nil {
			return 0, s.fail(pebbleErr(what, err))
		}
		return n, pb.Close()
	}
	if err := s.db.ApplyNoSyncWait(pb, pebble.Sync); err != nil {
		s.commitMu.Unlock()
		return 0, s.fail(pebbleErr(what, err))
	}
	s.commitMu.Unlock()
	if err := pb.SyncWait(); err != nil {
		return 0, s.fail(pebbleErr(what+": WAL sync", err))
	}
	return n, pb.Close()
}

// prune writes into pb the deletes of up to max records before before
// and returns how many. Called under commitMu, so that its reads see
// every commit applied.
func (s *Store) prune(pb *pebble.Batch, before int64, max int) (int, error) {
	lower := []byte{prefixFinishedTime}
	upper := binary.BigEndian.AppendUint64([]byte{prefixFinishedTime}, uint64(before)^1<<63)
	// The A keys of the jobs pruned, each found by a seek: the jobs come
	// roughly in order of their ids, so the seeks move forward.
	attempts, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixAttempt}, UpperBound: []byte{prefixAttempt + 1}})
	if err != nil {
		return 0, pebbleErr("prune history", err)
	}
	defer attempts.Close()
	n := 0
	var key []byte
	del := func(key []byte) error {
		if err := pb.Delete(key, nil); err != nil {
			return pebbleErr("prune history", err)
		}
		return nil
	}
	err = s.iterate("prune history", lower, upper, false, func(tkey, body []byte) (bool, error) {
		if len(tkey) != finishedTimeKeyLen {
			return false, corrupt(tkey, "not a time key")
		}
		seq := binary.BigEndian.Uint64(tkey[9:])
		job, queue, id, err := decodeTimeEntry(body)
		if err != nil {
			return false, corrupt(tkey, "%v", err)
		}
		if err := del(tkey); err != nil {
			return false, err
		}
		key = finishedKey(key[:0], queue, seq)
		if err := del(key); err != nil {
			return false, err
		}
		key = finishedIDKey(key[:0], queue, id)
		ibody, found, err := s.get(key)
		if err != nil {
			return false, err
		}
		if found {
			last, err := decodeUint64(ibody)
			if err != nil {
				return false, corrupt(key, "%v", err)
			}
			if last == seq {
				if err := del(key); err != nil {
					return false, err
				}
			}
		}
		key = attemptsKey(key[:0], job)
		for ok := attempts.SeekGE(key); ok && bytes.HasPrefix(attempts.Key(), key); ok = attempts.Next() {
			if err := del(attempts.Key()); err != nil {
				return false, err
			}
		}
		if err := attempts.Error(); err != nil {
			return false, pebbleErr("prune history", err)
		}
		n++
		return n < max, nil
	})
	return n, err
}

// scanRange calls fn with every key from lower up to upper (nil: every
// key that starts with lower), in order or in reverse, with its value's
// checked body, until fn returns false or an error; key and body are valid
// until fn returns. what names the read in errors.
func (s *Store) scanRange(what string, lower, upper []byte, reverse bool, fn func(key, body []byte) (bool, error)) error {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	return s.iterate(what, lower, upper, reverse, fn)
}

// iterate is scanRange for a caller holding closeMu.
func (s *Store) iterate(what string, lower, upper []byte, reverse bool, fn func(key, body []byte) (bool, error)) error {
	if upper == nil {
		upper = prefixEnd(lower)
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return pebbleErr(what, err)
	}
	defer it.Close()
	first, next := it.First, it.Next
	if reverse {
		first, next = it.Last, it.Prev
	}
	for ok := first(); ok; ok = next() {
		key := it.Key()
		v, err := it.ValueAndErr()
		if err != nil {
			return pebbleErr(what, err)
		}
		body, err := unseal(key, v)
		if err != nil {
			return err
		}
		more, err := fn(key, body)
		if err != nil || !more {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return pebbleErr(what, err)
	}
	return nil
}
