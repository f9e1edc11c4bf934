package pebblestore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/hourglass-go/hourglass/store"
	"github.com/hourglass-go/hourglass/task"
)

// Every value ends with a CRC-32C (Castagnoli) of its key and its body,
// little-endian:
//
//	value = body | crc32c(key | body)
//
// Summing the key too catches a value that is read under a key it was not
// written for. Integers inside bodies are little-endian; integers inside
// keys are big-endian, so that keys sort by them.

// crcLen is the length of the checksum at the end of every value.
const crcLen = 4

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checksum returns the CRC-32C of key followed by body.
func checksum(key, body []byte) uint32 {
	return crc32.Update(crc32.Update(0, castagnoli, key), castagnoli, body)
}

// seal appends the checksum of key and body to body and returns it: the
// value to store under key.
func seal(key, body []byte) []byte {
	return binary.LittleEndian.AppendUint32(body, checksum(key, body))
}

// unseal checks the checksum of value, read under key, and returns its
// body (a subslice of value), or an error wrapping [store.ErrCorrupt].
func unseal(key, value []byte) ([]byte, error) {
	if len(value) < crcLen {
		return nil, corrupt(key, "value of %d bytes has no checksum", len(value))
	}
	n := len(value) - crcLen
	body := value[:n]
	if binary.LittleEndian.Uint32(value[n:]) != checksum(key, body) {
		return nil, corrupt(key, "checksum mismatch")
	}
	return body, nil
}

// corrupt returns an error wrapping [store.ErrCorrupt] that names the
// record stored under key and says what is wrong with it.
func corrupt(key []byte, format string, args ...any) error {
	return fmt.Errorf("%w: %s (key %x): %s", store.ErrCorrupt, describe(key), key, fmt.Sprintf(format, args...))
}

// describe names the record stored under key, for errors.
func describe(key []byte) string {
	if len(key) == 0 {
		return "empty key"
	}
	switch key[0] {
	case prefixJob:
		kind, job, queue, ok := parseTaskKey(key)
		switch {
		case !ok:
		case kind == kindMeta:
			return fmt.Sprintf("task %d record", job)
		case kind == kindPayload:
			return fmt.Sprintf("task %d payload", job)
		default:
			return fmt.Sprintf("list entry of task %d in queue %q", job, queue)
		}
	case prefixIndex:
		n, w := binary.Uvarint(key[1:])
		if w <= 0 || uint64(len(key)-1-w) < n {
			break
		}
		queue, rest := key[1+w:1+w+int(n)], key[1+w+int(n):]
		return fmt.Sprintf("index entry of queue %q id %q", queue, rest)
	case prefixSchedule:
		return fmt.Sprintf("schedule %q", key[1:])
	case prefixQueue:
		return fmt.Sprintf("queue %q record", key[1:])
	case prefixAttempt:
		if len(key) == attemptKeyLen {
			return fmt.Sprintf("attempt %d of job %d", binary.BigEndian.Uint32(key[9:]), binary.BigEndian.Uint64(key[1:]))
		}
	case prefixFinished:
		if queue, rest, ok := cutQueue(key[1:]); ok && len(rest) == 8 {
			return fmt.Sprintf("finished record %d of queue %q", binary.BigEndian.Uint64(rest), queue)
		}
	case prefixFinishedID:
		if queue, id, ok := cutQueue(key[1:]); ok {
			return fmt.Sprintf("last finished entry of queue %q id %q", queue, id)
		}
	case prefixFinishedTime:
		if len(key) == finishedTimeKeyLen {
			return fmt.Sprintf("time entry of finished record %d", binary.BigEndian.Uint64(key[9:]))
		}
	case prefixDeduped:
		if queue, id, ok := cutQueue(key[1:]); ok {
			return fmt.Sprintf("dedupe record of queue %q id %q", queue, id)
		}
	case prefixDedupedUntil:
		if len(key) > 9 {
			if queue, id, ok := cutQueue(key[9:]); ok {
				return fmt.Sprintf("dedupe end entry of queue %q id %q", queue, id)
			}
		}
	}
	switch string(key) {
	case string(keyFormat):
		return "format record"
	case string(keyNextJob):
		return "next job id record"
	case string(keyRunning):
		return "running marker"
	case string(keyUpgrade):
		return "upgrade marker"
	case string(keyHistorySeq):
		return "history seq record"
	}
	return "unknown record"
}

