package pebblestore

import (
	"encoding/binary"
	"fmt"

	"github.com/hourglass-go/hourglass/store"
)

// Key prefixes: the first byte of every key says what the key holds. The
// layout is explained with an example in the package doc (doc.go).
const (
	prefixMeta     = 'm' // m + job id (8 bytes, big-endian) → task record
	prefixPayload  = 'p' // p + job id → payload
	prefixIndex    = 'i' // i + uvarint(len(queue)) + queue + id → job id
	prefixList     = 'q' // q + uvarint(len(queue)) + queue + job id → nothing
	prefixSchedule = 's' // s + name → schedule
)

// Single keys.
var (
	keyFormat  = []byte("f") // the format version of the store (formatVersion)
	keyNextJob = []byte("n") // the job id high-water mark (Store.NextJobID)
	keyRunning = []byte("r") // present while a Store is open: see Open
)

// jobKeyLen is the length of a meta or payload key: a prefix byte and the
// job id.
const jobKeyLen = 1 + 8

// metaLower and metaUpper bound the meta keys, the range Recover scans.
var (
	metaLower = []byte{prefixMeta}
	metaUpper = []byte{prefixMeta + 1}
)

// jobKey appends prefix and jobID (big-endian, so keys sort by job id) to
// dst.
func jobKey(dst []byte, prefix byte, jobID uint64) []byte {
	dst = append(dst, prefix)
	return binary.BigEndian.AppendUint64(dst, jobID)
}

// jobIDOf returns the job id of a meta or payload key.
func jobIDOf(key []byte) (uint64, error) {
	if len(key) != jobKeyLen {
		return 0, fmt.Errorf("%w: key %x: not a job key", store.ErrCorrupt, key)
	}
	return binary.BigEndian.Uint64(key[1:]), nil
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

// listKey appends the list key of jobID in queue to dst.
func listKey(dst []byte, queue string, jobID uint64) []byte {
	return binary.BigEndian.AppendUint64(queueKey(dst, prefixList, queue), jobID)
}

// scheduleKey appends the key of the schedule named name to dst.
func scheduleKey(dst []byte, name string) []byte {
	return append(append(dst, prefixSchedule), name...)
}

// prefixEnd returns the smallest key above every key that starts with p,
// for an iterator's upper bound, or nil when there is none (p is all
// 0xff).
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil
}
