package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/hourglass-go/hourglass/api"
)

// ackBodies are bodies of POST /v1/acks, of the plain form parseAcks
// takes and of every other kind.
var ackBodies = []string{
	`{"acks":[{"queue":"q","id":"1","lease":"abc"}]}`,
	" \n{ \"acks\" :\t[ {\"lease\":\"l\" , \"id\":\"i\",\"queue\":\"q\"} ,{\"queue\":\"r\",\"id\":\"2\",\"lease\":\"m\"}\r] }\n ",
	`{"acks":[]}`,
	`{"acks":[{}]}`,
	`{"acks":[{"queue":"q"}]}`,
	`{"acks":[{"queue":"q","queue":"r"}]}`,
	`{"acks":[{"Queue":"q","id":"1","lease":"abc"}]}`,
	`{"ACKS":[{"queue":"q","id":"1","lease":"abc"}]}`,
	`{"acks":[{"queue":"q\u0041","id":"1","lease":"abc"}]}`,
	`{"acks":[{"queue":"q\"","id":"1","lease":"abc"}]}`,
	"{\"acks\":[{\"queue\":\"q\xff\",\"id\":\"1\",\"lease\":\"abc\"}]}",
	"{\"acks\":[{\"queue\":\"é\",\"id\":\"1\",\"lease\":\"abc\"}]}",
	`{"acks":[{"queue":"q","id":1,"lease":"abc"}]}`,
	`{"acks":[{"queue":"q","id":"1","lease":null}]}`,
	`{"acks":null}`,
	`{"acks":[{"queue":"q","id":"1","lease":"abc"}],"x":1}`,
	`{"acks":[{"queue":"q","id":"1","lease":"abc","x":"y"}]}`,
	`{"acks":[{"queue":"q","id":"1","lease":"abc"},]}`,
	`{"acks":[{"queue":"q","id":"1","lease":"abc"}]} {}`,
	`{"acks":[{"queue":"q","id":"1","lease":"abc"}]} x`,
	`{"acks":[{"queue":"q","id":"1","lease":"abc"}]`,
	`{"acks":[{"queue":"q","id":"1","lease":"abc"}`,
	`{"acks":[{"queue":"q","id":"1","lease":"abc}]}`,
	`{"acks":[{"queue":"q" "id":"1"}]}`,
	`{"acks"[]}`,
	`{}`,
	``,
	`[]`,
	`null`,
}

// TestParseAcks_MatchesEncodingJSON checks that every body parseAcks
// takes decodes the same through encoding/json, as decode reads it, and
// that it takes the plain bodies workers send.
func TestParseAcks_MatchesEncodingJSON(t *testing.T) {
	plain := listBody("acks", api.MaxAcks, func(i int) string {
		return fmt.Sprintf(`{"queue":"bench-worker","id":"%d","lease":"9f3a%dx"}`, i+1, i)
	})
	bodies := append([]string{plain}, ackBodies...)
	for i, body := range bodies {
		acks, ok := parseAcks([]byte(body))
		if i < 5 && !ok {
			t.Errorf("%q: not taken", body)
		}
		if !ok {
			continue
		}
		var want api.AcksRequest
		if err := decodeFrom(strings.NewReader(body), acksBody, &want, false); err != nil {
			t.Errorf("%q: taken as %+v; encoding/json: %v", body, acks, err)
			continue
		}
		if !reflect.DeepEqual(acks, want.Acks) {
			t.Errorf("%q: taken as %+v; encoding/json: %+v", body, acks, want.Acks)
		}
	}
}

// FuzzParseAcks checks that what parseAcks takes, encoding/json decodes
// the same.
func FuzzParseAcks(f *testing.F) {
	for _, b := range ackBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		acks, ok := parseAcks(body)
		if !ok {
			return
		}
		var want api.AcksRequest
		if err := decodeFrom(strings.NewReader(string(body)), acksBody, &want, false); err != nil {
			t.Fatalf("%q: taken as %+v; encoding/json: %v", body, acks, err)
		}
		if !reflect.DeepEqual(acks, want.Acks) {
			t.Fatalf("%q: taken as %+v; encoding/json: %+v", body, acks, want.Acks)
		}
		if _, err := json.Marshal(acks); err != nil {
			t.Fatal(err)
		}
	})
}

// BenchmarkDecodeAcks_100 decodes the body of a worker's acks request of
// 100 acks: by hand (plain) and through encoding/json (json), as before.
func BenchmarkDecodeAcks_100(b *testing.B) {
	body := []byte(listBody("acks", 100, func(i int) string {
		return fmt.Sprintf(`{"queue":"bench-worker","id":"%d","lease":"0123456789abcdef%x"}`, 100000+i, 100000+i)
	}))
	b.Run("plain", func(b *testing.B) {
		for b.Loop() {
			if acks, ok := parseAcks(body); !ok || len(acks) != 100 {
				b.Fatal("not taken")
			}
		}
	})
	b.Run("json", func(b *testing.B) {
		for b.Loop() {
			var req api.AcksRequest
			if err := decodeFrom(strings.NewReader(string(body)), acksBody, &req, false); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkDecodeAcksRequest_100 reads and decodes the body of a
// worker's acks request of 100 acks as the handler does (decodeAcks):
// allocs/op and B/op are the read's and the parse's.
func BenchmarkDecodeAcksRequest_100(b *testing.B) {
	body := listBody("acks", 100, func(i int) string {
		return fmt.Sprintf(`{"queue":"bench-worker","id":"%d","lease":"0123456789abcdef%x"}`, 100000+i, 100000+i)
	})
	w := httptest.NewRecorder()
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest("POST", "/v1/acks", strings.NewReader(body))
		if req, err := decodeAcks(w, r); err != nil || len(req.Acks) != 100 {
			b.Fatal(err)
		}
	}
}