// A task record (the body of a meta value) is 61 bytes of fixed fields,
// then four strings, each a uvarint length and its bytes, then one more
// fixed field:
//
//	off  len  field
//	  0    1  State
//	  1    4  Priority
//	  5    8  Due
//	 13    8  Created
//	 21    8  TTR (ns)
//	 29    4  Attempts
//	 33    4  MaxAttempts
//	 37    8  LeaseUntil
//	 45    4  Timeouts
//	 49    4  Releases
//	 53    4  Buries
//	 57    4  Kicks
//	 61       Queue, ID, Lease, LastError
//	      8  Reserved (when the current reservation began; for a dead task, when it died)
//	          TraceParent, TraceState (strings), only when either is not ""
//	          or a tagged field follows
//	          tagged fields: a tag byte and a value, a uvarint length and its bytes,
//	          in increasing order of tag, each only when not empty:
//	            tag 1  Key (task.Task.Key)
//
// LastError and Reserved came with format 3. A record of format 2 ends
// after Lease, and decodeMeta reads it with LastError "" and Reserved 0:
// a store of format 2 becomes one of format 3 without a record rewritten
// (upgrade.go), so a store may hold records of both shapes, and every
// record this package writes has all four strings and Reserved. Reserved
// follows the strings, not the other fixed fields, so that the two shapes
// are told apart by what follows Lease: nothing, or a string and exactly
// 8 bytes. The trace context came after format 3 and is written only
// for a task put with one: a record without it is the record of format 3
// byte for byte, and one with it is told by what follows Reserved.
// Tagged fields came after the trace context, so that a field added
// later costs nothing to a record without it: a record with one has the
// trace pair ("" and "" for none) before it, and a record without any is
// the record before them byte for byte. A tag this package does not know
// makes the record corrupt (it was written by a newer format).
//
// The job id is in the key and the payload under its own key, so reading
// every record (Recover) reads no payload.
const metaFixedLen = 1 + 4 + 8 + 8 + 8 + 4 + 4 + 8 + 4*4

// appendMeta appends the record of t (without job id and payload) to dst.
func appendMeta(dst []byte, t *store.Task) []byte {
	le := binary.LittleEndian
	dst = append(dst, byte(t.State))
	dst = le.AppendUint32(dst, t.Priority)
	dst = le.AppendUint64(dst, uint64(t.Due))
	dst = le.AppendUint64(dst, uint64(t.Created))
	dst = le.AppendUint64(dst, uint64(t.TTR))
	dst = le.AppendUint32(dst, t.Attempts)
	dst = le.AppendUint32(dst, t.MaxAttempts)
	dst = le.AppendUint64(dst, uint64(t.LeaseUntil))
	dst = le.AppendUint32(dst, t.Timeouts)
	dst = le.AppendUint32(dst, t.Releases)
	dst = le.AppendUint32(dst, t.Buries)
	dst = le.AppendUint32(dst, t.Kicks)
	dst = appendString(dst, t.Queue)
	dst = appendString(dst, t.ID)
	dst = appendString(dst, t.Lease)
	dst = appendString(dst, t.LastError)
	dst = le.AppendUint64(dst, uint64(t.Reserved))
	if t.TraceParent != "" || t.TraceState != "" || t.Key != "" {
		dst = appendString(dst, t.TraceParent)
		dst = appendString(dst, t.TraceState)
	}
	if t.Key != "" {
		dst = append(dst, tagKey)
		dst = appendString(dst, t.Key)
	}
	return dst
}

// Tags of a task record's tagged fields (see appendMeta).
const (
	tagKey = 1 // store.Task.Key
)

// errShort is what the decoders report for a body that ends too soon.
var errShort = errors.New("record ends too soon")

