package pebblestore

import (
	"encoding/binary"

	"github.com/cockroachdb/pebble/v2"

	"github.com/hourglass-go/hourglass/store"
)

// The finished-id records of queues with a dedupe window (store.Deduped;
// the rule is service.Dedupes), under two prefixes (keys.go):
//
//	D len queue id          → the record of (queue, id): Deduped is one Get
//	E until len queue id    → nothing: PruneDeduped takes the soonest ends first
//
// A PutDeduped writes both keys, reading nothing. A record replaced by a
// later one of the same (queue, id) leaves its E key behind: PruneDeduped
// deletes each E key it passes, and the D key only when the record's own
// Until is the E key's (a later record keeps its own). A record's value is
// JobID, Finished, Until (8 bytes each), Attempts (4 bytes), then Outcome
// and LastError (strings), sealed with its checksum (codec.go). With a
// queue of q bytes, an id of i and an outcome of o, a record costs about
// 2(q+i) + o + 60 bytes before Pebble's compression.

// appendDeduped appends the body of d (without queue and id) to dst.
func appendDeduped(dst []byte, d *store.Deduped) []byte {
	le := binary.LittleEndian
	dst = le.AppendUint64(dst, d.JobID)
	dst = le.AppendUint64(dst, uint64(d.Finished))
	dst = le.AppendUint64(dst, uint64(d.Until))
	dst = le.AppendUint32(dst, d.Attempts)
	dst = appendString(dst, d.Outcome)
	return appendString(dst, d.LastError)
}

// decodeDeduped decodes a record body into d, leaving Queue and ID.
func decodeDeduped(body []byte, d *store.Deduped) error {
	if len(body) < 28 {
		return errShort
	}
	le := binary.LittleEndian
	d.JobID = le.Uint64(body)
	d.Finished = int64(le.Uint64(body[8:]))
	d.Until = int64(le.Uint64(body[16:]))
	d.Attempts = le.Uint32(body[24:])
	dec := decoder{b: body[28:]}
	d.Outcome, d.LastError = dec.string(), dec.string()
	return dec.end()
}

// dedupedKey appends the key of (queue, id)'s record to dst.
func dedupedKey(dst []byte, queue, id string) []byte {
	return append(queueKey(dst, prefixDeduped, queue), id...)
}

// dedupedUntilKey appends the end key of (queue, id)'s record ending at
// until to dst. Flipping the sign bit makes big-endian order signed order.
func dedupedUntilKey(dst []byte, until int64, queue, id string) []byte {
	dst = binary.BigEndian.AppendUint64(append(dst, prefixDedupedUntil), uint64(until)^1<<63)
	dst = binary.AppendUvarint(dst, uint64(len(queue)))
	return append(append(dst, queue...), id...)
}

// putDeduped writes d's D and E keys into the batch being built.
func (w *writer) putDeduped(d *store.Deduped) error {
	w.key = dedupedKey(w.key[:0], d.Queue, d.ID)
	w.val = seal(w.key, appendDeduped(w.val[:0], d))
	if err := w.pb.Set(w.key, w.val, nil); err != nil {
		return err
	}
	w.key = dedupedUntilKey(w.key[:0], d.Until, d.Queue, d.ID)
	w.val = seal(w.key, w.val[:0])
	return w.pb.Set(w.key, w.val, nil)
}

// Deduped returns the finished-id record of (queue, id), or
// [store.ErrNotFound] itself. One Get. Deduped is safe for concurrent
// use.
func (s *Store) Deduped(queue, id string) (store.Deduped, error) {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return store.Deduped{}, ErrClosed
	}
	key := dedupedKey(nil, queue, id)
	body, found, err := s.get(key)
	if err != nil {
		return store.Deduped{}, err
	}
	if !found {
		return store.Deduped{}, store.ErrNotFound
	}
	d := store.Deduped{Queue: queue, ID: id}
	if err := decodeDeduped(body, &d); err != nil {
		return store.Deduped{}, corrupt(key, "%v", err)
	}
	return d, nil
}

// PruneDeduped removes up to max finished-id records whose Until is
// before before, soonest first, in one batch, durable when it returns,
// and returns how many E keys it passed. Cost: O(max) reads (an E key and
// a Get of its D key each) and writes. It builds its batch under the
// commit mutex, so that no commit replaces a D key between its read and
// the delete. PruneDeduped is safe for concurrent use.
func (s *Store) PruneDeduped(before int64, max int) (int, error) {
	return s.pruneBatch("prune dedupe records", max, func(pb *pebble.Batch) (int, error) { return s.pruneDeduped(pb, before, max) })
}

// pruneDeduped writes into pb the deletes of up to max records ending
// before before and returns how many E keys it passed. Called under
// commitMu.
func (s *Store) pruneDeduped(pb *pebble.Batch, before int64, max int) (int, error) {
	lower := []byte{prefixDedupedUntil}
	upper := binary.BigEndian.AppendUint64([]byte{prefixDedupedUntil}, uint64(before)^1<<63)
	n := 0
	var key []byte
	err := s.iterate("prune dedupe records", lower, upper, false, func(ekey, _ []byte) (bool, error) {
		if len(ekey) < 1+8+1 {
			return false, corrupt(ekey, "not a dedupe end key")
		}
		until := int64(binary.BigEndian.Uint64(ekey[1:]) ^ 1<<63)
		queue, id, ok := cutQueue(ekey[9:])
		if !ok {
			return false, corrupt(ekey, "not a dedupe end key")
		}
		if err := pb.Delete(ekey, nil); err != nil {
			return false, pebbleErr("prune dedupe records", err)
		}
		key = dedupedKey(key[:0], string(queue), string(id))
		body, found, err := s.get(key)
		if err != nil {
			return false, err
		}
		if found {
			var d store.Deduped
			if err := decodeDeduped(body, &d); err != nil {
				return false, corrupt(key, "%v", err)
			}
			if d.Until == until {
				if err := pb.Delete(key, nil); err != nil {
					return false, pebbleErr("prune dedupe records", err)
				}
			}
		}
		n++
		return n < max, nil
	})
	return n, err
}
