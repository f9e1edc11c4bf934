package httpapi

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/hourglass-go/hourglass/api"
)

// The answers that carry tasks (a put, a batch, a reserve, a get), and
// those of a worker's acks, are written by hand rather than through encoding/json's reflection, which
// on a batch of puts is a large share of the server's CPU (see
// BenchmarkServer_PutBatch): appendTask writes what json.Marshal writes
// for an api.Task with HTML escaping off, field for field, except that a
// payload is written as it was put, byte for byte, where encoding/json
// would compact it (TestAppendTask_MatchesEncodingJSON holds them equal).

// appendJSON appends v as appendTask and its kin write it, for the types
// they know, and reports whether it did.
func appendJSON(dst []byte, v any) ([]byte, bool) {
	switch v := v.(type) {
	case api.Task:
		return append(appendTask(dst, &v), '\n'), true
	case api.ReserveResponse:
		if v.Tasks == nil {
			return append(dst, "{\"tasks\":null}\n"...), true
		}
		dst = append(dst, `{"tasks":[`...)
		for i := range v.Tasks {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendTask(dst, &v.Tasks[i])
		}
		return append(dst, "]}\n"...), true
	case api.BatchResponse:
		if v.Results == nil {
			return append(dst, "{\"results\":null}\n"...), true
		}
		dst = append(dst, `{"results":[`...)
		for i, r := range v.Results {
			if i > 0 {
				dst = append(dst, ',')
			}
			// The fields in api.BatchResult's order, each left out when
			// empty, a comma before each but the first.
			dst = append(dst, '{')
			open := len(dst)
			sep := func() {
				if len(dst) > open {
					dst = append(dst, ',')
				}
			}
			if r.Status != 0 {
				dst = strconv.AppendInt(append(dst, `"status":`...), int64(r.Status), 10)
			}
			if r.Task != nil {
				sep()
				dst = appendTask(append(dst, `"task":`...), r.Task)
			}
			if r.Finished != nil {
				sep()
				var buf bytes.Buffer // rare: a deduped put
				enc := json.NewEncoder(&buf)
				enc.SetEscapeHTML(false)
				enc.Encode(r.Finished) // its fields always encode
				dst = append(append(dst, `"finished":`...), bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
			}
			if r.Error != "" {
				sep()
				dst = appendString(append(dst, `"error":`...), r.Error)
			}
			dst = append(dst, '}')
		}
		return append(dst, "]}\n"...), true
	case api.AcksResponse:
		// A worker's acks: some 100 results a request, each {} but a
		// refused one's.
		if v.Results == nil {
			return append(dst, "{\"results\":null}\n"...), true
		}
		dst = append(dst, `{"results":[`...)
		for i, r := range v.Results {
			if i > 0 {
				dst = append(dst, ',')
			}
			if r.Error == "" {
				dst = append(dst, "{}"...)
			} else {
				dst = append(appendString(append(dst, `{"error":`...), r.Error), '}')
			}
		}
		return append(dst, "]}\n"...), true
	}
	return dst, false
}

// appendTask appends t as a JSON object.
func appendTask(dst []byte, t *api.Task) []byte {
	dst = appendString(append(dst, `{"id":`...), t.ID)
	dst = strconv.AppendUint(append(dst, `,"job_id":`...), t.JobID, 10)
	dst = appendString(append(dst, `,"queue":`...), t.Queue)
	dst = appendString(append(dst, `,"state":`...), t.State)
	dst = append(dst, `,"payload":`...)
	if t.Payload == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, t.Payload...)
	}
	dst = strconv.AppendUint(append(dst, `,"priority":`...), uint64(t.Priority), 10)
	dst = appendTime(append(dst, `,"due":`...), t.Due)
	dst = append(append(append(dst, `,"ttr":"`...), t.TTR.String()...), '"')
	dst = strconv.AppendInt(append(dst, `,"attempts":`...), int64(t.Attempts), 10)
	dst = strconv.AppendInt(append(dst, `,"max_attempts":`...), int64(t.MaxAttempts), 10)
	dst = appendTime(append(dst, `,"created":`...), t.Created)
	if t.Lease != "" {
		dst = appendString(append(dst, `,"lease":`...), t.Lease)
	}
	if t.LeaseExpires != nil {
		dst = appendTime(append(dst, `,"lease_expires":`...), *t.LeaseExpires)
	}
	if t.LastError != "" {
		dst = appendString(append(dst, `,"last_error":`...), t.LastError)
	}
	if t.Traceparent != "" {
		dst = appendString(append(dst, `,"traceparent":`...), t.Traceparent)
	}
	if t.Tracestate != "" {
		dst = appendString(append(dst, `,"tracestate":`...), t.Tracestate)
	}
	if t.Key != "" {
		dst = appendString(append(dst, `,"key":`...), t.Key)
	}
	return append(dst, '}')
}

// appendTime appends t as time.Time's MarshalJSON does, for the years it
// accepts (0-9999), which are the only ones the broker keeps.
func appendTime(dst []byte, t time.Time) []byte {
	if y := t.Year(); y < 0 || y > 9999 {
		b, _ := json.Marshal(t) // an error; keep encoding/json's answer
		return append(dst, b...)
	}
	dst = append(dst, '"')
	dst = t.AppendFormat(dst, time.RFC3339Nano)
	return append(dst, '"')
}

// appendString appends s as a JSON string, as encoding/json writes it with
// HTML escaping off: plain printable ASCII (every id, queue name and lease
// the API accepts) is copied, anything else goes through encoding/json.
func appendString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			enc.Encode(s) // a string always encodes
			return append(dst, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}
