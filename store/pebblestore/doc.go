// Package pebblestore is the embedded [store.Store]: tasks, schedules,
// queue records and the history of finished tasks in a Pebble (github.com/cockroachdb/pebble/v2) database in
// one directory.
//
// # Layout
//
// The first byte of a key says what it holds. A task's keys start with j
// and its era, the job id without its low 12 bits, then a byte for the
// kind of key: the 4096 tasks of consecutive job ids from a multiple of
// 4096 share an era. Job ids in keys are 8 bytes big-endian, so that keys
// sort by them; a queue name in a key is preceded by its length as a
// uvarint, so that the keys of queue "a" never run into those of queue
// "ab", whatever bytes names hold.
//
//	j era m job            → the task's record: fixed fields, queue, id, lease, last error, reservation's start
//	j era p job            → the task's payload
//	j era q len queue job  → nothing: List, a queue's tasks in job id order
//	k len queue id         → job id: Lookup, for an id other than the job id
//	s name                 → a schedule
//	Q name                 → a queue's record: its pause and its policy (push endpoint included)
//	A job N                → an ended attempt: Attempts, a job's attempts by N
//	H len queue seq        → a Finished record: History, a queue's newest first
//	I len queue id         → the Seq of (queue, id)'s newest Finished record: LastFinished
//	T time seq             → job, queue, id: PruneHistory, the oldest first
//	D len queue id         → a finished-id record of a dedupe window: Deduped (dedupe.go)
//	E until len queue id   → nothing: PruneDeduped, the soonest end first
//	n                      → the job id high-water mark (NextJobID)
//	h                      → the history's high-water mark (HistorySeq)
//	f                      → the format version (3)
//	r                      → present while a Store has the directory open
//	u                      → present while Open upgrades an older format
//
// Job ids are given in increasing order, so the tasks put in the last
// seconds have their records, payloads and list entries side by side at
// the end of the j range, next to n, which each put rewrites; tasks that
// stay for days have theirs in earlier eras. A stream of tasks put and
// acknowledged within seconds, beside a million that wait, then leaves
// memtables whose keys (sets and tombstones) cover none of the waiting
// tasks' keys, and Pebble compacts them into the newest eras alone.
// Format 1 kept keys by kind first (all records, then all payloads, then
// the list entries by queue, and an index entry for every task), so each
// flush of that stream spanned the waiting tasks' keys, and each
// compaction into L5 rewrote megabytes of them for a little new data, a
// large share of the server's CPU under the bench's lateness load
// (docs/BENCHMARKS.md, serve). Format 3 adds a task's last error and its
// reservation's start to the end of its record, the queue records and the
// history (history.go). Open upgrades a store of format 1 or 2 in place
// (upgrade.go); from format 2 that is one write of the format record,
// since a record of format 2 reads as one of format 3 with no last error
// and no reservation's start, and a store of format 2 has no queue
// records and no history.
//
// A task put without an id gets its job id in decimal as id, and has no
// index entry: Lookup of a decimal id reads the record of that job id
// first, and uses it if its queue and id match. Ids a client chooses have
// index entries; they sort by queue and id, not by time, in a range just
// after the task range, so that a stream of new tasks with ids of their
// own writes next to its newest eras (where no other task has index
// entries, nothing lies between them).
//
// Every value ends with a CRC-32C of its key and body (codec.go), checked
// on every read; a mismatch is an error wrapping [store.ErrCorrupt] that
// names the record, for example "hourglass: store corrupt: task 42 record
// (key 6a00000000000000006d000000000000002a): checksum mismatch".
//
// The task with job id 42 in queue "mail" with id "welcome-7" and payload
// "hello" is four keys (hex, then what the bytes say):
//
//	6a 0000000000000000 6d 000000000000002a          j 0 m 42  → 61 fixed bytes, 04 "mail", 09 "welcome-7", 00, 00, 8 bytes, crc (90 bytes)
//	6a 0000000000000000 70 000000000000002a          j 0 p 42  → "hello", crc                     (9 bytes)
//	6a 0000000000000000 71 04 6d61696c 000000000000002a  j 0 q 4 "mail" 42 → crc                (4 bytes)
//	6b 04 6d61696c 77656c636f6d652d37                k 4 "mail" "welcome-7" → 2a00000000000000, crc (12 bytes)
//
// and its commit raises "n" to 43 if it was lower. Put without an id, it
// would be "42" and have no k key. Task 4096 starts era 1 (j
// 0000000000000001 m 0000000000001000). An update (a reservation, a
// release) rewrites only the m key; a delete removes them all. The two
// 00s of the record are the lengths of its lease and its last error,
// both empty, and the 8 bytes after them the start of its reservation,
// 0 while waiting; a nack that keeps the error "timeout" makes the record
// 97 bytes.
//
// Acked on its first attempt at 2026-01-02 03:04:05 UTC (Unix ns
// 1767323045000000000, 0x1886caf21c963200) as the history's seventh
// record, task 42 leaves four keys and raises "h" to 7:
//
//	41 000000000000002a 00000001                   A 42 1 → started, ended, status, 05 "acked", 00, 00, crc      (32 bytes)
//	48 04 6d61696c 0000000000000007                H 4 "mail" 7 → job, finished, attempts, 09 "welcome-7", 05 "acked", 00, crc (41 bytes)
//	49 04 6d61696c 77656c636f6d652d37              I 4 "mail" "welcome-7" → 0700000000000000, crc           (12 bytes)
//	54 9886caf21c963200 0000000000000007           T time 7 → job, 04 "mail", 09 "welcome-7", crc            (27 bytes)
//
// The time in a T key has its sign bit flipped (0x18… becomes 0x98…), so
// that keys sort by signed time. The A, H and T keys are written in
// increasing order of job, Seq and time, next to each other at the ends
// of their ranges, as the j keys of new tasks are; pruning deletes from
// the starts.
//
// The record of queue "mail", paused until resumed (its second pause),
// with a retry policy (1 s doubling up to 1 min, jitter 0.1) and nothing
// else set, is one key of 54 bytes (the layout is in codec.go):
//
//	51 6d61696c  Q "mail" →
//	  ffffffffffffff7f  0200000000000000                           paused until 1<<63 - 1, 2 pauses
//	  01 80a8d6b907 80e0ba84bf03 0000000000000040 9a9999999999b93f  retry: 1 s, 1 min, 2, 0.1
//	  00 00 00 00 00 00 crc                                         max attempts, ttr, no rate, concurrency, dead letter "", no push
//
// Recover reads the m keys alone: about 110 bytes a task with key and
// checksum (the example's 18 + 90), before Pebble's compression. Within
// an era the m keys sort before the p and q keys, and Recover seeks from
// an era's last record to the next era's first, so no payload block is
// read: about 2,400 seeks at 10M tasks. Task reads one m and one p key,
// Lookup one m or k key (or both), List a run of q keys and their m keys
// in each era it passes.
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
// truth. A full disk fails the sync this way (ENOSPC), and the broker
// then refuses writes until the process is restarted.
//
// Pebble retries a failed flush at once, forever (a full disk makes
// every attempt fail): the store waits after each background error, from
// 10 ms doubling to 1 s, and logs each kind of Pebble error line at most
// about once a second, counting the lines it held back (logger.go), so
// that a server on a full disk neither spins a core nor floods its log. Open on a full disk waits in the same way until space
// is freed, unless not one byte is free: Pebble's MANIFEST write then
// fails, which Pebble treats as fatal (Logger.Fatalf, which here logs and
// panics). While Pebble opens, Open turns that panic into its error,
// which wraps ENOSPC (cmd/hourglass then tries again); in a flush on
// Pebble's own goroutine it ends the process.
//
// # Crashes
//
// Pebble replays the WAL at Open. What it does with the end of the log is
// in replayWAL (open.go) and record.Reader (record/record.go, Next,
// nextChunk, readAheadForCorruption) of Pebble v2.1.7, and the tests of
// this package (crash_test.go, wal_test.go) check each case:
//
//   - A torn tail: the newest WAL ends in a record the crash cut short
//     (never acknowledged) or, when Pebble reused an old log file, in that
//     file's leftovers (chunks of another log number). The reader returns
//     record.ErrUnexpectedEOF and replay stops there with no error: every
//     record before it is kept, the torn one is dropped whole.
//   - A chunk that fails its CRC, or a zeroed chunk, is ambiguous by
//     itself. The reader then reads the following 32 KiB blocks of the
//     log: every chunk records the offset to which the log had been synced
//     when it was written (format FormatWALSyncChunks and later; this store
//     uses FormatNewest), and a later chunk promising a synced offset past
//     the bad one proves that synced data is damaged: Open fails with an
//     error that wraps [store.ErrCorrupt].
//   - Without that proof, the bad chunk is taken for the end of the log,
//     exactly like a torn tail. That is the case for damage in the final
//     32 KiB block of the newest WAL: replay silently drops the damaged
//     record and every record after it, acknowledged or not.
//   - Older WALs (closed before the crash) must end cleanly; any of these
//     errors in them fails Open.
//
// Pebble chooses a log's chunk format when it creates the log, and it
// creates the first WAL of a new database before raising the format, so
// that WAL carries no synced offsets. Open therefore flushes a new store
// once, which starts a new WAL in the raised format.
//
// So a crash loses only batches whose Commit had not returned; damaged
// synced data is reported as an error when a later block of the log
// proves it, and is dropped silently, with what follows it, when it lies
// in the final block.
//
// What is reported: Pebble logs one line per replayed WAL, "WAL 000005
// stopped reading at offset: 1234; replayed 10 keys in 3 batches", through
// Options.Logger at level Info, whether the log ended cleanly or not; it
// does not say whether it dropped anything, and with a reused log file it
// cannot. So the store keeps the key "r" while open: Open writes it, and
// Close deletes it with a synced write that is the last record of the WAL.
// If Open finds it, the previous run crashed or its last records were
// dropped at replay (a torn or damaged tail drops that final delete too),
// and Open logs a warning at level Warn carrying Pebble's replay lines
// and dropped_bytes: for each WAL replayed, its size before Open less the
// offset where Pebble stopped (unclean.go). After a crash those bytes are
// a commit that had not returned; after damage in the final block they
// hold acknowledged writes too, and the warning says that these may be
// lost. It cannot say more: a log cut short (a lost page, a truncation)
// loses acknowledged writes with no bytes left to count, and a crash with
// nothing torn gets the same warning with dropped_bytes=0.
//
// Damage to Pebble's tables (sstables carry a checksum per block) makes
// the reads that meet it fail with errors wrapping [store.ErrCorrupt], and
// is logged at level Error.
//
// # Memory
//
// Pebble's fixed memory is the block cache (Options.CacheSize, 32 MiB by
// default), from which its index and filter blocks come too, and the
// memtables: writes stall while the memtables waiting for a flush reach
// two (Options.MemTableSize each, 16 MiB by default). Pebble accounts
// its memtables inside the block cache, so Open asks it for a cache of
// CacheSize plus the two memtables: a cache of CacheSize alone (as
// before 70131fc) held no block at all once two memtables existed, and
// every read went to the file system and decompressed its block again.
// The store itself keeps no memory per task: Recover streams, and
// nothing is cached.
//
// # Compactions
//
// Pebble's compactions run on goroutines of the process that serves the
// tasks, and a compaction is CPU work that blocks on nothing slow, so Go
// lets it keep its processor until its 10 ms preemption, and the timers
// of that processor (a delay wheel's among them) wait as long unless
// another processor is idle. The store schedules compactions itself
// (yield.go): as Pebble's default scheduler does, and with a grant handle
// that yields the processor at each of Pebble's progress reports (every
// 128 keys, and every block written), which keeps the delivery lateness
// of the bench's lateness load lower while Pebble compacts
// (docs/BENCHMARKS.md, serve).
// Memtable flushes report no progress and still run unyielding.
//
// The scheduler grants nothing from Open until the first Recover returns
// or the first Commit begins (at most 30 s): a restart reads every record
// before the broker writes anything, and right after a bulk load Pebble
// would otherwise start compacting it at once, on the same cores as the
// read (measured in docs/BENCHMARKS.md, serve).
package pebblestore
