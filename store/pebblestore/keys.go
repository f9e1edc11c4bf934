package pebblestore

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/hourglass-go/hourglass/store"
)

// Key prefixes: the first byte of every key says what the key holds. The
// layout is explained with an example in the package doc (doc.go).
const (
	// prefixJob starts the keys of a task: j + era + kind + ..., see
	// taskKey and listKey.
	prefixJob = 'j'
	// prefixIndex sorts right after the task range, so that a stream of
	// new tasks with ids of their own writes index entries next to its
	// newest eras, not with every era in between (package doc, "Layout").
	prefixIndex    = 'k' // k + uvarint(len(queue)) + queue + id → job id
	prefixSchedule = 's' // s + name → schedule
	// prefixQueue starts the queue records (format 3): Q + name → the
	// queue's pause and policy. Upper case: q held format 1's list
	// entries, whose range an upgrade from format 1 deletes whole
	// (upgrade.go, v1Rest).
	prefixQueue = 'Q'

	// The history (format 3, history.go): upper case, like Q, since
	// format 1 used lower-case prefixes.
	//
	// prefixAttempt: A + job + N (8 and 4 bytes big-endian) → an attempt,
	// so that a job's attempts are one range, by N.
	prefixAttempt = 'A'
	// prefixFinished: H + uvarint(len(queue)) + queue + Seq (8 bytes
	// big-endian) → a Finished record, so that a queue's history is one
	// range, by Seq.
	prefixFinished = 'H'
	// prefixFinishedID: I + uvarint(len(queue)) + queue + id → the Seq of
	// the Finished record of (queue, id) put last: LastFinished.
	prefixFinishedID = 'I'
	// prefixFinishedTime: T + Finished time (8 bytes, big-endian, sign bit
	// flipped) + Seq → the job id, queue and id of the record, so that
	// pruning takes the oldest records first and finds their other keys
	// without reading them.
	prefixFinishedTime = 'T'

	// The finished-id records of dedupe windows (dedupe.go), upper case
	// as the history's.
	//
	// prefixDeduped: D + uvarint(len(queue)) + queue + id → the record
	// of (queue, id).
	prefixDeduped = 'D'
	// prefixDedupedUntil: E + Until (8 bytes, big-endian, sign bit
	// flipped) + uvarint(len(queue)) + queue + id → nothing, so that
	// pruning takes the soonest ends first.
	prefixDedupedUntil = 'E'
)

// Kinds of task keys, the byte after the era.
const (
	kindMeta    = 'm' // j era m job → task record
	kindPayload = 'p' // j era p job → payload
	kindList    = 'q' // j era q uvarint(len(queue)) queue job → nothing
)

// Single keys.
var (
	keyFormat  = []byte("f") // the format version of the store (formatVersion)
	keyNextJob = []byte("n") // the job id high-water mark (Store.NextJobID)
	keyRunning = []byte("r") // present while a Store is open: see Open
	// keyUpgrade is present while Open upgrades a store from an older
	// format (upgrade.go); its value is the version upgraded from.
	keyUpgrade = []byte("u")
	// keyHistorySeq is the history's high-water mark (Store.HistorySeq).
	keyHistorySeq = []byte("h")
)

// eraBits is the number of low job id bits an era spans: the keys of the
// 4096 tasks with consecutive job ids from a multiple of 4096 share their
// first 10 bytes (j and the era), so tasks put at about the same time have
// their records, payloads and list entries side by side (package doc,
// "Layout").
const eraBits = 12

// lastEra is the era of the highest job id.
const lastEra = ^uint64(0) >> eraBits

// eraPrefixLen is the length of the prefix the keys of one era share, and
// of an era's kind: j, the era (8 bytes), the kind.
const (
	eraLen       = 1 + 8
	eraPrefixLen = eraLen + 1
)

// taskKeyLen is the length of a meta or payload key: j, era, kind, job.
const taskKeyLen = eraPrefixLen + 8

// jobLower and jobUpper bound every task key.
var (
	jobLower = []byte{prefixJob}
	jobUpper = []byte{prefixJob + 1}
)

// eraKey appends j, the era of jobID and kind to dst: the prefix of the
// keys of that kind in that era.
func eraKey(dst []byte, jobID uint64, kind byte) []byte {
	dst = append(dst, prefixJob)
	dst = binary.BigEndian.AppendUint64(dst, jobID>>eraBits)
	return append(dst, kind)
}

// taskKey appends the meta or payload (kind) key of jobID to dst. Job ids
// are big-endian, so that keys sort by them.
func taskKey(dst []byte, kind byte, jobID uint64) []byte {
	return binary.BigEndian.AppendUint64(eraKey(dst, jobID, kind), jobID)
}

// listKey appends the list key of jobID in queue to dst.
func listKey(dst []byte, queue string, jobID uint64) []byte {
	dst = eraKey(dst, jobID, kindList)
	dst = binary.AppendUvarint(dst, uint64(len(queue)))
	dst = append(dst, queue...)
	return binary.BigEndian.AppendUint64(dst, jobID)
}