// decodeMeta decodes a task record into t, leaving JobID and Payload as
// they are. queue makes the string of the queue name, so that a caller
// reading many records can share one string per queue; nil allocates.
func decodeMeta(body []byte, t *store.Task, queue func([]byte) string) error {
	if len(body) < metaFixedLen {
		return errShort
	}
	le := binary.LittleEndian
	t.State = store.State(body[0])
	t.Priority = le.Uint32(body[1:])
	t.Due = int64(le.Uint64(body[5:]))
	t.Created = int64(le.Uint64(body[13:]))
	t.TTR = time.Duration(le.Uint64(body[21:]))
	t.Attempts = le.Uint32(body[29:])
	t.MaxAttempts = le.Uint32(body[33:])
	t.LeaseUntil = int64(le.Uint64(body[37:]))
	t.Timeouts = le.Uint32(body[45:])
	t.Releases = le.Uint32(body[49:])
	t.Buries = le.Uint32(body[53:])
	t.Kicks = le.Uint32(body[57:])
	rest := body[metaFixedLen:]
	q, rest, err := cutString(rest)
	if err != nil {
		return err
	}
	if queue != nil {
		t.Queue = queue(q)
	} else {
		t.Queue = string(q)
	}
	id, rest, err := cutString(rest)
	if err != nil {
		return err
	}
	lease, rest, err := cutString(rest)
	if err != nil {
		return err
	}
	var lastError []byte
	var reserved int64
	if len(rest) != 0 { // absent from a record of format 2
		if lastError, rest, err = cutString(rest); err != nil {
			return err
		}
		if len(rest) < 8 {
			return errShort
		}
		reserved, rest = int64(le.Uint64(rest)), rest[8:]
	}
	var parent, state []byte
	if len(rest) != 0 { // only a task put with a trace context has one
		if parent, rest, err = cutString(rest); err != nil {
			return err
		}
		if state, rest, err = cutString(rest); err != nil {
			return err
		}
	}
	var key []byte
	for last := byte(0); len(rest) != 0; {
		tag := rest[0]
		if tag <= last {
			return fmt.Errorf("tag %d after tag %d", tag, last)
		}
		last = tag
		var v []byte
		if v, rest, err = cutString(rest[1:]); err != nil {
			return err
		}
		switch tag {
		case tagKey:
			key = v
		default:
			return fmt.Errorf("unknown tag %d", tag)
		}
	}
	if t.State != store.Waiting && t.State != store.Reserved && t.State != store.Dead {
		return fmt.Errorf("invalid state %d", t.State)
	}
	t.ID, t.Lease, t.LastError = string(id), string(lease), string(lastError)
	t.Reserved = reserved
	t.TraceParent, t.TraceState = string(parent), string(state)
	t.Key = string(key)
	return nil
}

// A schedule (the body of a schedule value) is Created and Last (8 bytes
// each), Cron, Queue and Timezone (each a uvarint length and its bytes),
// then the payload to the end. The name is in the key.
//
// Format 3 adds the schedule's options after Timezone, and says so by the
// top bit of Created, which a Unix time in ns never sets (a schedule of
// format 2 reads with the defaults):
//
//	Misfire, Overlap        strings
//	CatchUp, TTR            varint ns
//	Priority, MaxAttempts   uvarint, varint
//	Paused                  1 byte, 0 or 1
//	LastRun                 varint ns
//	LastID                  string

// scheduleOptions is the top bit of Created: the options follow Timezone.
const scheduleOptions = uint64(1) << 63

// appendSchedule appends the body of s (without its name) to dst.
func appendSchedule(dst []byte, s *store.Schedule) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, uint64(s.Created)|scheduleOptions)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(s.Last))
	dst = appendString(dst, s.Cron)
	dst = appendString(dst, s.Queue)
	dst = appendString(dst, s.Timezone)
	dst = appendString(dst, s.Misfire)
	dst = appendString(dst, s.Overlap)
	dst = binary.AppendVarint(dst, s.CatchUp)
	dst = binary.AppendVarint(dst, s.TTR)
	dst = binary.AppendUvarint(dst, uint64(s.Priority))
	dst = binary.AppendVarint(dst, int64(s.MaxAttempts))
	paused := byte(0)
	if s.Paused {
		paused = 1
	}
	dst = append(dst, paused)
	dst = binary.AppendVarint(dst, s.LastRun)
	dst = appendString(dst, s.LastID)
	return append(dst, s.Payload...)
}

// decodeSchedule decodes a schedule body into s, leaving Name as it is.
func decodeSchedule(body []byte, s *store.Schedule) error {
	d := decoder{b: body}
	created := d.uint64()
	s.Last = int64(d.uint64())
	s.Cron, s.Queue, s.Timezone = d.string(), d.string(), d.string()
	s.Created = int64(created &^ scheduleOptions)
	if created&scheduleOptions != 0 {
		s.Misfire, s.Overlap = d.string(), d.string()
		s.CatchUp, s.TTR = d.varint(), d.varint()
		priority := d.uvarint()
		if priority > math.MaxUint32 && d.err == nil {
			d.err = fmt.Errorf("priority %d over 32 bits", priority)
		}
		s.Priority = uint32(priority)
		s.MaxAttempts = d.int()
		s.Paused = d.present("paused")
		s.LastRun = d.varint()
		s.LastID = d.string()
	} else {
		s.Misfire, s.Overlap, s.CatchUp, s.TTR = "", "", 0, 0
		s.Priority, s.MaxAttempts, s.Paused, s.LastRun, s.LastID = task.DefaultPriority, 0, false, 0, ""
	}
	if d.err != nil {
		return d.err
	}
	s.Payload = append([]byte{}, d.b...)
	return nil
}

