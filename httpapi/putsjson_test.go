package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/hourglass-go/hourglass/api"
)

// putBodies are batch bodies: the first ones have the plain form
// parsePuts must take, the rest a bit of everything it must leave to
// encoding/json (or take only as encoding/json reads them).
var putBodies = []string{
	`{"tasks":[{"payload":"abc","delay":"1h"}]}`,
	` { "tasks" : [ { "id" : "a-1" , "payload" : {"n": [1, 2.5, "x\"}"], "m": null} , "delay" : "90s" , "priority" : 7 , "ttr" : "30s" , "max_attempts" : -0 , "replace" : true } ] } ` + "\n",
	`{"tasks":[]}`,
	`{"tasks":[{},{"payload":1e3},{"payload":[]},{"payload":true,"replace":false}]}`,
	`{"tasks":[{"at":"2026-12-05T10:00:00Z","priority":4294967295,"max_attempts":3,"payload":"caf\u00e9"}]}`,
	`{"tasks":[{"id":"t","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","tracestate":"congo=t61rcWkgMzE, rojo=00f067aa0ba902b7","payload":1}]}`,
	`{"tasks":[{"key":"tenant-42","payload":1},{"id":"b","key":"~!@#$%^&*()","delay":"1s"}]}`,
	`{"tasks":[{"priority":-0}]}`,
	`{"tasks":[{"key":null}]}`,
	`{"tasks":[{"key":1}]}`,
	`{"tasks":[{"key":"a","key":"b"}]}`,
	`{"tasks":[{"Key":"a"}]}`,
	`{"tasks":[{"key":"a\u002fb"}]}`,
	`{"tasks":[{"traceparent":"a","traceparent":"b"}]}`,
	`{"tasks":[{"traceparent":null}]}`,
	`{"tasks":[{"tracestate":1}]}`,
	`{"tasks":[{"tracestate":"a=\u0041"}]}`,
	`{"tasks":[{"Traceparent":"a"}]}`,
	`{"tasks":[{"priority":4294967296}]}`,
	`{"tasks":[{"priority":1.0}]}`,
	`{"tasks":[{"priority":01}]}`,
	`{"tasks":[{"max_attempts":1e2}]}`,
	`{"tasks":[{"max_attempts":99999999999999999999}]}`,
	`{"tasks":[{"payload":null}]}`,
	`{"tasks":[{"payload":nul}]}`,
	`{"tasks":[{"payload":"a` + "\x01" + `"}]}`,
	`{"tasks":[{"payload":{"a":1}x}]}`,
	`{"tasks":[{"payload":123abc}]}`,
	`{"tasks":[{"payload":"unterminated}]}`,
	`{"tasks":[{"payload":{"a":"\\"}}]}`,
	`{"tasks":[{"payload":"\\\""}]}`,
	`{"tasks":[{"ID":"a"}]}`,
	`{"tasks":[{"id":"a","id":"b"}]}`,
	`{"tasks":[{"id":"a\"b"}]}`,
	`{"tasks":[{"id":null}]}`,
	`{"tasks":[{"delay":"soon"}]}`,
	`{"tasks":[{"delay":5}]}`,
	`{"tasks":[{"at":"yesterday"}]}`,
	`{"tasks":[{"replace":1}]}`,
	`{"tasks":[{"other":1}]}`,
	`{"tasks":[{"id":"a"},]}`,
	`{"tasks":[{"id":"a"}]}x`,
	`{"tasks":[{"id":"a"}]}{}`,
	`{"tasks":null}`,
	`{"tasks":[{"id":"a"}],"tasks":[]}`,
	`{"Tasks":[]}`,
	`{}`,
	``,
	`[]`,
	`null`,
}

// TestParsePuts_MatchesEncodingJSON checks that every body parsePuts
// takes decodes the same through encoding/json, as putBatch reads it,
// and that it takes the plain bodies clients send.
func TestParsePuts_MatchesEncodingJSON(t *testing.T) {
	plain := listBody("tasks", api.MaxBatch, func(i int) string {
		return fmt.Sprintf(`{"id":"t%d","payload":{"order":%d,"note":"é"},"delay":"%ds"}`, i, i, i)
	})
	bodies := append([]string{plain}, putBodies...)
	for i, body := range bodies {
		items, ok := parsePuts([]byte(body))
		if i < 8 && !ok {
			t.Errorf("%q: not taken", body)
		}
		if !ok {
			continue
		}
		checkPutsMatch(t, []byte(body), items)
	}
}

// checkPutsMatch fails t unless encoding/json decodes body into items.
func checkPutsMatch(t *testing.T, body []byte, items []api.PutRequest) {
	t.Helper()
	var want api.BatchRequest
	if err := decodeFrom(bytes.NewReader(body), 1<<30, &want, false); err != nil {
		t.Fatalf("%q: taken as %+v; encoding/json: %v", body, items, err)
	}
	if len(items) == 0 && len(want.Tasks) == 0 {
		return // [] against an empty slice
	}
	if !reflect.DeepEqual(items, want.Tasks) {
		t.Fatalf("%q: taken as %+v; encoding/json: %+v", body, items, want.Tasks)
	}
}

