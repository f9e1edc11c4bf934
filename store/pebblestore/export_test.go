package pebblestore

import (
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	dto "github.com/prometheus/client_model/go"
)

// OpenFS opens the store in dir on fs (a crashable in-memory file system
// in the power-loss tests). With noSync its commits do not sync the WAL:
// the power-loss test shows that it then loses acknowledged commits.
func OpenFS(dir string, opts Options, fs vfs.FS, noSync bool) (*Store, error) {
	opts.fs, opts.noSync = fs, noSync
	return Open(dir, opts)
}

// SetRaw writes value under key as it is, with no checksum added, synced:
// the tests' way to damage a record.
func (s *Store) SetRaw(key, value []byte) error {
	return s.db.Set(key, value, pebble.Sync)
}

// Raw returns the value under key as stored, checksum included.
func (s *Store) Raw(key []byte) ([]byte, error) {
	v, closer, err := s.db.Get(key)
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	return append([]byte(nil), v...), nil
}

// Keys of the layout, for the tests.
func MetaKey(job uint64) []byte               { return taskKey(nil, kindMeta, job) }
func PayloadKey(job uint64) []byte            { return taskKey(nil, kindPayload, job) }
func IndexKey(queue, id string) []byte        { return indexKey(nil, queue, id) }
func ListKey(queue string, job uint64) []byte { return listKey(nil, queue, job) }
func ScheduleKey(name string) []byte          { return scheduleKey(nil, name) }
func QueueKey(name string) []byte             { return queueRecordKey(nil, name) }
func AttemptKey(job uint64, n uint32) []byte  { return attemptKey(nil, job, n) }
func FinishedKey(queue string, seq uint64) []byte {
	return finishedKey(nil, queue, seq)
}
func FinishedIDKey(queue, id string) []byte { return finishedIDKey(nil, queue, id) }
func FinishedTimeKey(at int64, seq uint64) []byte {
	return finishedTimeKey(nil, at, seq)
}

var (
	UpgradeKey    = keyUpgrade
	FormatKey     = keyFormat
	NextJobKey    = keyNextJob
	RunningKey    = keyRunning
	HistorySeqKey = keyHistorySeq
)

// Seal returns body sealed with its checksum under key, as the store
// writes it.
func Seal(key, body []byte) []byte { return seal(key, append([]byte(nil), body...)) }

// WALSyncs returns how many times Pebble has fsynced the WAL since Open:
// the benchmarks' count of syncs per commit.
func (s *Store) WALSyncs() uint64 {
	var m dto.Metric
	if err := s.db.Metrics().LogWriter.FsyncLatency.Write(&m); err != nil {
		return 0
	}
	return m.GetHistogram().GetSampleCount()
}

// BlockCache returns the block cache's hits since Open and the bytes of
// blocks it holds now.
func (s *Store) BlockCache() (hits, size int64) {
	m := s.db.Metrics().BlockCache
	return m.Hits, m.Size
}

// Flush writes the memtable out to a table, so that reads go to tables.
func (s *Store) Flush() error { return s.db.Flush() }

// Compactions returns how many compactions Pebble has completed since
// Open, and how many times they stepped aside for other goroutines
// (yield.go).
func (s *Store) Compactions() (done, yields int64) {
	return s.db.Metrics().Compact.Count, s.sched.yields.Load()
}

// SetUpgradeHook makes the upgrade move batch keys a batch and call hook
// after each batch, until the returned function restores both.
func SetUpgradeHook(batch int, hook func(batches int) error) (restore func()) {
	oldBatch, oldHook := upgradeBatchKeys, upgradeHook
	upgradeBatchKeys, upgradeHook = batch, hook
	return func() { upgradeBatchKeys, upgradeHook = oldBatch, oldHook }
}

// CompactionsHeld reports whether the store still holds compactions back
// (releaseCompactions).
func (s *Store) CompactionsHeld() bool {
	s.sched.mu.Lock()
	defer s.sched.mu.Unlock()
	return s.sched.held
}

// SetCompactionHold sets how long Open holds compactions at most, until
// the returned function restores it.
func SetCompactionHold(d time.Duration) (restore func()) {
	old := compactionHold
	compactionHold = d
	return func() { compactionHold = old }
}
