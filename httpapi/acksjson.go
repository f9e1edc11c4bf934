package httpapi

import (
	"bytes"
	"io"
	"net/http"

	"github.com/hourglass-go/hourglass/api"
)

// The body of POST /v1/acks, some 100 acks a request from a busy worker,
// is read by hand when it has the plain form workers send, rather than
// through encoding/json's reflection, a visible share of the server's
// CPU under a worker's load (`hourglass-bench --scenario worker`): the
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
//
// The body is read into a buffer of answerBuffers, given back when the
// request is decoded: parseAcks copies it into one string, and the
// decoder copies what it keeps, so nothing returned refers to it. A
// fresh buffer grown by io.ReadAll for each request allocated about
// three times the body.
func decodeAcks(w http.ResponseWriter, r *http.Request) (api.AcksRequest, error) {
	var req api.AcksRequest
	buf := answerBuffers.Get().(*[]byte)
	defer putAnswerBuffer(buf)
	body, err := readAppend((*buf)[:0], http.MaxBytesReader(w, r.Body, acksBody))
	*buf = body
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

// readAppend appends what r reads until its end (io.EOF, not an error)
// or its first error to b, and returns b, as io.ReadAll does into a new
// slice: b grows by append's steps when it is full. O(bytes read).
func readAppend(b []byte, r io.Reader) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return b, err
		}
	}
}

// errReader is a reader that fails with err.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// parseAcks parses body if it has the plain form of an acks request (see
// above), and reports whether it had. The strings of the acks are
// substrings of one copy of body. It takes O(len(body)).
func parseAcks(body []byte) ([]api.Ack, bool) {
	p := ackParser{scanner[string]{s: string(body)}}
	return plainList(&p.scanner, "acks", api.MaxAcks, p.ack)
}

// ackParser reads an acks body.
type ackParser struct{ scanner[string] }

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
