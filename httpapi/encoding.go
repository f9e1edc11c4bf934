package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// decode reads r's body, at most limit bytes, as one JSON object into v.
// An empty body leaves v as it is when optional is set and is an error
// otherwise. Unknown fields, trailing data, a number where a duration
// belongs and any other mismatch are 400 errors saying what is wrong; a
// body over limit is a 413 error.
func decode(w http.ResponseWriter, r *http.Request, limit int64, v any, optional bool) error {
	return decodeFrom(http.MaxBytesReader(w, r.Body, limit), limit, v, optional)
}

// decodeFrom is decode over a reader of the body.
func decodeFrom(body io.Reader, limit int64, v any, optional bool) error {
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == io.EOF {
		if optional {
			return nil
		}
		return badRequest("empty body: want a JSON object")
	}
	if err == nil {
		// Anything but white space after the object is an error.
		var extra json.RawMessage
		if err = dec.Decode(&extra); err == io.EOF {
			return nil
		}
		if err == nil {
			return badRequest("trailing data after the JSON object")
		}
	}
	return decodeError(err, limit)
}

// decodeStrict decodes one JSON object from data into v as decode does,
// for the items of a batch.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err, 0)
	}
	return nil
}

// decodeError turns an error of encoding/json (or of the body's reader)
// into a wireError.
func decodeError(err error, limit int64) error {
	var (
		wire    *wireError
		tooBig  *http.MaxBytesError
		syntax  *json.SyntaxError
		typeErr *json.UnmarshalTypeError
		timeErr *time.ParseError
	)
	switch {
	case errors.As(err, &wire): // the body's reader's: late (limits.go)
		return wire
	case errors.As(err, &tooBig):
		return &wireError{http.StatusRequestEntityTooLarge, fmt.Sprintf("hourglass: request body over %d bytes", limit)}
	case errors.As(err, &syntax):
		return badRequest("malformed JSON at byte %d: %v", syntax.Offset, syntax)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("malformed JSON: unexpected end of the body")
	case errors.As(err, &typeErr):
		if typeErr.Field == "" {
			return badRequest("want a JSON object, not %s", typeErr.Value)
		}
		return badRequest("field %q: want %s, not %s", typeErr.Field, wireType(typeErr.Type.String()), typeErr.Value)
	case errors.As(err, &timeErr):
		return badRequest("bad time %q: want RFC 3339, like %q", timeErr.Value, exampleTime)
	}
	msg := err.Error()
	if strings.HasPrefix(msg, "Time.UnmarshalJSON: ") {
		return badRequest("a time is an RFC 3339 string like %q", exampleTime)
	}
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return badRequest("unknown field %s", f)
	}
	return badRequest("%s", strings.TrimPrefix(msg, "json: "))
}

// exampleTime shows the form of times in error messages.
const exampleTime = "2030-01-02T15:04:05.5Z"

// wireType names a Go type of the api package as a JSON reader knows it.
func wireType(goType string) string {
	switch strings.TrimLeft(goType, "*") {
	case "uint32":
		return "a whole number from 0 to 4294967295"
	case "int", "int64":
		return "a whole number"
	case "string", "api.Duration":
		return "a string"
	case "bool":
		return "true or false"
	case "time.Time":
		return "an RFC 3339 time string"
	}
	return goType
}

// writeJSON answers v as JSON with the status. HTML characters are left
// unescaped, so that payloads come back as they were put.
func writeJSON(w http.ResponseWriter, status int, v any) {
	out, ok := appendJSON(nil, v)
	if !ok {
		var buf bytes.Buffer
		if err := encodeJSON(&buf, v); err != nil {
			// Only a payload that is not JSON could fail, and toTask guards
			// against those; answer something well-formed regardless.
			status = http.StatusInternalServerError
			buf.Reset()
			buf.WriteString(`{"error":"hourglass: encoding the answer failed"}` + "\n")
		}
		out = buf.Bytes()
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(status)
	w.Write(out)
}

// encodeJSON writes v to buf as JSON with HTML escaping off.
func encodeJSON(buf *bytes.Buffer, v any) error {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// writeEmpty answers a status with no body (204).
func writeEmpty(w http.ResponseWriter, status int) {
	w.WriteHeader(status)
}
