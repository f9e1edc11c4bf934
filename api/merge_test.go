package api_test

import (
	"encoding/json"
	"testing"

	"github.com/hourglass-go/hourglass/api"
)

// TestMergePatch checks MergePatch against the examples of RFC 7396,
// appendix A.
func TestMergePatch(t *testing.T) {
	for _, tc := range []struct{ target, patch, want string }{
		{`{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`},
		{`{"a":"b"}`, `{"a":null}`, `{}`},
		{`{"a":"b","b":"c"}`, `{"a":null}`, `{"b":"c"}`},
		{`{"a":["b"]}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"c"}`, `{"a":["b"]}`, `{"a":["b"]}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`},
		{`{"a":[{"b":"c"}]}`, `{"a":[1]}`, `{"a":[1]}`},
		{`["a","b"]`, `["c","d"]`, `["c","d"]`},
		{`{"a":"b"}`, `["c"]`, `["c"]`},
		{`{"a":"foo"}`, `null`, `null`},
		{`{"a":"foo"}`, `"bar"`, `"bar"`},
		{`{"e":null}`, `{"a":1}`, `{"a":1,"e":null}`},
		{`[1,2]`, `{"a":"b","c":null}`, `{"a":"b"}`},
		{`{}`, `{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{}}}`},
		// Numbers are written back as given.
		{`{"n":12345678901234567890}`, `{"m":0.1}`, `{"m":0.1,"n":12345678901234567890}`},
	} {
		var target, patch any
		if err := api.DecodeNumbers([]byte(tc.target), &target); err != nil {
			t.Fatal(err)
		}
		if err := api.DecodeNumbers([]byte(tc.patch), &patch); err != nil {
			t.Fatal(err)
		}
		got, err := json.Marshal(api.MergePatch(target, patch))
		if err != nil || string(got) != tc.want {
			t.Errorf("merge %s into %s: %s, %v; want %s", tc.patch, tc.target, got, err, tc.want)
		}
	}
}
