package pebblestore

import (
	"bytes"
	"encoding/binary"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/store"
	"github.com/hourglass-go/hourglass/task"
)

// FuzzQueueRecord: every queue record decodes to what was encoded, nil
// Retry, Rate and Push included, and a rate limit's bucket, a push endpoint's headers whatever their
// order in the map; and any bytes that decode are a record whose encoding
// decodes to the same (a body never decodes to two records).
func FuzzQueueRecord(f *testing.F) {
	f.Add([]byte{}, int64(0), uint64(0), uint8(0), int64(0), int64(0), 0.0, 0.0, 0, int64(0), 0, 0, "", "", "")
	f.Add(appendQueue(nil, &store.Queue{}), int64(math.MaxInt64), uint64(3), uint8(7),
		int64(time.Second), int64(time.Hour), 2.0, 0.25, 5, int64(30*time.Second), 100, 3, "mail-dead",
		"https://example.com/hook", "X-B:2\nX-A:1\nAuthorization:Bearer t")
	f.Add([]byte("\xff\xff\xff\xff\xff\xff\xff\x7f\x02\x00\x00\x00\x00\x00\x00\x00\x02"), int64(-1), uint64(math.MaxUint64), uint8(1),
		int64(math.MinInt64), int64(-5), math.Inf(1), math.Copysign(0, -1), math.MinInt, int64(math.MaxInt64), math.MaxInt, -7, "\x00\xff", "", "")
	f.Fuzz(func(t *testing.T, raw []byte, paused int64, pauses uint64, which uint8,
		d1, d2 int64, mul, jit float64, n1 int, ttr int64, n2, n3 int, dead, url, headers string) {
		q := store.Queue{PausedUntil: paused, Pauses: pauses, Policy: task.Policy{
			MaxAttempts: n1, TTR: time.Duration(ttr), Concurrency: n3, DeadLetter: dead,
		}}
		if which&1 != 0 {
			q.Policy.Retry = &task.Retry{Initial: time.Duration(d1), Max: time.Duration(d2), Multiplier: mul, Jitter: jit}
		}
		if which&2 != 0 {
			q.Policy.Rate = &task.Rate{Limit: n2, Per: time.Duration(d1), Burst: n3}
		}
		if which&16 != 0 {
			q.Policy.Dedupe = time.Duration(d2)
		}
		if which&32 != 0 && ttr != 0 {
			q.TokensAt, q.Tokens = ttr, jit
		}
		if which&4 != 0 {
			p := &task.Push{URL: url, Timeout: time.Duration(d2), Secret: dead}
			if which&8 != 0 {
				p.NextSecret = url
			}
			for line := range strings.SplitSeq(headers, "\n") {
				if name, value, ok := strings.Cut(line, ":"); ok {
					if p.Headers == nil {
						p.Headers = map[string]string{}
					}
					p.Headers[name] = value
				}
			}
			q.Policy.Push = p
		}
		body := appendQueue(nil, &q)
		var got store.Queue
		if err := decodeQueue(body, &got); err != nil {
			t.Fatalf("decodeQueue(appendQueue(%+v)): %v", q, err)
		}
		// Float64 bits, not ==: NaN and -0 must come back as they were.
		if again := appendQueue(nil, &got); !bytes.Equal(again, body) {
			t.Fatalf("round trip of %+v: %x, want %x", q, again, body)
		}
		if math.IsNaN(mul) || math.IsNaN(jit) {
			return // NaN != NaN: reflect.DeepEqual cannot say
		}
		if !reflect.DeepEqual(got, q) {
			t.Fatalf("decodeQueue(appendQueue(%+v)) = %+v", q, got)
		}

		var first, second store.Queue
		if decodeQueue(raw, &first) != nil {
			return
		}
		if err := decodeQueue(appendQueue(nil, &first), &second); err != nil {
			t.Fatalf("decodeQueue(%x) = %+v, whose encoding does not decode: %v", raw, first, err)
		}
		if !bytes.Equal(appendQueue(nil, &first), appendQueue(nil, &second)) {
			t.Fatalf("decodeQueue(%x) = %+v, and its encoding decodes to %+v", raw, first, second)
		}
	})
}

// TestDecodeMeta_Format2 decodes a record as format 2 wrote it, ending
// after the lease: its last error is "" and Reserved 0. A record of
// format 3 reads back whole; one with bytes after Reserved, or cut short
// in its last error or Reserved, is refused.
func TestDecodeMeta_Format2(t *testing.T) {
	tk := store.Task{Queue: "mail", ID: "x", State: store.Reserved, Lease: "l-1", LastError: "boom", Reserved: 1<<62 + 5}
	body := appendMeta(nil, &tk)
	v2 := body[:len(body)-8-len(tk.LastError)-1]
	var got store.Task
	if err := decodeMeta(v2, &got, nil); err != nil || got.Lease != "l-1" || got.LastError != "" || got.Reserved != 0 {
		t.Errorf("decodeMeta(format 2 record) = %+v, %v; want lease l-1, no last error, no reservation", got, err)
	}
	if err := decodeMeta(body, &got, nil); err != nil || got.LastError != "boom" || got.Reserved != tk.Reserved {
		t.Errorf("decodeMeta(format 3 record) = %+v, %v; want last error boom, reserved %d", got, err, tk.Reserved)
	}
	if err := decodeMeta(append(body, 0), &got, nil); err == nil {
		t.Errorf("decodeMeta of a record with a byte after Reserved: no error")
	}
	for cut := 1; cut <= 8+len(tk.LastError); cut++ {
		if err := decodeMeta(body[:len(body)-cut], &got, nil); err == nil {
			t.Errorf("decodeMeta of a record cut %d bytes short: no error", cut)
		}
	}
}