// A queue record (the body of a queue value, format 3) is the pause,
// then the policy, each group of a pointer field after a byte saying
// whether it is there (1) or nil (0):
//
//	len  field
//	  8  PausedUntil
//	  8  Pauses
//	  1  Retry present; if so:
//	       Initial, Max (varint ns), Multiplier, Jitter (8 bytes each:
//	       float64 bits)
//	     MaxAttempts, TTR (varint, ns)
//	  1  Rate present; if so:
//	       Limit, Per (ns), Burst (varint)
//	     Concurrency (varint)
//	     DeadLetter (a string: a uvarint length and its bytes)
//	  1  Push present; if so:
//	       URL (string), Timeout (varint ns),
//	       the number of headers (uvarint), then each header's name and
//	       value (strings), by name (bytewise, strictly increasing),
//	       Secret (string),
//	       NextSecret (string), only when not "" or a trailer follows
//	       (a record of format 3 before it came ends at Secret, and
//	       reads with none)
//	     trailers, each a tag byte and its value, in increasing order of
//	     tag, none when every field they hold is 0 (a record written
//	     before they came has none):
//	       'd' Dedupe (varint ns), present when not 0
//	       'k' PerKey, present when not nil: Concurrency (varint), then
//	           1 and Rate's Limit, Per (ns), Burst (varints), or 0
//	       't' TokensAt (varint Unix ns), then Tokens (8 bytes: float64
//	           bits), present when TokensAt is not 0
//	       'r' KeyBuckets, present when not empty: their number
//	           (uvarint), then each one's Key (string), At (varint Unix
//	           ns) and Tokens (8 bytes: float64 bits)
//
// Varints are signed (zig-zag, binary.AppendVarint), so that every value
// of the fields reads back as written, including those service.CheckPolicy
// refuses. A push endpoint with no headers reads back with Headers nil.
// The name is in the key. A queue with the default policy and no pause is
// 23 bytes, 27 with the checksum.

// appendQueue appends the body of q (without its name) to dst.
func appendQueue(dst []byte, q *store.Queue) []byte {
	le := binary.LittleEndian
	p := &q.Policy
	dst = le.AppendUint64(dst, uint64(q.PausedUntil))
	dst = le.AppendUint64(dst, q.Pauses)
	if r := p.Retry; r != nil {
		dst = append(dst, 1)
		dst = binary.AppendVarint(dst, int64(r.Initial))
		dst = binary.AppendVarint(dst, int64(r.Max))
		dst = le.AppendUint64(dst, math.Float64bits(r.Multiplier))
		dst = le.AppendUint64(dst, math.Float64bits(r.Jitter))
	} else {
		dst = append(dst, 0)
	}
	dst = binary.AppendVarint(dst, int64(p.MaxAttempts))
	dst = binary.AppendVarint(dst, int64(p.TTR))
	if r := p.Rate; r != nil {
		dst = append(dst, 1)
		dst = binary.AppendVarint(dst, int64(r.Limit))
		dst = binary.AppendVarint(dst, int64(r.Per))
		dst = binary.AppendVarint(dst, int64(r.Burst))
	} else {
		dst = append(dst, 0)
	}
	dst = binary.AppendVarint(dst, int64(p.Concurrency))
	dst = appendString(dst, p.DeadLetter)
	dst = appendPush(dst, p.Push, p.Dedupe != 0 || p.PerKey != nil || q.TokensAt != 0 || len(q.KeyBuckets) > 0)
	if p.Dedupe != 0 {
		dst = append(dst, trailerDedupe)
		dst = binary.AppendVarint(dst, int64(p.Dedupe))
	}
	if k := p.PerKey; k != nil {
		dst = append(dst, trailerPerKey)
		dst = binary.AppendVarint(dst, int64(k.Concurrency))
		if r := k.Rate; r != nil {
			dst = append(dst, 1)
			dst = binary.AppendVarint(dst, int64(r.Limit))
			dst = binary.AppendVarint(dst, int64(r.Per))
			dst = binary.AppendVarint(dst, int64(r.Burst))
		} else {
			dst = append(dst, 0)
		}
	}
	if q.TokensAt != 0 {
		dst = append(dst, trailerTokens)
		dst = binary.AppendVarint(dst, q.TokensAt)
		dst = le.AppendUint64(dst, math.Float64bits(q.Tokens))
	}
	if len(q.KeyBuckets) > 0 {
		dst = append(dst, trailerKeyBuckets)
		dst = binary.AppendUvarint(dst, uint64(len(q.KeyBuckets)))
		for _, k := range q.KeyBuckets {
			dst = appendString(dst, k.Key)
			dst = binary.AppendVarint(dst, k.At)
			dst = le.AppendUint64(dst, math.Float64bits(k.Tokens))
		}
	}
	return dst
}

