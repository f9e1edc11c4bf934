package pebblestore

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hourglass-go/hourglass/store"
)

// Format 1 (up to commit 95f90bf) kept a task's keys by kind first:
//
//	m job             → record
//	p job             → payload
//	q len queue job   → list entry
//	i len queue id    → job id, for every task
//
// so a task put and acknowledged within seconds had its keys spread over
// four ranges, with the keys of tasks that stay between them, and every
// flush of the memtable overlapped most of the store (package doc,
// "Layout"). Format 2 keeps them by era, moves the index entries to k,
// after the task range, and has no index entry for an id that is the
// task's own job id.
//
// Format 3 adds a string to the end of a task record, its last error
// (codec.go), and the queue records (Q name). A record of format 2 reads
// as one of format 3 with no last error, and a store of format 2 has no
// queue records, so the upgrade from format 2 rewrites the format record
// alone (upgradeFormat2); the records of format 2 stay as they are until
// a commit rewrites them. An upgrade from format 1 moves its records
// unchanged, and they read in the same way.

// Tuning of the upgrade; variables so that the tests can stop it half-way.
var (
	// upgradeBatchKeys is how many keys one batch of the upgrade moves.
	upgradeBatchKeys = 4096
	// upgradeHook, if set, is called after each batch; an error stops the
	// upgrade there, as a crash would.
	upgradeHook func(batches int) error
)

// Key ranges of format 1 that format 2 no longer uses.
var (
	v1Index = [2][]byte{{'i'}, {'j'}}
	v1Meta  = [2][]byte{{'m'}, {'n'}}
	v1Rest  = [2][]byte{{'p'}, {'r'}} // payloads (p) and list entries (q)
)

// upgrade brings a store of format 1 to the current format. The first
// batch, synced, sets the format to formatVersion and the upgrade marker;
// then every record, payload and list entry of format 1 is written under
// its key of format 2 and later (values re-sealed with the new key: a
// checksum covers its key), and so is every index entry but those of
// implicit ids, in batches that are not synced; the last batch deletes
// the format 1 ranges whole and the marker, and sets the format again (a
// build of format 2 may have begun the upgrade, with format record 2),
// synced (syncing the WAL syncs every batch before it). A crash before it
// leaves the marker, and the next Open runs the upgrade again from the
// start: its writes are the same each time. O(n) for n tasks, all
// payloads read and written once, during which the server is not ready.
// The old keys' space comes back as Pebble compacts the range deletions,
// within seconds (docs/results/2026-12-06-comment-figures.md has a
// measured upgrade).
func (s *Store) upgrade(from uint32, resumed bool) error {
	start := time.Now()
	if !resumed {
		b := s.db.NewBatch()
		_ = b.Set(keyFormat, seal(keyFormat, binary.LittleEndian.AppendUint32(nil, formatVersion)), nil)
		_ = b.Set(keyUpgrade, seal(keyUpgrade, binary.LittleEndian.AppendUint32(nil, from)), nil)
		if err := s.db.Apply(b, pebble.Sync); err != nil {
			return pebbleErr("upgrade store "+s.dir, err)
		}
	}
	s.log.Info("hourglass: upgrading store", "dir", s.dir, "from", from, "to", formatVersion, "resumed", resumed)

	u := upgrader{s: s, b: s.db.NewBatch()}
	defer func() { _ = u.b.Close() }()
	if err := u.moveRange(v1Meta); err != nil {
		return err
	}
	if err := u.moveRange(v1Rest); err != nil {
		return err
	}
	if err := u.moveIndex(); err != nil {
		return err
	}
	_ = u.b.DeleteRange(v1Index[0], v1Index[1], nil)
	_ = u.b.DeleteRange(v1Meta[0], v1Meta[1], nil)
	_ = u.b.DeleteRange(v1Rest[0], v1Rest[1], nil)
	_ = u.b.Delete(keyUpgrade, nil)
	_ = u.b.Set(keyFormat, seal(keyFormat, binary.LittleEndian.AppendUint32(nil, formatVersion)), nil)
	if err := s.db.Apply(u.b, pebble.Sync); err != nil {
		return pebbleErr("upgrade store "+s.dir, err)
	}
	s.log.Info("hourglass: store upgraded", "dir", s.dir, "from", from, "to", formatVersion,
		"tasks", u.tasks, "keys", u.keys, "took", time.Since(start).Round(time.Millisecond).String())
	return nil
}

// upgradeFormat2 brings a store of format 2 to format 3: one synced
// write of the format record, before any commit can write a record of
// format 3. Nothing else changes (see above), so it takes O(1) whatever
// the store holds; a crash before the write leaves a store of format 2,
// which the next Open upgrades again.
func (s *Store) upgradeFormat2() error {
	err := s.db.Set(keyFormat, seal(keyFormat, binary.LittleEndian.AppendUint32(nil, formatVersion)), pebble.Sync)
	if err != nil {
		return pebbleErr("upgrade store "+s.dir, err)
	}
	s.log.Info("hourglass: store upgraded", "dir", s.dir, "from", 2, "to", formatVersion, "rewritten", "the format record alone")
	return nil
}

