package pebblestore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/hourglass-go/hourglass/store"
)

// formatVersion is the version of the layout (doc.go) and of the value
// encodings (codec.go) this package writes, kept under keyFormat. Open
// upgrades a store of version 1 or 2 (upgrade.go) and refuses any other.
const formatVersion = 3

// Defaults of [Options]. Pebble's fixed memory is the block cache plus up
// to memTables memtables, so about DefaultCacheSize +
// 2*DefaultMemTableSize = 64 MiB at these values, not counting the tasks
// it holds.
const (
	DefaultCacheSize    = 32 << 20 // block cache, bytes
	DefaultMemTableSize = 16 << 20 // one memtable, bytes
)

// memTables is the number of memtables Pebble may hold before it stops
// writes (its MemTableStopWritesThreshold): the one being filled and one
// being flushed.
const memTables = 2

// bloomBitsPerKey sizes the per-table bloom filters, which let a Get of a
// missing key (Commit's checks of new tasks' index entries) skip most
// tables: 10 bits a key give about 1% false positives.
const bloomBitsPerKey = 10

// ErrClosed is returned by every method of a [Store] after Close.
var ErrClosed = errors.New("hourglass: store closed")

// Options configures a [Store]. The zero value takes the defaults named on
// each field.
type Options struct {
	// CacheSize is the size of Pebble's block cache in bytes; 0:
	// DefaultCacheSize.
	CacheSize int64
	// MemTableSize is the size of one Pebble memtable in bytes; 0:
	// DefaultMemTableSize. A batch of more than half of it is written
	// directly as a flushable batch.
	MemTableSize uint64
	// Logger receives Pebble's log lines and the store's warnings; nil:
	// slog.Default().
	Logger *slog.Logger

	// fs replaces the operating system's file system (tests: a crashable
	// in-memory one).
	fs vfs.FS
	// noSync commits without syncing the WAL (tests: proof that the crash
	// test catches a commit that does not sync).
	noSync bool
}

// Store is a [store.Store] in a Pebble database. Its layout and its
// durability are explained in the package doc.
//
// Store is safe for concurrent use by multiple goroutines. Commits are
// built one at a time but wait for their fsync together, so concurrent
// Commits share Pebble's WAL syncs.
type Store struct {
	db   *pebble.DB
	dir  string
	log  *slog.Logger
	sync bool // false only in tests (Options.noSync)
	// sched schedules Pebble's compactions (yield.go).
	sched *yieldingScheduler
	// backoff paces Pebble's retries after background errors (logger.go).
	backoff *backoff
	// holding is set from Open until releaseCompactions; holdTimer calls
	// it if no Recover or Commit has.
	holding   atomic.Bool
	holdTimer *time.Timer

	// closeMu is held shared by every method that uses db and exclusively
	// by Close, so that Close waits for them and nothing uses db after.
	closeMu sync.RWMutex
	// closed is set by Close. Guarded by closeMu.
	closed bool

	// commitMu serializes the building of commits: a commit reads the
	// records it replaces, and the batch before it must be visible then
	// (see Commit).
	commitMu sync.Mutex
	// pendingNext is the job id high-water mark including commits handed to
	// Pebble but not yet synced. Guarded by commitMu.
	pendingNext uint64
	// pendingSeq is the history's high-water mark (HistorySeq) including
	// commits handed to Pebble but not yet synced. Guarded by commitMu.
	pendingSeq uint64
	// w is the scratch space of the commit being built. Guarded by
	// commitMu.
	w writer

	// next is the job id high-water mark of synced commits: NextJobID.
	next atomic.Uint64
	// histSeq is the history's high-water mark of synced commits:
	// HistorySeq.
	histSeq atomic.Uint64
	// failed holds the first error of a commit that Pebble may have
	// applied in part of its pipeline (a failed WAL write or sync). Once
	// set, every Commit returns it: what readers see may then be ahead of
	// what is durable, and only a reopen tells which.
	failed atomic.Pointer[error]
}