// The tags of a queue record's trailers, in the order they are written.
const (
	trailerDedupe     = 'd' // Policy.Dedupe
	trailerPerKey     = 'k' // Policy.PerKey
	trailerTokens     = 't' // the rate limit's bucket: TokensAt, Tokens
	trailerKeyBuckets = 'r' // the per-key rate's buckets not full
)

// appendPush appends the push group of a queue record: its presence byte
// and, when set, p's fields, headers sorted by name; the next secret even
// when "" if more (a trailer) follows.
func appendPush(dst []byte, p *task.Push, more bool) []byte {
	if p == nil {
		return append(dst, 0)
	}
	dst = append(dst, 1)
	dst = appendString(dst, p.URL)
	dst = binary.AppendVarint(dst, int64(p.Timeout))
	dst = binary.AppendUvarint(dst, uint64(len(p.Headers)))
	for _, name := range slices.Sorted(maps.Keys(p.Headers)) {
		dst = appendString(dst, name)
		dst = appendString(dst, p.Headers[name])
	}
	dst = appendString(dst, p.Secret)
	if p.NextSecret != "" || more {
		dst = appendString(dst, p.NextSecret)
	}
	return dst
}

// decodeQueue decodes a queue body into q, leaving Name as it is. It
// refuses a body that ends too soon, has bytes after its end, a presence
// byte other than 0 or 1, or an integer that does not fit its field.
func decodeQueue(body []byte, q *store.Queue) error {
	d := decoder{b: body}
	q.PausedUntil = int64(d.uint64())
	q.Pauses = d.uint64()
	var p task.Policy
	if d.present("retry") {
		p.Retry = &task.Retry{
			Initial:    time.Duration(d.varint()),
			Max:        time.Duration(d.varint()),
			Multiplier: math.Float64frombits(d.uint64()),
			Jitter:     math.Float64frombits(d.uint64()),
		}
	}
	p.MaxAttempts = d.int()
	p.TTR = time.Duration(d.varint())
	if d.present("rate") {
		p.Rate = &task.Rate{Limit: d.int(), Per: time.Duration(d.varint()), Burst: d.int()}
	}
	p.Concurrency = d.int()
	p.DeadLetter = d.string()
	if d.present("push") {
		p.Push = d.push()
	}
	if d.err == nil && len(d.b) > 0 && d.b[0] == trailerDedupe {
		d.b = d.b[1:]
		if p.Dedupe = time.Duration(d.varint()); p.Dedupe == 0 && d.err == nil {
			d.err = errors.New("a dedupe trailer of 0") // written only when set
		}
	}
	if d.err == nil && len(d.b) > 0 && d.b[0] == trailerPerKey {
		d.b = d.b[1:]
		p.PerKey = &task.PerKey{Concurrency: d.int()}
		if d.present("per_key.rate") {
			p.PerKey.Rate = &task.Rate{Limit: d.int(), Per: time.Duration(d.varint()), Burst: d.int()}
		}
	}
	if d.err == nil && len(d.b) > 0 && d.b[0] == trailerTokens {
		d.b = d.b[1:]
		q.TokensAt = d.varint()
		q.Tokens = math.Float64frombits(d.uint64())
		if q.TokensAt == 0 && d.err == nil {
			d.err = errors.New("a bucket trailer at time 0") // written only when set
		}
	} else {
		q.TokensAt, q.Tokens = 0, 0
	}
	q.KeyBuckets = nil
	if d.err == nil && len(d.b) > 0 && d.b[0] == trailerKeyBuckets {
		d.b = d.b[1:]
		n, k := binary.Uvarint(d.b)
		switch {
		case k <= 0 || n == 0:
			d.err = errors.New("a key buckets trailer without buckets") // written only when set
		case n > uint64(len(d.b)):
			d.err = errors.New("more key buckets than bytes")
		default:
			d.b = d.b[k:]
			q.KeyBuckets = make([]store.KeyBucket, 0, n)
			for range n {
				kb := store.KeyBucket{Key: d.string(), At: d.varint()}
				kb.Tokens = math.Float64frombits(d.uint64())
				q.KeyBuckets = append(q.KeyBuckets, kb)
			}
		}
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%d bytes after the record", len(d.b))
	}
	if d.err != nil {
		return d.err
	}
	q.Policy = p
	return nil
}