// TestDecodeMeta_Trace: a record without a trace context is the record
// of format 3 byte for byte; one with it reads back whole, and one cut
// short in its trace context is refused.
func TestDecodeMeta_Trace(t *testing.T) {
	plain := store.Task{Queue: "mail", ID: "x", State: store.Waiting, LastError: "boom", Reserved: 7}
	if got, want := len(appendMeta(nil, &plain)), metaFixedLen+4+len("mail")+len("x")+len("boom")+8; got != want {
		t.Errorf("a record without a trace context is %d bytes, want %d (format 3's)", got, want)
	}
	tk := plain
	tk.TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tk.TraceState = "rojo=00f067aa0ba902b7"
	body := appendMeta(nil, &tk)
	var got store.Task
	if err := decodeMeta(body, &got, nil); err != nil || got.TraceParent != tk.TraceParent || got.TraceState != tk.TraceState ||
		got.LastError != "boom" || got.Reserved != 7 {
		t.Errorf("decodeMeta(record with a trace) = %+v, %v; want its trace, last error and reserved", got, err)
	}
	for cut := 1; cut <= len(tk.TraceParent)+len(tk.TraceState)+1; cut++ {
		if err := decodeMeta(body[:len(body)-cut], &got, nil); err == nil {
			t.Errorf("decodeMeta of a record cut %d bytes short in its trace: no error", cut)
		}
	}
	if err := decodeMeta(append(body, 0), &got, nil); err == nil {
		t.Errorf("decodeMeta of a record with a byte after its trace: no error")
	}
}