// Open opens the store in dir, creating it if dir holds none. It refuses
// a directory holding a Pebble database without the store's format record,
// and a store of a format version this build does not know (a newer
// build's); a store of an older version it upgrades in place (upgrade.go).
//
// Open replays Pebble's write-ahead log (see the package doc, "Crashes"),
// so its time grows with the writes since the last memtable flush (at most
// a few memtables), not with the number of tasks. When the store was not
// closed cleanly it logs a warning with Pebble's account of the replay.
func Open(dir string, opts Options) (*Store, error) {
	if opts.CacheSize <= 0 {
		opts.CacheSize = DefaultCacheSize
	}
	if opts.MemTableSize == 0 {
		opts.MemTableSize = DefaultMemTableSize
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	pl := &pebbleLogger{log: opts.Logger, errors: newLimiter()}
	bo := newBackoff()
	fs := opts.fs
	if fs == nil {
		fs = vfs.Default
	}
	logs := walSizes(fs, dir)
	po := &pebble.Options{
		// Pebble counts its memtables against the block cache (it reserves
		// each one's size there), so a cache of CacheSize alone would be
		// all reservation and hold no block once two memtables exist:
		// every read would go to the file system and decompress its block
		// again. The memtables are added on top.
		CacheSize:                   opts.CacheSize + memTables*int64(opts.MemTableSize),
		MemTableSize:                opts.MemTableSize,
		MemTableStopWritesThreshold: memTables,
		// At least FormatWALSyncChunks: WAL chunks then carry the offset the
		// log was synced to, which lets Pebble tell corruption before that
		// offset from a torn tail (package doc, "Crashes").
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             pl,
		EventListener:      eventListener(opts.Logger, bo),
		FS:                 opts.fs,
	}
	sched := newYieldingScheduler()
	po.Experimental.CompactionScheduler = sched
	for i := range po.Levels {
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(bloomBitsPerKey)
	}
	var db *pebble.DB
	err := recoverFatal(func() (err error) {
		db, err = pebble.Open(dir, po)
		return err
	})
	if err != nil {
		bo.stop()
		sched.Unregister() // Pebble registers it early in Open, and does not unregister it on failure
		return nil, pebbleErr("open store "+dir, err)
	}
	s := &Store{db: db, dir: dir, log: opts.Logger, sync: !opts.noSync, sched: sched, backoff: bo}
	s.w.init()
	if err := s.start(pl.takeReplays(), logs); err != nil {
		bo.stop()
		_ = db.Close()
		return nil, err
	}
	s.holding.Store(true)
	s.holdTimer = time.AfterFunc(compactionHold, func() {
		// Not releaseCompactions: this may run before Open has set
		// holdTimer.
		if s.holding.CompareAndSwap(true, false) {
			s.sched.release()
		}
	})
	return s, nil
}

// compactionHold is the longest that compactions wait after Open for a
// Recover to end (releaseCompactions); a variable for the tests.
var compactionHold = 30 * time.Second

// releaseCompactions lets Pebble's compactions run. They are held from
// Open until the first Recover returns or the first Commit begins, at
// most compactionHold: a restart reads every record before it writes,
// and after a bulk load Pebble would start compacting it at once, on the
// same cores (docs/BENCHMARKS.md, serve: a restart of 10M tasks right
// after their load). Safe for concurrent use; calls after the first do
// nothing.
func (s *Store) releaseCompactions() {
	if s.holding.CompareAndSwap(true, false) {
		s.holdTimer.Stop()
		s.sched.release()
	}
}

// start checks the format record (writing it into a new store), loads the
// job id high-water mark, reports an unclean shutdown (with Pebble's
// replay lines and logs, the sizes of the WAL files before Open: see
// warnUnclean), and sets the running marker.
func (s *Store) start(replays []string, logs map[string]int64) error {
	b := s.db.NewBatch()
	defer b.Close()

	body, found, err := s.get(keyFormat)
	switch {
	case err != nil:
		return pebbleErr("open store "+s.dir, err)
	case !found:
		empty, err := s.empty()
		if err != nil {
			return err
		}
		if !empty {
			return fmt.Errorf("hourglass: open store %s: a Pebble database without an hourglass format record", s.dir)
		}
		_ = b.Set(keyFormat, seal(keyFormat, binary.LittleEndian.AppendUint32(nil, formatVersion)), nil)
	case len(body) != 4:
		return fmt.Errorf("hourglass: open store %s: %w", s.dir, corrupt(keyFormat, "%d bytes, want 4", len(body)))
	default:
		v := binary.LittleEndian.Uint32(body)
		if v < 1 || v > formatVersion {
			return fmt.Errorf("hourglass: open store %s: format version %d, and this build reads versions 1 to %d (upgrading the older ones)", s.dir, v, formatVersion)
		}
		from, resumed, err := s.upgrading()
		if err != nil {
			return err
		}
		if v == 1 || resumed {
			if v == 1 {
				from = v
			}
			if err := s.upgrade(from, resumed); err != nil {
				return err
			}
			v = formatVersion
		}
		if v == 2 {
			if err := s.upgradeFormat2(); err != nil {
				return err
			}
		}
	}

	if _, running, err := s.get(keyRunning); err != nil {
		return pebbleErr("open store "+s.dir, err)
	} else if running {
		s.warnUnclean(replays, logs)
	}

	next, err := s.loadNext()
	if err != nil {
		return err
	}
	s.next.Store(next)
	s.pendingNext = next
	seq, err := s.loadHistorySeq()
	if err != nil {
		return err
	}
	s.histSeq.Store(seq)
	s.pendingSeq = seq

	_ = b.Set(keyRunning, seal(keyRunning, nil), nil)
	if err := s.db.Apply(b, pebble.Sync); err != nil {
		return pebbleErr("open store "+s.dir, err)
	}
	if !found {
		// A new database: Pebble created its first WAL before raising the
		// format to FormatNewest, and a log writer picks its chunk format
		// when it is created (record.NewLogWriter), so that WAL has no
		// synced offsets and damage in it could never be told from a torn
		// tail. A flush switches to a new WAL, in the raised format.
		// TestWAL_DamageBeforeTail/EarlierBlock fails without it.
		if err := s.db.Flush(); err != nil {
			return pebbleErr("open store "+s.dir, err)
		}
	}
	return nil
}

// upgrading returns the format an upgrade that has not finished started
// from, and whether there is one (upgrade.go).
func (s *Store) upgrading() (from uint32, resumed bool, err error) {
	body, found, err := s.get(keyUpgrade)
	switch {
	case err != nil:
		return 0, false, pebbleErr("open store "+s.dir, err)
	case !found:
		return 0, false, nil
	case len(body) != 4:
		return 0, false, fmt.Errorf("hourglass: open store %s: %w", s.dir, corrupt(keyUpgrade, "%d bytes, want 4", len(body)))
	}
	return binary.LittleEndian.Uint32(body), true, nil
}

// empty reports whether the database holds no key at all.
func (s *Store) empty() (bool, error) {
	it, err := s.db.NewIter(nil)
	if err != nil {
		return false, pebbleErr("open store "+s.dir, err)
	}
	found := it.First()
	if err := it.Close(); err != nil {
		return false, pebbleErr("open store "+s.dir, err)
	}
	return !found, nil
}

// loadNext returns the job id high-water mark: the next job id record, or
// one above the highest task if that is higher (which a correct store
// never shows: Commit writes both in one batch), and at least 1.
func (s *Store) loadNext() (uint64, error) {
	next := uint64(1)
	body, found, err := s.get(keyNextJob)
	if err != nil {
		return 0, pebbleErr("open store "+s.dir, err)
	}
	if found {
		v, err := decodeUint64(body)
		if err != nil {
			return 0, fmt.Errorf("hourglass: open store %s: %w", s.dir, corrupt(keyNextJob, "%v", err))
		}
		next = max(next, v)
	}
	job, err := s.lastJob()
	if err != nil {
		return 0, err
	}
	if job >= next {
		s.log.Warn("hourglass: next job id record below the highest task; using the task's",
			"dir", s.dir, "record", next, "task", job)
		next = job + 1
	}
	return next, nil
}

// loadHistorySeq returns the history's high-water mark, 0 for a store
// with none: PutFinished writes it in the batch of the record (history.go).
func (s *Store) loadHistorySeq() (uint64, error) {
	body, found, err := s.get(keyHistorySeq)
	if err != nil || !found {
		return 0, err
	}
	seq, err := decodeUint64(body)
	if err != nil {
		return 0, fmt.Errorf("hourglass: open store %s: %w", s.dir, corrupt(keyHistorySeq, "%v", err))
	}
	return seq, nil
}

// lastJob returns the highest job id with a record, 0 for none: the last
// record of the last era that has one.
func (s *Store) lastJob() (uint64, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: jobLower, UpperBound: jobUpper})
	if err != nil {
		return 0, pebbleErr("open store "+s.dir, err)
	}
	defer it.Close()
	var seek []byte
	for ok := it.Last(); ok; {
		key := it.Key()
		kind, job, _, valid := parseTaskKey(key)
		if !valid {
			return 0, fmt.Errorf("hourglass: open store %s: %w", s.dir, errNotTaskKey(key))
		}
		if kind == kindMeta {
			return job, nil
		}
		// The era's last key is a payload or list entry: its records, if
		// any, sort before them.
		seek = prefixEnd(eraKey(seek[:0], job, kindMeta))
		ok = it.SeekLT(seek)
	}
	if err := it.Error(); err != nil {
		return 0, pebbleErr("open store "+s.dir, err)
	}
	return 0, nil
}