// decoder reads the fields of a body one after another; after the first
// error (kept in err) every read returns 0.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uint64() uint64 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 8 {
		d.err = errShort
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, w := binary.Varint(d.b)
	if w <= 0 {
		d.err = errShort
		if w < 0 {
			d.err = errors.New("varint overflows 64 bits")
		}
		return 0
	}
	d.b = d.b[w:]
	return v
}

// int reads a varint into an int, refusing one that does not fit.
func (d *decoder) int() int {
	v := d.varint()
	if int64(int(v)) != v && d.err == nil {
		d.err = fmt.Errorf("%d does not fit an int", v)
	}
	return int(v)
}

// string reads a string written by appendString.
func (d *decoder) string() string {
	if d.err != nil {
		return ""
	}
	var s []byte
	if s, d.b, d.err = cutString(d.b); d.err != nil {
		return ""
	}
	return string(s)
}

// push reads the fields of a push group after its presence byte. It
// refuses headers out of order or repeated, so that a body decodes to one
// record only and that record encodes back to it.
func (d *decoder) push() *task.Push {
	p := &task.Push{URL: d.string(), Timeout: time.Duration(d.varint())}
	n := d.uvarint()
	if d.err == nil && n > uint64(len(d.b))/2 {
		// Each header takes 2 bytes at least: a count above that is not
		// met, and must not size the map.
		d.err = fmt.Errorf("%d headers in %d bytes", n, len(d.b))
	}
	if d.err == nil && n > 0 {
		p.Headers = make(map[string]string, n)
		prev := ""
		for i := uint64(0); i < n && d.err == nil; i++ {
			name, value := d.string(), d.string()
			if i > 0 && name <= prev && d.err == nil {
				d.err = fmt.Errorf("header %q after %q: not in increasing order", name, prev)
			}
			p.Headers[name], prev = value, name
		}
	}
	p.Secret = d.string()
	if d.err == nil && len(d.b) > 0 {
		p.NextSecret = d.string()
		if p.NextSecret == "" && d.err == nil && len(d.b) == 0 {
			// Written only when set: an empty one would not encode back.
			d.err = errors.New("an empty next secret")
		}
	}
	return p
}

// uvarint reads an unsigned varint.
func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, w := binary.Uvarint(d.b)
	if w <= 0 {
		d.err = errShort
		if w < 0 {
			d.err = errors.New("uvarint overflows 64 bits")
		}
		return 0
	}
	d.b = d.b[w:]
	return v
}

// present reads the presence byte of the group named what.
func (d *decoder) present(what string) bool {
	if d.err != nil {
		return false
	}
	if len(d.b) < 1 {
		d.err = errShort
		return false
	}
	c := d.b[0]
	d.b = d.b[1:]
	if c > 1 {
		d.err = fmt.Errorf("%s presence byte %d, want 0 or 1", what, c)
	}
	return c == 1
}

// appendString appends s as a uvarint length and its bytes.
func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// cutString cuts a string written by appendString off the front of b.
func cutString(b []byte) (s, rest []byte, err error) {
	n, w := binary.Uvarint(b)
	if w <= 0 || uint64(len(b)-w) < n {
		return nil, nil, errShort
	}
	return b[w : w+int(n)], b[w+int(n):], nil
}

// appendUint64 appends v, the body of an index value and of the next job
// id record.
func appendUint64(dst []byte, v uint64) []byte {
	return binary.LittleEndian.AppendUint64(dst, v)
}

// decodeUint64 decodes a body written by appendUint64.
func decodeUint64(body []byte) (uint64, error) {
	if len(body) != 8 {
		return 0, fmt.Errorf("%d bytes, want 8", len(body))
	}
	return binary.LittleEndian.Uint64(body), nil
}
