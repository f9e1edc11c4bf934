package client

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/api"
)

// reserveAnswers are answers a server writes (httpapi's appendTask), and
// near misses that fastReserve must leave to encoding/json.
var reserveAnswers = []string{
	`{"tasks":null}` + "\n",
	`{"tasks":[]}` + "\n",
	`{"tasks":[{"id":"t1","job_id":18446744073709551615,"queue":"q","state":"reserved","payload":"` + strings.Repeat("x", 198) + `","priority":1024,"due":"2026-11-27T16:00:00.123456789Z","ttr":"1m0s","attempts":1,"max_attempts":0,"created":"2026-11-27T15:59:59Z","lease":"abc","lease_expires":"2026-11-27T16:01:00Z","last_error":"lease expired"}]}` + "\n",
	`{"tasks":[{"id":"a","job_id":1,"queue":"q","state":"reserved","payload":{"a":[1,-2.5e+3,true,false,null,"\u00e9\n"],"b":{}},"priority":0,"due":"2026-01-02T03:04:05Z","ttr":"30s","attempts":2,"max_attempts":5,"created":"2026-01-02T03:04:05Z","lease":"l"},{"id":"b","job_id":2,"queue":"q","state":"reserved","payload":null,"priority":4294967295,"due":"2026-01-02T03:04:05+01:00","ttr":"1.5s","attempts":1,"max_attempts":0,"created":"0001-01-01T00:00:00Z","lease":"m"}]}`,
	` { "tasks" : [ { "id" : "é" , "payload" : [ ] } ] } `,
	`{"tasks":[{"id":"t","job_id":3,"queue":"q","state":"reserved","payload":1,"priority":1,"due":"2026-01-02T03:04:05Z","ttr":"30s","attempts":2,"max_attempts":5,"created":"2026-01-02T03:04:05Z","lease":"l","last_error":"boom","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","tracestate":"congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"}]}`,
	`{"tasks":[{"id":"a\"b"}]}`,
	`{"tasks":[{"ID":"a"}]}`,
	`{"tasks":[{"id":"a","id":"b"}]}`,
	`{"tasks":[{"traceparent":"a","traceparent":"b"}]}`,
	`{"tasks":[{"tracestate":1}]}`,
	`{"tasks":[{"id":"k","key":"tenant-42","payload":1}]}`,
	`{"tasks":[{"key":1}]}`,
	`{"tasks":[{"key":"a","key":"b"}]}`,
	`{"tasks":[{"other":1}]}`,
	`{"tasks":[{"priority":4294967296}]}`,
	`{"tasks":[{"priority":-1}]}`,
	`{"tasks":[{"priority":1.0}]}`,
	`{"tasks":[{"priority":01}]}`,
	`{"tasks":[{"job_id":18446744073709551616}]}`,
	`{"tasks":[{"attempts":9223372036854775808}]}`,
	`{"tasks":[{"ttr":30}]}`,
	`{"tasks":[{"ttr":"soon"}]}`,
	`{"tasks":[{"due":"yesterday"}]}`,
	`{"tasks":[{"due":null}]}`,
	`{"tasks":[{"payload":01}]}`,
	`{"tasks":[{"payload":"\x"}]}`,
	`{"tasks":[{"payload":"` + "\x01" + `"}]}`,
	`{"tasks":[{"payload":"` + "\xff" + `"}]}`,
	`{"tasks":[{"id":"` + "\xff" + `"}]}`,
	`{"tasks":[{"payload":[1,]}]}`,
	`{"tasks":[{"payload":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}]}`,
	`{"tasks":[{}]}{}`,
	`{"tasks":[{}],}`,
	`{"tasks":[{},]}`,
	`{"tasks":[{"lease_expires":"2026-11-27T16:01:00Z","lease_expires":"2026-11-27T16:01:00Z"}]}`,
	`{"tasks":{}}`,
	`{"tasks":[`,
	``,
}

// TestDecodeReserve checks decodeReserve against json.Unmarshal on
// reserveAnswers, and that the server's own answers take the fast path.
func TestDecodeReserve(t *testing.T) {
	for _, s := range reserveAnswers {
		checkDecodeReserve(t, []byte(s))
	}
	for _, s := range reserveAnswers[:6] {
		if _, ok := fastReserve([]byte(s)); !ok {
			t.Errorf("fastReserve(%.60q) left it to encoding/json", s)
		}
	}
}

// FuzzDecodeReserve holds decodeReserve's results, errors included, equal
// to json.Unmarshal's.
func FuzzDecodeReserve(f *testing.F) {
	for _, s := range reserveAnswers {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecodeReserve(t, data)
	})
}

func checkDecodeReserve(t *testing.T, data []byte) {
	t.Helper()
	var want, got api.ReserveResponse
	wantErr := json.Unmarshal(data, &want)
	gotErr := decodeReserve(append([]byte(nil), data...), &got)
	if (wantErr == nil) != (gotErr == nil) || wantErr != nil && wantErr.Error() != gotErr.Error() {
		t.Fatalf("decodeReserve(%q): error %v, json.Unmarshal %v", data, gotErr, wantErr)
	}
	if wantErr != nil {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decodeReserve(%q) =\n%#v\njson.Unmarshal:\n%#v", data, got, want)
	}
}

// BenchmarkDecodeReserve_64 decodes a reserve's answer of 64 tasks with
// 200-byte payloads, as a server writes it.
func BenchmarkDecodeReserve_64(b *testing.B) {
	now := time.Date(2026, 11, 27, 16, 0, 0, 123456789, time.UTC)
	until := now.Add(time.Minute)
	var r api.ReserveResponse
	for i := range 64 {
		r.Tasks = append(r.Tasks, api.Task{ID: "t" + strings.Repeat("0", i%10), JobID: uint64(i), Queue: "bench-worker", State: "reserved",
			Payload: json.RawMessage(`"` + strings.Repeat("x", 198) + `"`), Priority: 1024, Due: now, TTR: api.Duration(time.Minute),
			Attempts: 1, Created: now, Lease: "0123456789abcdef", LeaseExpires: &until})
	}
	data, err := json.Marshal(r)
	if err != nil {
		b.Fatal(err)
	}
	for _, bm := range []struct {
		name   string
		decode func([]byte, *api.ReserveResponse) error
	}{
		{"fast", decodeReserve},
		{"encoding-json", func(data []byte, out *api.ReserveResponse) error { return json.Unmarshal(data, out) }},
	} {
		b.Run(bm.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				var out api.ReserveResponse
				if err := bm.decode(data, &out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
