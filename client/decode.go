package client

import (
	"encoding/json"
	"time"
	"unicode/utf8"

	"github.com/hourglass-go/hourglass/api"
)

// decodeReserve decodes a reserve's answer into out as json.Unmarshal
// does, faster for the answers a server writes.
//
// encoding/json takes a large part of a worker's CPU time on reserve
// answers (`hourglass-bench --scenario worker`): it scans the whole
// answer twice (once to check it, once to decode), reaches every field
// by reflection and copies each payload. fastReserve reads the form the server writes
// (httpapi's appendTask: known fields, strings without escapes, whole
// numbers) in one pass and keeps each payload as a slice of data, which
// the caller gives up; it reports false for anything else (an escape, an
// unknown or repeated field, a number out of range, malformed JSON), and
// json.Unmarshal decodes it then, so that the result, error included, is
// json.Unmarshal's (FuzzDecodeReserve holds them equal). Its cost is
// O(len(data)).
func decodeReserve(data []byte, out *api.ReserveResponse) error {
	if tasks, ok := fastReserve(data); ok {
		out.Tasks = tasks
		return nil
	}
	return json.Unmarshal(data, out)
}

// fastReserve decodes {"tasks":[TASK,...]} or {"tasks":null}.
func fastReserve(data []byte) ([]api.Task, bool) {
	d := decoder{b: data}
	if !d.byte('{') || !d.key("tasks") {
		return nil, false
	}
	var tasks []api.Task
	if d.literal("null") {
		// nil
	} else if !d.byte('[') {
		return nil, false
	} else {
		tasks = make([]api.Task, 0, 64)
		if !d.byte(']') {
			for {
				tasks = append(tasks, api.Task{})
				var prev *api.Task
				if len(tasks) > 1 {
					prev = &tasks[len(tasks)-2]
				}
				if !d.task(&tasks[len(tasks)-1], prev) {
					return nil, false
				}
				if d.byte(']') {
					break
				}
				if !d.byte(',') {
					return nil, false
				}
			}
		}
	}
	if !d.byte('}') {
		return nil, false
	}
	d.space()
	return tasks, d.i == len(d.b)
}

// decoder reads JSON from b at i; its methods skip white space before
// what they read and report whether they read it.
type decoder struct {
	b []byte
	i int
}