// upgrader carries the batch being filled and the counts of an upgrade.
type upgrader struct {
	s        *Store
	b        *pebble.Batch
	n        int // keys in b
	batches  int
	keys     int
	tasks    int
	key, val []byte
}

// add counts one key written or deleted into u.b, and applies the batch
// once it holds upgradeBatchKeys.
func (u *upgrader) add() error {
	u.n++
	u.keys++
	if u.n < upgradeBatchKeys {
		return nil
	}
	if err := u.s.db.Apply(u.b, pebble.NoSync); err != nil {
		return pebbleErr("upgrade store "+u.s.dir, err)
	}
	u.b.Reset()
	u.n = 0
	u.batches++
	if upgradeHook != nil {
		return upgradeHook(u.batches)
	}
	return nil
}

// each calls fn for every key in [lower, upper) with its value, both
// valid until fn returns.
func (u *upgrader) each(lower, upper []byte, fn func(key, value []byte) error) error {
	it, err := u.s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return pebbleErr("upgrade store "+u.s.dir, err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return pebbleErr("upgrade store "+u.s.dir, err)
		}
		if err := fn(it.Key(), v); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return pebbleErr("upgrade store "+u.s.dir, err)
	}
	return nil
}

// set and del add a write to the upgrade's batch.
func (u *upgrader) set(key, value []byte) error {
	if err := u.b.Set(key, value, nil); err != nil {
		return pebbleErr("upgrade store "+u.s.dir, err)
	}
	return u.add()
}

// moveRange writes every format 1 record, payload and list entry in r
// under its format 2 key.
func (u *upgrader) moveRange(r [2][]byte) error {
	return u.each(r[0], r[1], func(old, v []byte) error {
		body, err := unsealV1(old, v)
		if err != nil {
			return err
		}
		switch old[0] {
		case 'm', 'p':
			if len(old) != 9 {
				return fmt.Errorf("hourglass: upgrade store %s: key %x: not a format 1 task key", u.s.dir, old)
			}
			kind := byte(kindMeta)
			if old[0] == 'p' {
				kind = kindPayload
			} else {
				u.tasks++
			}
			u.key = taskKey(u.key[:0], kind, binary.BigEndian.Uint64(old[1:]))
		default: // 'q'
			n, w := binary.Uvarint(old[1:])
			if w <= 0 || uint64(len(old)-1-w) != n+8 {
				return fmt.Errorf("hourglass: upgrade store %s: key %x: not a format 1 list key", u.s.dir, old)
			}
			queue := old[1+w : 1+w+int(n)]
			u.key = listKey(u.key[:0], string(queue), binary.BigEndian.Uint64(old[len(old)-8:]))
		}
		u.val = seal(u.key, append(u.val[:0], body...))
		return u.set(u.key, u.val)
	})
}

// moveIndex writes every index entry of format 1 (i) under its format 2
// key (k), but those whose id is the job id they name: format 2 has none.
func (u *upgrader) moveIndex() error {
	return u.each(v1Index[0], v1Index[1], func(old, v []byte) error {
		n, w := binary.Uvarint(old[1:])
		if w <= 0 || uint64(len(old)-1-w) < n {
			return fmt.Errorf("hourglass: upgrade store %s: key %x: not a format 1 index key", u.s.dir, old)
		}
		body, err := unsealV1(old, v)
		if err != nil {
			return err
		}
		job, err := decodeUint64(body)
		if err != nil {
			return fmt.Errorf("hourglass: upgrade store %s: format 1 index entry (key %x): %w: %v", u.s.dir, old, store.ErrCorrupt, err)
		}
		queue, id := old[1+w:1+w+int(n)], old[1+w+int(n):]
		if implicitID(string(id), job) {
			return nil
		}
		u.key = indexKey(u.key[:0], string(queue), string(id))
		u.val = seal(u.key, append(u.val[:0], body...))
		return u.set(u.key, u.val)
	})
}

// unsealV1 is unseal for a key of format 1, whose errors describe the key
// as format 1 named it.
func unsealV1(key, value []byte) ([]byte, error) {
	n := len(value) - crcLen
	if n < 0 || binary.LittleEndian.Uint32(value[n:]) != checksum(key, value[:n]) {
		what := map[byte]string{'i': "index entry", 'm': "record", 'p': "payload", 'q': "list entry"}[key[0]]
		return nil, fmt.Errorf("%w: format 1 %s (key %x): checksum mismatch", store.ErrCorrupt, what, key)
	}
	return value[:n], nil
}