// TestParsePuts_CopiesBody checks that the tasks keep no part of the
// body: a batch body may be megabytes, and the ids and payloads of its
// tasks live as long as the tasks.
func TestParsePuts_CopiesBody(t *testing.T) {
	body := []byte(`{"tasks":[{"id":"abc","payload":"xyz"}]}`)
	items, ok := parsePuts(body)
	if !ok {
		t.Fatal("not taken")
	}
	for i := range body {
		body[i] = '#'
	}
	if items[0].ID != "abc" || string(items[0].Payload) != `"xyz"` {
		t.Fatalf("after the body changed: %+v", items[0])
	}
}

// FuzzParsePuts checks that what parsePuts takes, encoding/json decodes
// the same.
func FuzzParsePuts(f *testing.F) {
	for _, b := range putBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		items, ok := parsePuts(body)
		if !ok {
			return
		}
		checkPutsMatch(t, body, items)
		if _, err := json.Marshal(items); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzParsePut checks that what parsePut takes as a single put's body,
// encoding/json decodes the same.
func FuzzParsePut(f *testing.F) {
	for _, b := range putBodies {
		f.Add([]byte(b))
		if i := strings.Index(b, "[{"); i >= 0 {
			f.Add([]byte(b[i+1 : max(i+1, strings.LastIndex(b, "}]")+1)]))
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkPutMatch(t, body)
	})
}

// checkPutMatch fails t if parsePut takes body other than encoding/json
// reads it.
func checkPutMatch(t *testing.T, body []byte) {
	t.Helper()
	got, ok := parsePut(body)
	if !ok {
		return
	}
	var want api.PutRequest
	if err := decodeFrom(bytes.NewReader(body), 1<<30, &want, true); err != nil {
		t.Fatalf("%q: taken as %+v; encoding/json: %v", body, got, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: taken as %+v; encoding/json: %+v", body, got, want)
	}
}

// TestParsePut_MatchesEncodingJSON checks the items of putBodies as
// single puts' bodies, and that parsePut takes the plain ones.
func TestParsePut_MatchesEncodingJSON(t *testing.T) {
	for _, body := range []string{`{"payload":{"a":1},"delay":"5s"}`, ` {} `, `{"id":"x","replace":true}` + "\n",
		`{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","tracestate":"a=1","payload":2}`} {
		if _, ok := parsePut([]byte(body)); !ok {
			t.Errorf("%q: not taken", body)
		}
		checkPutMatch(t, []byte(body))
	}
	for _, b := range putBodies {
		if i := strings.Index(b, "[{"); i >= 0 {
			checkPutMatch(t, []byte(b[i+1:max(i+1, strings.LastIndex(b, "}]")+1)]))
		}
	}
}

// BenchmarkDecodePuts_100 decodes a batch body of 100 tasks with 200-byte
// payloads and delays (BenchmarkServer_PutBatch's): by hand (plain) and
// through encoding/json (json), as before.
func BenchmarkDecodePuts_100(b *testing.B) {
	body := []byte(listBody("tasks", 100, func(i int) string {
		return `{"payload":"` + strings.Repeat(string(rune('a'+i%26)), 198) + `","delay":"1h"}`
	}))
	// traced: each task with a traceparent, as otelhourglass sends it.
	traced := []byte(listBody("tasks", 100, func(i int) string {
		return `{"payload":"` + strings.Repeat(string(rune('a'+i%26)), 198) + `","delay":"1h",` +
			`"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`
	}))
	b.Run("plain", func(b *testing.B) {
		for b.Loop() {
			if items, ok := parsePuts(body); !ok || len(items) != 100 {
				b.Fatal("not taken")
			}
		}
	})
	b.Run("plain-traced", func(b *testing.B) {
		for b.Loop() {
			if items, ok := parsePuts(traced); !ok || len(items) != 100 {
				b.Fatal("not taken")
			}
		}
	})
	b.Run("json-traced", func(b *testing.B) {
		for b.Loop() {
			var req api.BatchRequest
			if err := decodeFrom(bytes.NewReader(traced), 1<<30, &req, false); err != nil || len(req.Tasks) != 100 {
				b.Fatal(err)
			}
		}
	})
	b.Run("json", func(b *testing.B) {
		for b.Loop() {
			var req api.BatchRequest
			if err := decodeFrom(bytes.NewReader(body), 1<<30, &req, false); err != nil || len(req.Tasks) != 100 {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkDecodePut decodes a single put's body (a 200-byte payload and
// a delay): by hand (plain) and through encoding/json (json), as before.
func BenchmarkDecodePut(b *testing.B) {
	body := []byte(`{"payload":"` + strings.Repeat("p", 198) + `","delay":"1h"}`)
	b.Run("plain", func(b *testing.B) {
		for b.Loop() {
			if _, ok := parsePut(body); !ok {
				b.Fatal("not taken")
			}
		}
	})
	b.Run("json", func(b *testing.B) {
		for b.Loop() {
			var p api.PutRequest
			if err := decodeFrom(bytes.NewReader(body), 1<<20, &p, true); err != nil {
				b.Fatal(err)
			}
		}
	})
}
