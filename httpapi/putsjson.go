package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/hourglass-go/hourglass/api"
)

// The body of POST /v1/queues/{queue}/tasks:batch, up to api.MaxBatch
// puts, is read by hand when it has the plain form clients send, rather
// than through encoding/json's reflection, which costs several times as much
// (BenchmarkDecodePuts_100 and BenchmarkServer_PutBatch compare them).
// parsePuts takes the
// body if it is exactly
//
//	{"tasks":[{"id":"a","payload":{…},"delay":"1h"}, …]}
//
// with any JSON white space, and in each task the keys id, payload, delay,
// at, priority, ttr, max_attempts, replace, traceparent and tracestate,
// in any order or left out, each once: id, delay, at, ttr, traceparent
// and tracestate strings of printable ASCII without escapes (delay, at
// and ttr as their types parse them), priority and max_attempts integers
// in their types' ranges, replace true or false, and payload any JSON
// value but null. Anything else (other keys, keys in
// other cases, escapes, null, a duplicate key, a value its type refuses,
// trailing data) goes to encoding/json as before, over the same bytes, so
// that what is accepted and every error are encoding/json's
// (TestParsePuts_MatchesEncodingJSON, FuzzParsePuts). The body of a
// single put, POST /v1/queues/{queue}/tasks, is read the same way when it
// is one such task (parsePut, FuzzParsePut).

// parsePuts parses body if it has the plain form of a batch (see above),
// and reports whether it had. Its strings and payloads are copies: the
// tasks keep no part of body. It takes O(len(body)).
func parsePuts(body []byte) ([]api.PutRequest, bool) {
	p := putParser{scanner[[]byte]{s: body}}
	return plainList(&p.scanner, "tasks", api.MaxBatch, p.item)
}

// parsePut parses the body of a single put if it is one task of the
// plain form (as parsePuts takes each), and reports whether it was.
func parsePut(body []byte) (api.PutRequest, bool) {
	p := putParser{scanner[[]byte]{s: body}}
	r, ok := p.item()
	if !ok {
		return api.PutRequest{}, false
	}
	return r, p.end()
}

// decodePut reads the body of POST /v1/queues/{queue}/tasks, at most
// limit bytes, as decode does (an empty body is a put of nothing but
// defaults): by hand when it has the plain form, else through
// encoding/json, over the same bytes.
func decodePut(w http.ResponseWriter, r *http.Request, limit int64) (api.PutRequest, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err == nil {
		if p, ok := parsePut(body); ok {
			return p, nil
		}
	}
	var rest io.Reader = bytes.NewReader(body)
	if err != nil {
		rest = io.MultiReader(rest, errReader{err})
	}
	var p api.PutRequest
	return p, decodeFrom(rest, limit, &p, true)
}

// putParser reads a put's body, or a batch's.
type putParser struct{ scanner[[]byte] }

// Keys of a task, by their bit in item's seen.
var putKeys = map[string]uint{
	"id": 0, "payload": 1, "delay": 2, "at": 3,
	"priority": 4, "ttr": 5, "max_attempts": 6, "replace": 7,
	"traceparent": 8, "tracestate": 9, "key": 10,
}

// item reads one task object.
func (p *putParser) item() (api.PutRequest, bool) {
	var r api.PutRequest
	if !p.byte('{') {
		return r, false
	}
	if p.byte('}') {
		return r, true
	}
	var seen uint
	for {
		k, ok := p.str()
		if !ok || !p.byte(':') {
			return r, false
		}
		bit, known := putKeys[string(k)]
		if !known || seen&(1<<bit) != 0 {
			return r, false
		}
		seen |= 1 << bit
		switch bit {
		case 0, 8, 9, 10:
			v, ok := p.str()
			if !ok {
				return r, false
			}
			switch bit {
			case 0:
				r.ID = string(v)
			case 8:
				r.Traceparent = string(v)
			case 9:
				r.Tracestate = string(v)
			default:
				r.Key = string(v)
			}
		case 1:
			// A string of printable ASCII is valid as it is read; any
			// other value is checked whole.
			at := p.i
			v, ok := p.quoted()
			if !ok {
				p.i = at
				v, ok = p.value()
			}
			if !ok {
				return r, false
			}
			r.Payload = json.RawMessage(append([]byte(nil), v...))
		case 2, 5:
			v, ok := p.quoted()
			if !ok {
				return r, false
			}
			d := new(api.Duration)
			if d.UnmarshalJSON(v) != nil {
				return r, false
			}
			if bit == 2 {
				r.Delay = d
			} else {
				r.TTR = d
			}
		case 3:
			v, ok := p.quoted()
			if !ok {
				return r, false
			}
			t := new(time.Time)
			if t.UnmarshalJSON(v) != nil {
				return r, false
			}
			r.At = t
		case 4:
			if p.peek('-') {
				return r, false // encoding/json refuses even -0 for a uint32
			}
			n, ok := p.integer()
			if !ok || n > math.MaxUint32 {
				return r, false
			}
			v := uint32(n)
			r.Priority = &v
		case 6:
			n, ok := p.integer()
			if !ok || int64(int(n)) != n {
				return r, false
			}
			r.MaxAttempts = int(n)
		case 7:
			switch {
			case p.literal("true"):
				r.Replace = true
			case p.literal("false"):
				r.Replace = false
			default:
				return r, false
			}
		}
		if p.byte('}') {
			return r, true
		}
		if !p.byte(',') {
			return r, false
		}
	}
}

// integer reads a JSON integer of at most 18 digits (no fraction, no
// exponent), after white space.
func (p *putParser) integer() (int64, bool) {
	p.space()
	start := p.i
	if p.i < len(p.s) && p.s[p.i] == '-' {
		p.i++
	}
	digits := p.i
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		p.i++
	}
	n := p.i - digits
	if n == 0 || n > 18 || n > 1 && p.s[digits] == '0' {
		return 0, false // none, too many, or a leading zero
	}
	if p.i < len(p.s) {
		switch p.s[p.i] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	v, err := strconv.ParseInt(string(p.s[start:p.i]), 10, 64)
	return v, err == nil
}

// literal reads word (true or false), after white space.
func (p *putParser) literal(word string) bool {
	p.space()
	if len(p.s)-p.i < len(word) || string(p.s[p.i:p.i+len(word)]) != word {
		return false
	}
	p.i += len(word)
	return true
}

// value reads one JSON value other than null, after white space, and
// returns its bytes: its extent is found by counting brackets outside
// strings, then the bytes are checked with json.Valid.
func (p *putParser) value() ([]byte, bool) {
	p.space()
	start := p.i
	depth := 0
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			for p.i < len(p.s) && p.s[p.i] != '"' {
				if p.s[p.i] == '\\' {
					p.i++
				}
				p.i++
			}
			if p.i >= len(p.s) {
				return nil, false
			}
			p.i++
		case c == '{' || c == '[':
			depth++
			p.i++
		case c == '}' || c == ']':
			if depth == 0 {
				goto end // the end of a scalar, at its container's close
			}
			depth--
			p.i++
		case depth == 0 && (c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			goto end
		default:
			p.i++
		}
		if depth == 0 && (c == '"' || c == '}' || c == ']') {
			goto end // a string, object or array is whole
		}
	}
end:
	v := p.s[start:p.i]
	if len(v) == 0 || v[0] == 'n' || !json.Valid(v) {
		return nil, false
	}
	return v, true
}
