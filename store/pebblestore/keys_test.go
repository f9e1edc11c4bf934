package pebblestore

import (
	"bytes"
	"strconv"
	"testing"
)

// FuzzTaskKey: every task key parses back to what made it, and any bytes
// that parse as a task key are exactly the key their parts make (so a
// corrupt key is never taken for another task's).
func FuzzTaskKey(f *testing.F) {
	f.Add([]byte("j\x00\x00\x00\x00\x00\x00\x00\x00m\x00\x00\x00\x00\x00\x00\x00\x2a"), "mail", uint64(42), uint8(0))
	f.Add([]byte("j\x00\x00\x00\x00\x00\x00\x00\x01q\x01a\x00\x00\x00\x00\x00\x00\x10\x00"), "", uint64(1<<63), uint8(2))
	f.Fuzz(func(t *testing.T, raw []byte, queue string, job uint64, which uint8) {
		var key []byte
		switch which % 3 {
		case 0:
			key = taskKey(nil, kindMeta, job)
		case 1:
			key = taskKey(nil, kindPayload, job)
		default:
			key = listKey(nil, queue, job)
		}
		kind, gotJob, gotQueue, ok := parseTaskKey(key)
		if !ok || gotJob != job || (kind == kindList && string(gotQueue) != queue) {
			t.Fatalf("parseTaskKey(%x) = %c %d %q %v; want job %d queue %q", key, kind, gotJob, gotQueue, ok, job, queue)
		}
		if kind, job, q, ok := parseTaskKey(raw); ok {
			var again []byte
			if kind == kindList {
				again = listKey(nil, string(q), job)
			} else {
				again = taskKey(nil, kind, job)
			}
			if !bytes.Equal(again, raw) {
				t.Fatalf("parseTaskKey(%x) = %c %d %q, which make %x", raw, kind, job, q, again)
			}
		}
		_ = describe(raw)
	})
}

// TestParseJobID: canonical decimal only, so that one job id has one
// implicit id.
func TestParseJobID(t *testing.T) {
	for _, c := range []struct {
		id   string
		want uint64
		ok   bool
	}{
		{"1", 1, true}, {"42", 42, true}, {"18446744073709551615", 1<<64 - 1, true},
		{"18446744073709551616", 0, false}, {"0", 0, false}, {"042", 0, false}, {"+4", 0, false},
		{"4 ", 0, false}, {"", 0, false}, {"4a", 0, false}, {"99999999999999999999", 0, false},
	} {
		got, ok := parseJobID(c.id)
		if got != c.want || ok != c.ok {
			t.Errorf("parseJobID(%q) = %d, %v; want %d, %v", c.id, got, ok, c.want, c.ok)
		}
		if ok && strconv.FormatUint(got, 10) != c.id {
			t.Errorf("parseJobID(%q) = %d, which prints differently", c.id, got)
		}
	}
}

// TestDescribe_History: errors name each record of the history, and a
// key under a history prefix of the wrong shape as unknown.
func TestDescribe_History(t *testing.T) {
	for _, c := range []struct {
		key  []byte
		want string
	}{
		{attemptKey(nil, 42, 3), "attempt 3 of job 42"},
		{finishedKey(nil, "mail", 7), `finished record 7 of queue "mail"`},
		{finishedIDKey(nil, "mail", "welcome-7"), `last finished entry of queue "mail" id "welcome-7"`},
		{finishedIDKey(nil, "", ""), `last finished entry of queue "" id ""`},
		{finishedTimeKey(nil, -5, 7), "time entry of finished record 7"},
		{keyHistorySeq, "history seq record"},
		{attemptsKey(nil, 42), "unknown record"},
		{queueKey(nil, prefixFinished, "mail"), "unknown record"},
		{[]byte{prefixFinishedID, 9, 'a'}, "unknown record"},
		{[]byte{prefixFinishedTime, 1}, "unknown record"},
	} {
		if got := describe(c.key); got != c.want {
			t.Errorf("describe(%x) = %q, want %q", c.key, got, c.want)
		}
	}
}
