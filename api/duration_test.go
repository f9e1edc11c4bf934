package api_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/api"
)

func TestDurationJSON(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                       `"0s"`,
		1500 * time.Millisecond: `"1.5s"`,
		87600 * time.Hour:       `"87600h0m0s"`,
		-time.Microsecond:       `"-1µs"`,
	} {
		b, err := json.Marshal(api.Duration(d))
		if err != nil || string(b) != want {
			t.Errorf("Marshal(%v) = %s, %v; want %s", d, b, err, want)
		}
		var back api.Duration
		if err := json.Unmarshal(b, &back); err != nil || back.D() != d {
			t.Errorf("Unmarshal(%s) = %v, %v", b, back, err)
		}
	}
	var d api.Duration
	if err := json.Unmarshal([]byte(`"\u0031m"`), &d); err != nil || d.D() != time.Minute {
		t.Errorf("escaped string: %v, %v", d, err)
	}
	d = api.Duration(time.Second)
	if err := json.Unmarshal([]byte(`null`), &d); err != nil || d.D() != time.Second {
		t.Errorf("null: %v, %v (want unchanged)", d, err)
	}
	for in, want := range map[string]string{
		`5`:          "not a number",
		`1.5`:        "not a number",
		`-3`:         "not a number",
		`"5"`:        `bad duration "5"`,
		`"1 second"`: `bad duration "1 second"`,
		`true`:       "not true",
		`{}`:         "not {}",
	} {
		if err := json.Unmarshal([]byte(in), &d); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Unmarshal(%s): %v, want an error saying %s", in, err, want)
		}
	}
}

// TestPutRequestJSON checks that unset optional fields stay off the wire
// and set ones, zeros included, go on it.
func TestPutRequestJSON(t *testing.T) {
	b, _ := json.Marshal(api.PutRequest{})
	if string(b) != `{}` {
		t.Errorf("empty request: %s", b)
	}
	b, _ = json.Marshal(api.PutRequest{Priority: new(uint32(0)), Delay: new(api.Duration(0)), Payload: json.RawMessage(`[1]`)})
	if string(b) != `{"payload":[1],"delay":"0s","priority":0}` {
		t.Errorf("request with zeros: %s", b)
	}
	b, _ = json.Marshal(api.ReserveRequest{Max: new(0)})
	if string(b) != `{"max":0}` {
		t.Errorf("reserve: %s", b)
	}
}
