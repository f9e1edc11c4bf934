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
	"sync"
	"time"
	"unicode/utf8"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// The wire: request bodies decoded strictly (decode), answers encoded
// (writeJSON), and the conversions between the wire's types (package api)
// and the service's (package task).

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
	buf := answerBuffers.Get().(*[]byte)
	defer putAnswerBuffer(buf)
	out, ok := appendJSON((*buf)[:0], v)
	*buf = out
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
	writeBody(w, status, out)
}

// writeBody answers status with the JSON body out.
func writeBody(w http.ResponseWriter, status int, out []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(status)
	w.Write(out)
}

// writeTasks answers 200 with a reserve's tasks, leases included, as
// writeJSON answers the api.ReserveResponse of toTask(t, true) of each,
// byte for byte, without building one: each task's api.Task is made in
// turn in one variable, so that an answer of n tasks allocates nothing
// but its buffer, taken from answerBuffers. O(bytes written).
func writeTasks(w http.ResponseWriter, tasks []task.Task) {
	buf := answerBuffers.Get().(*[]byte)
	defer putAnswerBuffer(buf)
	dst := append((*buf)[:0], `{"tasks":[`...)
	var a api.Task
	var until time.Time
	for i := range tasks {
		if i > 0 {
			dst = append(dst, ',')
		}
		a = taskFields(&tasks[i], true)
		if u, ok := leaseExpires(&tasks[i]); ok {
			until = u
			a.LeaseExpires = &until
		}
		dst = appendTask(dst, &a)
	}
	dst = append(dst, "]}\n"...)
	*buf = dst
	writeBody(w, http.StatusOK, dst)
}

// answerBuffers holds the buffers that writeJSON and writeTasks write
// answers into, for the next answer: ResponseWriter.Write copies what it
// is given, so a buffer is free again once the answer is written.
// putAnswerBuffer keeps none larger than maxPooledAnswer, so that one
// large answer does not hold its memory for good. Safe for concurrent
// use.
var answerBuffers = sync.Pool{New: func() any {
	b := make([]byte, 0, 4<<10)
	return &b
}}

// maxPooledAnswer is the largest buffer answerBuffers keeps: a reserve of
// api.MaxReserve tasks of a few kilobytes each.
const maxPooledAnswer = 1 << 20

// putAnswerBuffer gives buf back to answerBuffers, unless it grew past
// maxPooledAnswer.
func putAnswerBuffer(buf *[]byte) {
	if cap(*buf) <= maxPooledAnswer {
		answerBuffers.Put(buf)
	}
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

// putRequest turns a put's wire form into the service's, checking what the
// service cannot tell apart: both delay and at (the service cannot see an
// explicit "0s"), and an absent priority, which means the default.
func putRequest(p api.PutRequest) (task.PutRequest, error) {
	if p.Delay != nil && p.At != nil {
		return task.PutRequest{}, badRequest("give delay or at, not both")
	}
	r := task.PutRequest{
		ID:          p.ID,
		Priority:    api.DefaultPriority,
		MaxAttempts: p.MaxAttempts,
		Replace:     p.Replace,
		Trace:       task.Trace{Parent: p.Traceparent, State: p.Tracestate},
		Key:         p.Key,
	}
	if len(p.Payload) > 0 && string(p.Payload) != "null" {
		if !utf8.Valid(p.Payload) {
			return task.PutRequest{}, errPayloadUTF8
		}
		r.Payload = p.Payload
	}
	if p.Delay != nil {
		r.Delay = p.Delay.D()
	}
	if p.At != nil {
		if p.At.IsZero() {
			return task.PutRequest{}, badRequest("at is the zero time")
		}
		r.At = *p.At
	}
	if p.Priority != nil {
		r.Priority = *p.Priority
	}
	if p.TTR != nil {
		if r.TTR = p.TTR.D(); r.TTR == 0 {
			return task.PutRequest{}, errZeroTTR
		}
	}
	return r, nil
}

// Bad puts that only the wire can tell: a payload a strict JSON reader
// would refuse (encoding/json takes invalid UTF-8 in strings; Python's
// json.loads and others do not, so one such payload would spoil every
// answer that carries it), and an explicit "ttr": "0s", which would
// otherwise quietly mean the server's default.
var (
	errPayloadUTF8 = badRequest("payload is not valid UTF-8")
	errZeroTTR     = badRequest(`ttr "0s": give 1ms or more, or leave it out for the server's default`)
)

// toTask turns the broker's task into its wire form, with the lease when
// withLease is set (reserve and touch answers only); when the lease ends
// (lease_expires) is shown on every answer while the task is reserved,
// and why its last attempt failed (last_error) always.
func toTask(t task.Task, withLease bool) api.Task {
	a := taskFields(&t, withLease)
	if until, ok := leaseExpires(&t); ok {
		a.LeaseExpires = &until
	}
	return a
}

// leaseExpires returns when the lease of t ends, if it is reserved.
func leaseExpires(t *task.Task) (time.Time, bool) {
	if t.State == task.Reserved && !t.LeaseUntil.IsZero() {
		return t.LeaseUntil.UTC(), true
	}
	return time.Time{}, false
}

// taskFields is toTask without LeaseExpires.
func taskFields(t *task.Task, withLease bool) api.Task {
	a := api.Task{
		ID:          t.ID,
		JobID:       t.JobID,
		Queue:       t.Queue,
		State:       t.State.String(),
		Payload:     payload(t.Payload),
		Priority:    t.Priority,
		Due:         utc(t.Due),
		TTR:         api.Duration(t.TTR),
		Attempts:    t.Attempts,
		MaxAttempts: t.MaxAttempts,
		Created:     utc(t.Created),
	}
	if withLease {
		a.Lease = t.Lease
	}
	a.LastError = t.LastError
	a.Traceparent, a.Tracestate = t.Trace.Parent, t.Trace.State
	a.Key = t.Key
	return a
}

// payload returns a stored payload as JSON: as it is when it is JSON in
// valid UTF-8 (every payload put over this API is), or as a JSON string of
// its bytes, invalid UTF-8 replaced by U+FFFD, when another protocol put
// bytes that are not.
func payload(p []byte) json.RawMessage {
	if len(p) == 0 {
		return nil // null
	}
	if json.Valid(p) && utf8.Valid(p) {
		return p
	}
	s, _ := json.Marshal(string(p))
	return s
}

// utc returns t in UTC, so that it is written with a "Z".
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}

// toSchedule turns the broker's schedule into its wire form.
func toSchedule(s task.ScheduleInfo) api.Schedule {
	s.ScheduleSpec = service.NormalSchedule(s.ScheduleSpec)
	out := api.Schedule{
		Name:     s.Name,
		Cron:     s.Cron,
		Queue:    s.Queue,
		Payload:  payload(s.Payload),
		Timezone: s.Timezone,
		Misfire:  s.Misfire, CatchUp: api.Duration(s.CatchUp), Overlap: s.Overlap,
		TTR: api.Duration(s.TTR), MaxAttempts: s.MaxAttempts, Paused: s.Paused,
		Next: utc(s.Next),
	}
	out.Priority = *s.Priority
	if !s.Last.IsZero() {
		out.Last = &api.ScheduleLast{Time: utc(s.Last), TaskID: s.LastTaskID, Outcome: s.LastOutcome}
	}
	return out
}
