// Package pebblestore is the embedded [store.Store]: tasks and schedules
// in a Pebble (github.com/cockroachdb/pebble/v2) database in one directory.
//
// # Layout
//
// The first byte of a key says what it holds. Job ids in keys are 8 bytes
// big-endian, so that keys sort by job id; a queue name in a key is
// preceded by its length as a uvarint, so that the keys of queue "a" never
// run into those of queue "ab", whatever bytes names hold.
//
//	m job                → the task's record: fixed fields, queue, id, lease
//	p job                → the task's payload
//	i len queue id       → job id: Lookup
//	q len queue job      → nothing: List, a queue's tasks in job id order
//	s name               → a schedule
//	n                    → the job id high-water mark (NextJobID)
//	f                    → the format version (1)
//	r                    → present while a Store has the directory open
//
// Every value ends with a CRC-32C of its key and body (codec.go), checked
// on every read; a mismatch is an error wrapping [store.ErrCorrupt] that
// names the record, for example "hourglass: store corrupt: task 42 record
// (key 6d000000000000002a): checksum mismatch".
//
// The task with job id 42 in queue "mail" with id "welcome-7" and payload
// "hello" is four keys (hex, then what the bytes say):
//
//	6d 000000000000002a          m 42  → 61 fixed bytes, 04 "mail", 09 "welcome-7", 00, crc (80 bytes)
//	70 000000000000002a          p 42  → "hello", crc                          (9 bytes)
//	69 04 6d61696c 77656c636f6d652d37  i 4 "mail" "welcome-7" → 2a00000000000000, crc (12 bytes)
//	71 04 6d61696c 000000000000002a    q 4 "mail" 42 → crc                     (4 bytes)
//
// and its commit raises "n" to 43 if it was lower. An update (a
// reservation, a release) rewrites only the m key; a delete removes all
// four.
//
// Recover scans the m keys alone: about 110 bytes a task with key and
// checksum, before Pebble's compression, and no payload byte, since the p
// keys sort after every m key. Task reads one m and one p key, Lookup one i
// key, List a run of q keys and their m keys.
//
// # Durability
//
// [Store.Commit] writes its whole batch as one Pebble batch, which Pebble
// writes to its write-ahead log (WAL) as one record, and returns once the
// WAL has been fsynced up to and past that record. A batch is durable
// exactly then: a crash after Commit returns loses nothing of it (as long
// as the disk honours fsync). Concurrent Commits share fsyncs: one sync of
// the WAL covers every record written before it.
//
// A crash while Commit is in progress keeps the whole batch or none of it:
// its WAL record either passes its checksums whole or is dropped at
// replay. A batch whose Commit had not returned may survive, and may even
// have been seen by readers: Pebble makes a batch visible to reads after
// writing it to the WAL and before the fsync completes. The broker
// answers no request before its Commit returns, so nothing a client was
// told about is lost.
//
// If Pebble fails to write or sync the WAL, Pebble's commit pipeline is
// broken (a failed write makes Pebble call Logger.Fatalf, which here logs
// and panics); a failed sync fails that Commit and every later one
// (readers may by then have seen batches that are not durable), and Close
// leaves the running marker so that the next Open reports the unclean
// stop. Reopening is the only way on: what the WAL holds is then the
// truth.
//
// # Crashes
//
// Pebble replays the WAL at Open. What it does with the end of the log is
// in replayWAL (open.go) and record.Reader (record/record.go) of Pebble
// v2.1.7:
//
//   - The newest WAL may end in a torn record (a write the crash cut
//     short, never acknowledged) or, when Pebble reused an old log file,
//     in leftovers of that file. The record reader reports either as
//     record.ErrUnexpectedEOF, and replay stops there without an error:
//     every record before it is kept, the torn one is dropped.
//   - A chunk that fails its CRC, or a zeroed chunk, is ambiguous by
//     itself. The reader reads the following 32 KiB blocks of the log:
//     since this store uses format FormatNewest (at least
//     FormatWALSyncChunks), every chunk records the offset to which the
//     log had been synced when it was written, and a later chunk promising
//     a synced offset past the bad one proves corruption of synced data:
//     Open fails with an error marked pebble.ErrCorruption, which Open
//     here wraps with [store.ErrCorrupt]. Without such proof (nothing
//     valid in a later block) the bad chunk is taken for the end of the
//     log, exactly like a torn tail: replay stops there silently.
//   - Older WALs (closed before the crash) must end cleanly; any of those
//     errors in them fails Open.
//
// So a crash loses only batches whose Commit had not returned. Damage to
// synced data is reported when a later block of the log proves it; damage
// in the last 32 KiB block of the newest WAL cannot be told from a torn
// tail and drops the damaged record and every record after it in that
// block, with no error (the corruption tests show both cases).
//
// What is reported: Pebble logs one line per replayed WAL, "WAL 000005
// stopped reading at offset: 1234; replayed 10 keys in 3 batches", through
// Options.Logger at level Info, whether the log ended cleanly or not; it
// does not say whether it dropped anything. To tell, the store keeps the
// key "r" while open: Open writes it, Close deletes it with a synced write
// that is the last record of the WAL. If Open finds it, the previous run
// crashed, or its last records were dropped at replay (a torn or damaged
// tail drops that final delete too), and Open logs a warning at level Warn
// carrying Pebble's replay lines. Replay cannot tell more: with a reused
// log file, the bytes after the last record are the old file's either
// way.
//
// # Memory
//
// Pebble's fixed memory is the block cache (Options.CacheSize, 32 MiB by
// default) and up to two memtables (Options.MemTableSize, 16 MiB by
// default) with a third being flushed, and its index and filter blocks
// come out of the block cache. The store itself keeps no per-task memory.
package pebblestore
