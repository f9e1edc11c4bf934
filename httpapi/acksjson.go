package httpapi

import (
	"bytes"
	"io"
	"net/http"

	"github.com/hourglass-go/hourglass/api"
)

// The body of POST /v1/acks, some 100 acks a request from a busy worker,
// is read by hand when it has the plain form workers send, rather than
// through encoding/json's reflection, which cost about 3% of the server's
// CPU under a worker's load (`hourglass bench --scenario worker`): the
// body is read whole, and parseAcks takes it if it is exactly
//
//	{"acks":[{"queue":"q","id":"7","lease":"…"}, …]}
//
// with any JSON white space, the three keys in any order or left out, each
// once, and strings of printable ASCII without escapes. Anything else
// (other keys, keys in other cases, escapes, other bytes, null, a
// duplicate key, trailing data) goes to decode as before, over the same
// bytes, so that what is accepted and every error are encoding/json's
// (TestParseAcks_MatchesEncodingJSON, FuzzParseAcks).

// decodeAcks reads the body of POST /v1/acks, at most acksBody bytes, as
// decode does.
func decodeAcks(w http.ResponseWriter, r *http.Request) (api.AcksRequest, error) {
	var req api.AcksRequest
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, acksBody))
	if err == nil {
		if acks, ok := parseAcks(body); ok {
			return api.AcksRequest{Acks: acks}, nil
		}
	}
	// The decoder meets the bytes read, then the reader's error, where it
	// would have met them reading the body itself.
	var rest io.Reader = bytes.NewReader(body)
	if err != nil {
		rest = io.MultiReader(rest, errReader{err})
	}
	return req, decodeFrom(rest, acksBody, &req, false)
}

// errReader is a reader that fails with err.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// parseAcks parses body if it has the plain form of an acks request (see
// above), and reports whether it had. The strings of the acks are
// substrings of one copy of body. It takes O(len(body)).
func parseAcks(body []byte) ([]api.Ack, bool) {
	p := ackParser{s: string(body)}
	if !p.byte('{') || !p.key("acks") || !p.byte('[') {
		return nil, false
	}
	acks := make([]api.Ack, 0, p.count())
	if !p.peek(']') {
		for {
			a, ok := p.ack()
			if !ok {
				return nil, false
			}
			acks = append(acks, a)
			if p.peek(']') {
				break
			}
			if !p.byte(',') {
				return nil, false
			}
		}
	}
	if !p.byte(']') || !p.byte('}') {
		return nil, false
	}
	p.space()
	return acks, p.i == len(p.s)
}

// ackParser reads s from i on.
type ackParser struct {
	s string
	i int
}

// space skips JSON white space.
func (p *ackParser) space() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// peek reports whether c comes next, after white space.
func (p *ackParser) peek(c byte) bool {
	p.space()
	return p.i < len(p.s) && p.s[p.i] == c
}

// byte reads c, after white space.
func (p *ackParser) byte(c byte) bool {
	if !p.peek(c) {
		return false
	}
	p.i++
	return true
}

// str reads a string of printable ASCII without escapes, after white
// space.
func (p *ackParser) str() (string, bool) {
	if !p.byte('"') {
		return "", false
	}
	start := p.i
	for ; p.i < len(p.s); p.i++ {
		switch c := p.s[p.i]; {
		case c == '"':
			p.i++
			return p.s[start : p.i-1], true
		case c < 0x20 || c > 0x7e || c == '\\':
			return "", false
		}
	}
	return "", false
}

// key reads "name" and a colon.
func (p *ackParser) key(name string) bool {
	k, ok := p.str()
	return ok && k == name && p.byte(':')
}

// ack reads one object of up to three keys: queue, id and lease.
func (p *ackParser) ack() (api.Ack, bool) {
	var a api.Ack
	if !p.byte('{') {
		return a, false
	}
	if p.byte('}') {
		return a, true
	}
	var seen [3]bool
	for {
		k, ok := p.str()
		if !ok || !p.byte(':') {
			return a, false
		}
		v, ok := p.str()
		if !ok {
			return a, false
		}
		var f int
		switch k {
		case "queue":
			f, a.Queue = 0, v
		case "id":
			f, a.ID = 1, v
		case "lease":
			f, a.Lease = 2, v
		default:
			return a, false
		}
		if seen[f] {
			return a, false
		}
		seen[f] = true
		if p.byte('}') {
			return a, true
		}
		if !p.byte(',') {
			return a, false
		}
	}
}

// count guesses the number of acks from the rest of s: its '{'s, at most
// api.MaxAcks+1.
func (p *ackParser) count() int {
	n := 0
	for i := p.i; i < len(p.s) && n <= api.MaxAcks; i++ {
		if p.s[i] == '{' {
			n++
		}
	}
	return n
}
