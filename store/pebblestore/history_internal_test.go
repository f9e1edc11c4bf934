package pebblestore

import (
	"bytes"
	"testing"

	"github.com/hourglass-go/hourglass/store"
)

// FuzzHistoryRecords: attempts, Finished records and time entries decode
// to what was encoded; any bytes that decode are a record whose encoding
// decodes to the same; and a record cut short or followed by a byte is
// refused.
func FuzzHistoryRecords(f *testing.F) {
	f.Add([]byte{}, int64(0), int64(0), int32(0), uint64(0), uint32(0), "", "", "")
	f.Add(appendFinished(nil, &store.Finished{ID: "a"}), int64(-1), int64(1<<62), int32(-500), uint64(1<<63), uint32(7), "acked", "boom ✗", "node-1")
	f.Fuzz(func(t *testing.T, raw []byte, t1, t2 int64, status int32, job uint64, n uint32, s1, s2, s3 string) {
		a := store.Attempt{Started: t1, Ended: t2, Status: status, Outcome: s1, Error: s2, Node: s3, Attempt: n, Queue: s2}
		fin := store.Finished{JobID: job, Finished: t1, Attempts: n, ID: s1, Outcome: s2, LastError: s3}
		type codec struct {
			name   string
			encode func() []byte
			decode func([]byte) (any, error)
			want   any
		}
		codecs := []codec{
			{"attempt", func() []byte { return appendAttempt(nil, &a) },
				func(b []byte) (any, error) { var x store.Attempt; err := decodeAttempt(b, &x); return x, err }, a},
			{"finished", func() []byte { return appendFinished(nil, &fin) },
				func(b []byte) (any, error) { var x store.Finished; err := decodeFinished(b, &x); return x, err }, fin},
			{"time entry", func() []byte { return appendTimeEntry(nil, &store.Finished{JobID: job, Queue: s1, ID: s2}) },
				func(b []byte) (any, error) {
					j, q, id, err := decodeTimeEntry(b)
					return store.Finished{JobID: j, Queue: q, ID: id}, err
				}, store.Finished{JobID: job, Queue: s1, ID: s2}},
		}
		reencode := func(c codec, v any) []byte {
			switch v := v.(type) {
			case store.Attempt:
				return appendAttempt(nil, &v)
			case store.Finished:
				if c.name == "time entry" {
					return appendTimeEntry(nil, &v)
				}
				return appendFinished(nil, &v)
			}
			panic(c.name)
		}
		for _, c := range codecs {
			body := c.encode()
			got, err := c.decode(body)
			if err != nil || got != c.want {
				t.Fatalf("%s: decode(encode(%+v)) = %+v, %v", c.name, c.want, got, err)
			}
			if _, err := c.decode(body[:len(body)-1]); err == nil {
				t.Fatalf("%s: a body cut short by a byte decodes", c.name)
			}
			if _, err := c.decode(append(body, 0)); err == nil {
				t.Fatalf("%s: a body with a byte after it decodes", c.name)
			}
			first, err := c.decode(raw)
			if err != nil {
				continue
			}
			second, err := c.decode(reencode(c, first))
			if err != nil || second != first || !bytes.Equal(reencode(c, first), reencode(c, second)) {
				t.Fatalf("%s: decode(%x) = %+v, whose encoding decodes to %+v, %v", c.name, raw, first, second, err)
			}
		}
	})
}