// parseTaskKey returns the kind of a task key (prefixJob) and the job id
// it names; for a list key also the queue. ok is false for a key that is
// not a well-formed task key.
func parseTaskKey(key []byte) (kind byte, job uint64, queue []byte, ok bool) {
	if len(key) < eraPrefixLen+8 || key[0] != prefixJob {
		return 0, 0, nil, false
	}
	era := binary.BigEndian.Uint64(key[1:eraLen])
	kind = key[eraLen]
	job = binary.BigEndian.Uint64(key[len(key)-8:])
	if job>>eraBits != era {
		return 0, 0, nil, false
	}
	switch kind {
	case kindMeta, kindPayload:
		return kind, job, nil, len(key) == taskKeyLen
	case kindList:
		rest := key[eraPrefixLen : len(key)-8]
		n, w := binary.Uvarint(rest)
		// The length must be in its one (shortest) encoding, so that no
		// two keys parse to the same entry.
		if w <= 0 || uint64(len(rest)-w) != n || w != len(binary.AppendUvarint(nil, n)) {
			return 0, 0, nil, false
		}
		return kind, job, rest[w:], true
	}
	return 0, 0, nil, false
}

// queueKey appends prefix, the length of queue as a uvarint, and queue to
// dst. The length makes the end of the queue name unambiguous whatever
// bytes it holds, so that the entries of queue "a" never run into those of
// queue "ab".
func queueKey(dst []byte, prefix byte, queue string) []byte {
	dst = append(dst, prefix)
	dst = binary.AppendUvarint(dst, uint64(len(queue)))
	return append(dst, queue...)
}

// indexKey appends the index key of (queue, id) to dst.
func indexKey(dst []byte, queue, id string) []byte {
	return append(queueKey(dst, prefixIndex, queue), id...)
}

// implicitID reports whether id is jobID in decimal, the id a task put
// without one gets. Such a task has no index entry: Lookup reads its
// record by the job id its id names.
func implicitID(id string, jobID uint64) bool {
	n, ok := parseJobID(id)
	return ok && n == jobID
}

// parseJobID returns the job id a decimal id names, and false if id is
// not a positive integer in canonical decimal (no sign, no leading zero)
// that fits in 64 bits.
func parseJobID(id string) (uint64, bool) {
	if len(id) == 0 || len(id) > 20 || id[0] < '1' || id[0] > '9' {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(id); i++ {
		c := id[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (^uint64(0)-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// scheduleKey appends the key of the schedule named name to dst.
func scheduleKey(dst []byte, name string) []byte {
	return append(append(dst, prefixSchedule), name...)
}

// queueRecordKey appends the key of the record of the queue named name
// to dst.
func queueRecordKey(dst []byte, name string) []byte {
	return append(append(dst, prefixQueue), name...)
}

// attemptsKey appends the prefix of job's attempt keys to dst.
func attemptsKey(dst []byte, job uint64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, prefixAttempt), job)
}

// attemptKey appends the key of attempt n of job to dst.
func attemptKey(dst []byte, job uint64, n uint32) []byte {
	return binary.BigEndian.AppendUint32(attemptsKey(dst, job), n)
}

// attemptKeyLen is the length of an attempt key: A, job, N.
const attemptKeyLen = 1 + 8 + 4

// finishedKey appends the key of the Finished record seq of queue to dst.
func finishedKey(dst []byte, queue string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(queueKey(dst, prefixFinished, queue), seq)
}

// finishedIDKey appends the key of the newest Finished record of (queue,
// id) to dst.
func finishedIDKey(dst []byte, queue, id string) []byte {
	return append(queueKey(dst, prefixFinishedID, queue), id...)
}

// finishedTimeKey appends the key of the Finished record seq, finished at
// at, to dst. Flipping the sign bit makes big-endian order signed order.
func finishedTimeKey(dst []byte, at int64, seq uint64) []byte {
	dst = binary.BigEndian.AppendUint64(append(dst, prefixFinishedTime), uint64(at)^1<<63)
	return binary.BigEndian.AppendUint64(dst, seq)
}

// finishedTimeKeyLen is the length of a time key: T, time, Seq.
const finishedTimeKeyLen = 1 + 8 + 8

// cutQueue cuts a uvarint length and that many bytes, a queue name, off
// the front of b (a key after its prefix byte).
func cutQueue(b []byte) (queue, rest []byte, ok bool) {
	n, w := binary.Uvarint(b)
	if w <= 0 || uint64(len(b)-w) < n {
		return nil, nil, false
	}
	return b[w : w+int(n)], b[w+int(n):], true
}

// prefixEnd returns the smallest key above every key that starts with p,
// for an iterator's upper bound, or nil when there is none (p is all
// 0xff).
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil
}

// errNotTaskKey is the error for a key in the task range that is not a
// well-formed task key.
func errNotTaskKey(key []byte) error {
	return fmt.Errorf("%w: key %x: not a task key", store.ErrCorrupt, key)
}