// TestDecodeMeta_Key: a task's key is tagged field 1 after the trace
// pair, written as two empty strings when the task has no trace; a
// record with a trace and no key is the record before tagged fields byte
// for byte, and a record whose tagged fields are cut short, out of
// order or of an unknown tag is refused.
func TestDecodeMeta_Key(t *testing.T) {
	plain := store.Task{Queue: "mail", ID: "x", State: store.Waiting, LastError: "boom", Reserved: 7}
	traced := plain
	traced.TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	want := len(appendMeta(nil, &traced))
	for _, tk := range []store.Task{plain, traced} {
		tk.Key = "tenant-42"
		body := appendMeta(nil, &tk)
		withoutKey := tk
		withoutKey.Key = ""
		if tk.TraceParent != "" && len(appendMeta(nil, &withoutKey)) != want {
			t.Errorf("a traced record without a key changed length")
		}
		if got, want := len(body), len(appendMeta(nil, &withoutKey))+1+1+len(tk.Key)+2*btoi(tk.TraceParent == ""); got != want {
			t.Errorf("record with key %q and trace %q is %d bytes, want %d", tk.Key, tk.TraceParent, got, want)
		}
		var got store.Task
		if err := decodeMeta(body, &got, nil); err != nil || got.Key != tk.Key || got.TraceParent != tk.TraceParent ||
			got.LastError != "boom" || got.Reserved != 7 {
			t.Errorf("decodeMeta(record with a key) = %+v, %v; want key %q, trace %q", got, err, tk.Key, tk.TraceParent)
		}
		for cut := 1; cut <= len(tk.Key)+1; cut++ {
			if err := decodeMeta(body[:len(body)-cut], &got, nil); err == nil {
				t.Errorf("decodeMeta of a record cut %d bytes short in its key: no error", cut)
			}
		}
		if err := decodeMeta(append(slices.Clone(body), 1, 1, 'k'), &got, nil); err == nil {
			t.Errorf("decodeMeta of a record with tag 1 twice: no error")
		}
		if err := decodeMeta(append(slices.Clone(body), 9, 1, 'k'), &got, nil); err == nil {
			t.Errorf("decodeMeta of a record with an unknown tag: no error")
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestDecodeQueue_Tokens: a rate limit's bucket is a trailer after the
// dedupe one: a record without it is the record written before it came,
// byte for byte, and reads with a full bucket (TokensAt 0); one with it,
// with or without a dedupe window or a push endpoint before it, reads
// back whole; trailers out of order, a bucket at time 0 or one cut short
// are refused.
func TestDecodeQueue_Tokens(t *testing.T) {
	rate := &task.Rate{Limit: 1, Per: time.Hour}
	plain := store.Queue{Pauses: 1, Policy: task.Policy{Rate: rate, Dedupe: time.Minute}}
	old := appendQueue(nil, &plain)
	for _, q := range []store.Queue{
		{Policy: task.Policy{Rate: rate}, Tokens: 0.25, TokensAt: 1 << 60},
		{Policy: task.Policy{Rate: rate, Dedupe: time.Minute}, Tokens: 3, TokensAt: 7},
		{Policy: task.Policy{Rate: rate, Push: &task.Push{URL: "http://127.0.0.1:9/"}}, TokensAt: -1},
	} {
		body := appendQueue(nil, &q)
		var got store.Queue
		if err := decodeQueue(body, &got); err != nil || !reflect.DeepEqual(got, q) {
			t.Errorf("decodeQueue(appendQueue(%+v)) = %+v, %v", q, got, err)
		}
		for cut := 1; cut <= 9; cut++ {
			if err := decodeQueue(body[:len(body)-cut], &got); err == nil {
				t.Errorf("decodeQueue of %+v cut %d bytes short: no error", q, cut)
			}
		}
	}
	got := store.Queue{Tokens: 9, TokensAt: 9}
	if err := decodeQueue(old, &got); err != nil || got.TokensAt != 0 || got.Tokens != 0 || got.Policy.Dedupe != time.Minute {
		t.Errorf("decodeQueue(record without a bucket) = %+v, %v; want a full bucket", got, err)
	}
	withBoth := appendQueue(nil, &store.Queue{Pauses: 1, Policy: plain.Policy, Tokens: 1, TokensAt: 5})
	if !bytes.HasPrefix(withBoth, old) {
		t.Fatalf("the bucket's trailer is not after the record without it: %x, %x", withBoth, old)
	}
	bucket := withBoth[len(old):]
	dedupe := binary.AppendVarint([]byte{trailerDedupe}, int64(time.Minute))
	if !bytes.HasSuffix(old, dedupe) {
		t.Fatalf("the record does not end with its dedupe trailer %x: %x", dedupe, old)
	}
	swapped := append(append(append([]byte{}, old[:len(old)-len(dedupe)]...), bucket...), dedupe...)
	if err := decodeQueue(swapped, &got); err == nil {
		t.Errorf("decodeQueue of trailers out of order: no error")
	}
	zero := append(append([]byte{}, old...), trailerTokens)
	zero = binary.AppendVarint(zero, 0)
	zero = binary.LittleEndian.AppendUint64(zero, 0)
	if err := decodeQueue(zero, &got); err == nil {
		t.Errorf("decodeQueue of a bucket trailer at time 0: no error")
	}
}

// TestDecodeQueue_KeyBuckets: the per-key rate's buckets are a trailer
// after the bucket's: a record without it is the record written before
// it came, byte for byte, and reads with none; one with it, with or
// without the trailers before it, reads back whole; one cut short, or
// with a count of 0, is refused.
func TestDecodeQueue_KeyBuckets(t *testing.T) {
	perKey := task.Policy{PerKey: &task.PerKey{Rate: &task.Rate{Limit: 1, Per: time.Hour, Burst: 2}}}
	keys := []store.KeyBucket{{Key: "tenant-42", Tokens: 0.5, At: 1 << 60}, {Key: "", Tokens: 1, At: 7}}
	old := appendQueue(nil, &store.Queue{Policy: perKey, Tokens: 1, TokensAt: 5})
	for _, q := range []store.Queue{
		{Policy: perKey, KeyBuckets: keys},
		{Policy: perKey, Tokens: 1, TokensAt: 5, KeyBuckets: keys[:1]},
		{Policy: task.Policy{PerKey: perKey.PerKey, Dedupe: time.Minute, Push: &task.Push{URL: "http://127.0.0.1:9/"}}, KeyBuckets: keys},
	} {
		body := appendQueue(nil, &q)
		var got store.Queue
		if err := decodeQueue(body, &got); err != nil || !reflect.DeepEqual(got, q) {
			t.Errorf("decodeQueue(appendQueue(%+v)) = %+v, %v", q, got, err)
		}
		for cut := 1; cut <= 9; cut++ {
			if err := decodeQueue(body[:len(body)-cut], &got); err == nil {
				t.Errorf("decodeQueue of %+v cut %d bytes short: no error", q, cut)
			}
		}
		if q.TokensAt == 5 && !bytes.HasPrefix(body, old) {
			t.Errorf("the key buckets' trailer is not after the record without it: %x, %x", body, old)
		}
	}
	got := store.Queue{KeyBuckets: keys}
	if err := decodeQueue(old, &got); err != nil || got.KeyBuckets != nil {
		t.Errorf("decodeQueue(record without key buckets) = %+v, %v; want none", got, err)
	}
	if err := decodeQueue(append(append([]byte{}, old...), trailerKeyBuckets, 0), &got); err == nil {
		t.Errorf("decodeQueue of a key buckets trailer of 0 buckets: no error")
	}
}