func (d *decoder) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// byte reads c.
func (d *decoder) byte(c byte) bool {
	d.space()
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

// literal reads the literal s (null, true, false).
func (d *decoder) literal(s string) bool {
	d.space()
	if len(d.b)-d.i >= len(s) && string(d.b[d.i:d.i+len(s)]) == s {
		d.i += len(s)
		return true
	}
	return false
}

// key reads "name": exactly.
func (d *decoder) key(name string) bool {
	k, ok := d.rawString()
	return ok && string(k) == name && d.byte(':')
}

// rawString reads a string without escapes or control characters and
// returns its bytes between the quotes.
func (d *decoder) rawString() ([]byte, bool) {
	if !d.byte('"') {
		return nil, false
	}
	start := d.i
	for ; d.i < len(d.b); d.i++ {
		switch c := d.b[d.i]; {
		case c == '"':
			d.i++
			return d.b[start : d.i-1], true
		case c < 0x20 || c == '\\':
			return nil, false
		}
	}
	return nil, false
}

// string reads a string as rawString does, valid UTF-8 only (where
// encoding/json would put U+FFFD).
func (d *decoder) string() (string, bool) {
	s, ok := d.rawString()
	if !ok {
		return "", false
	}
	for _, c := range s {
		if c >= utf8.RuneSelf {
			if !utf8.Valid(s) {
				return "", false
			}
			break
		}
	}
	return string(s), true
}

// stringLike reads a string as string does, answering field(prev)
// rather than a new string when prev is not nil and its field is the
// same (which fastReserve read, so it holds no escape, no control
// character and only valid UTF-8).
func (d *decoder) stringLike(prev *api.Task, field func(*api.Task) string) (string, bool) {
	if prev != nil {
		d.space()
		if s, i := field(prev), d.i; len(d.b)-i >= len(s)+2 && d.b[i] == '"' && d.b[i+1+len(s)] == '"' && string(d.b[i+1:i+1+len(s)]) == s {
			d.i += len(s) + 2
			return s, true
		}
	}
	return d.string()
}

// uint reads a whole number from 0 to limit.
func (d *decoder) uint(limit uint64) (uint64, bool) {
	d.space()
	start := d.i
	var n uint64
	for ; d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9'; d.i++ {
		c := uint64(d.b[d.i] - '0')
		if n > (limit-c)/10 {
			return 0, false
		}
		n = n*10 + c
	}
	digits := d.i - start
	if digits == 0 || digits > 1 && d.b[start] == '0' {
		return 0, false
	}
	// A fraction or exponent would follow here: not a whole number.
	if d.i < len(d.b) {
		switch d.b[d.i] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	return n, true
}

// quoted returns the string starting at i with its quotes, as an
// UnmarshalJSON method takes it.
func (d *decoder) quoted() ([]byte, bool) {
	d.space()
	start := d.i
	if _, ok := d.rawString(); !ok {
		return nil, false
	}
	return d.b[start:d.i], true
}

// The fields of api.Task, as bits of the set of those read.
const (
	fieldID = 1 << iota
	fieldJobID
	fieldQueue
	fieldState
	fieldPayload
	fieldPriority
	fieldDue
	fieldTTR
	fieldAttempts
	fieldMaxAttempts
	fieldCreated
	fieldLease
	fieldLeaseExpires
	fieldLastError
	fieldTraceparent
	fieldTracestate
	fieldKey
)

// maxInt is the largest int, as a limit of uint.
const maxInt = uint64(^uint(0) >> 1)

// task reads an api.Task object into t, whose fields are zero. Its
// queue and state share the strings of prev (the task before it, if not
// nil) when they are the same, as they mostly are in one answer.
func (d *decoder) task(t *api.Task, prev *api.Task) bool {
	if !d.byte('{') {
		return false
	}
	if d.byte('}') {
		return true
	}
	var seen int
	for {
		k, ok := d.rawString()
		if !ok || !d.byte(':') {
			return false
		}
		var f int
		switch string(k) {
		case "id":
			f = fieldID
			t.ID, ok = d.string()
		case "job_id":
			f = fieldJobID
			t.JobID, ok = d.uint(^uint64(0))
		case "queue":
			f = fieldQueue
			t.Queue, ok = d.stringLike(prev, func(p *api.Task) string { return p.Queue })
		case "state":
			f = fieldState
			t.State, ok = d.stringLike(prev, func(p *api.Task) string { return p.State })
		case "payload":
			f = fieldPayload
			d.space()
			start := d.i
			if ok = d.value(0); ok {
				t.Payload = json.RawMessage(d.b[start:d.i:d.i])
			}
		case "priority":
			f = fieldPriority
			var p uint64
			p, ok = d.uint(1<<32 - 1)
			t.Priority = uint32(p)
		case "due":
			f = fieldDue
			ok = d.time(&t.Due)
		case "ttr":
			f = fieldTTR
			var q []byte
			if q, ok = d.quoted(); ok {
				ok = t.TTR.UnmarshalJSON(q) == nil
			}
		case "attempts":
			f = fieldAttempts
			var n uint64
			n, ok = d.uint(maxInt)
			t.Attempts = int(n)
		case "max_attempts":
			f = fieldMaxAttempts
			var n uint64
			n, ok = d.uint(maxInt)
			t.MaxAttempts = int(n)
		case "created":
			f = fieldCreated
			ok = d.time(&t.Created)
		case "lease":
			f = fieldLease
			t.Lease, ok = d.string()
		case "lease_expires":
			f = fieldLeaseExpires
			var at time.Time
			if ok = d.time(&at); ok {
				t.LeaseExpires = &at
			}
		case "last_error":
			f = fieldLastError
			t.LastError, ok = d.string()
		case "traceparent":
			f = fieldTraceparent
			t.Traceparent, ok = d.string()
		case "tracestate":
			f = fieldTracestate
			t.Tracestate, ok = d.string()
		case "key":
			f = fieldKey
			t.Key, ok = d.string()
		default:
			return false
		}
		if !ok || seen&f != 0 {
			return false
		}
		seen |= f
		if d.byte('}') {
			return true
		}
		if !d.byte(',') {
			return false
		}
	}
}

// time reads a time string into t as time.Time's UnmarshalJSON does.
func (d *decoder) time(t *time.Time) bool {
	q, ok := d.quoted()
	return ok && t.UnmarshalJSON(q) == nil
}

// maxDepth bounds the nesting of a payload that value reads; deeper ones
// are left to encoding/json.
const maxDepth = 100

// value reads one JSON value of any kind, checking it as encoding/json
// does (strings may hold any bytes but control characters, and only
// valid escapes).
func (d *decoder) value(depth int) bool {
	if depth > maxDepth {
		return false
	}
	d.space()
	if d.i >= len(d.b) {
		return false
	}
	switch c := d.b[d.i]; {
	case c == '"':
		return d.anyString()
	case c == '{':
		d.i++
		if d.byte('}') {
			return true
		}
		for {
			d.space()
			if !d.anyString() || !d.byte(':') || !d.value(depth+1) {
				return false
			}
			if d.byte('}') {
				return true
			}
			if !d.byte(',') {
				return false
			}
		}
	case c == '[':
		d.i++
		if d.byte(']') {
			return true
		}
		for {
			if !d.value(depth + 1) {
				return false
			}
			if d.byte(']') {
				return true
			}
			if !d.byte(',') {
				return false
			}
		}
	case c == '-' || c >= '0' && c <= '9':
		return d.number()
	}
	return d.literal("null") || d.literal("true") || d.literal("false")
}

// anyString reads a JSON string with any valid escapes.
func (d *decoder) anyString() bool {
	if d.i >= len(d.b) || d.b[d.i] != '"' {
		return false
	}
	for d.i++; d.i < len(d.b); d.i++ {
		switch c := d.b[d.i]; {
		case c == '"':
			d.i++
			return true
		case c < 0x20:
			return false
		case c == '\\':
			d.i++
			if d.i >= len(d.b) {
				return false
			}
			switch d.b[d.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(d.b)-d.i < 5 {
					return false
				}
				for _, h := range d.b[d.i+1 : d.i+5] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return false
					}
				}
				d.i += 4
			default:
				return false
			}
		}
	}
	return false
}

// number reads a JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (d *decoder) number() bool {
	b, i := d.b, d.i
	digits := func() bool {
		start := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i > start
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case !digits():
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return false
		}
	}
	d.i = i
	return true
}