// NextJobID returns the lowest job id never used: one above the highest
// job id of a committed put, or the highest Batch.NextJobID committed, if
// higher, and at least 1 (job ids start at 1). It reads a counter kept in
// memory: O(1), no I/O.
func (s *Store) NextJobID() (uint64, error) {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return 0, ErrClosed
	}
	return s.next.Load(), nil
}

// Close marks the store closed cleanly (one synced write, skipped after a
// failed commit so that the next Open reports it) and closes Pebble; its
// goroutines have exited when Close returns. It waits for methods in
// progress. Close commits nothing else; calls after the first return nil.
func (s *Store) Close() error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.holding.CompareAndSwap(true, false) {
		s.holdTimer.Stop() // compactions stay held: Close needs none
	}
	s.backoff.stop()
	var err error
	if s.failed.Load() == nil {
		if e := s.db.Delete(keyRunning, pebble.Sync); e != nil {
			err = pebbleErr("close store "+s.dir, e)
		}
	}
	if e := s.db.Close(); e != nil {
		err = errors.Join(err, pebbleErr("close store "+s.dir, e))
	}
	return err
}

// get returns the body of the value under key, checked, and whether it
// was found.
func (s *Store) get(key []byte) (body []byte, found bool, err error) {
	v, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, pebbleErr("read "+describe(key), err)
	}
	defer closer.Close()
	body, err = unseal(key, v)
	if err != nil {
		return nil, false, err
	}
	return append([]byte(nil), body...), true, nil
}

// pebbleErr returns err, from Pebble, prefixed with what was being done,
// and wrapping [store.ErrCorrupt] too when Pebble reports corruption (a
// block or WAL chunk failing its checksum). Pebble marks corruption with
// cockroachdb/errors marks, which errors.Is of the standard library does
// not see, hence pebble.IsCorruptionError.
func pebbleErr(what string, err error) error {
	if pebble.IsCorruptionError(err) {
		return &corruptErr{"hourglass: " + what + ": store corrupt: " + err.Error(), err}
	}
	return fmt.Errorf("hourglass: %s: %w", what, err)
}

// corruptErr is a Pebble error that reports corruption: it wraps
// [store.ErrCorrupt] and Pebble's error, with one "hourglass: " prefix.
type corruptErr struct {
	msg string
	err error
}

func (e *corruptErr) Error() string   { return e.msg }
func (e *corruptErr) Unwrap() []error { return []error{store.ErrCorrupt, e.err} }

// fail records err as the store's failure, if it is the first, and
// returns it.
func (s *Store) fail(err error) error {
	s.failed.CompareAndSwap(nil, &err)
	return err
}
