package httpapi

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/api"
)

// TestAppendTask_MatchesEncodingJSON: the hand-written answers are what
// encoding/json writes (HTML escaping off) for random tasks, batches and
// reserve answers, with strings that need escaping, zero and far times,
// and compact payloads.
func TestAppendTask_MatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	strs := []string{"", "a", "job-7", `q"uote`, `back\slash`, "tab\there", "<html>&", "ünï", "\u2028", "bad\xffutf8", "ctl\x01"}
	str := func() string {
		if r.IntN(3) == 0 {
			return strs[r.IntN(len(strs))]
		}
		b := make([]byte, r.IntN(20))
		for i := range b {
			b[i] = byte(0x21 + r.IntN(0x5e))
		}
		return string(b)
	}
	payloads := []string{`{"x":1}`, `"s<>&"`, `[1,2,{"a":null}]`, `12.5e3`, `true`, `"ünï\u2028"`}
	tm := func() time.Time {
		switch r.IntN(4) {
		case 0:
			return time.Time{}
		case 1:
			return time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
		}
		return time.Unix(0, r.Int64N(4e18)).UTC()
	}
	task := func() api.Task {
		t := api.Task{
			ID: str(), JobID: r.Uint64(), Queue: str(), State: str(),
			Priority: r.Uint32(), Due: tm(), TTR: api.Duration(r.Int64N(1e13)),
			Attempts: r.IntN(100), MaxAttempts: r.IntN(3), Created: tm(),
		}
		if r.IntN(4) > 0 {
			t.Payload = json.RawMessage(payloads[r.IntN(len(payloads))])
		}
		if r.IntN(2) == 0 {
			t.Lease = str()
		}
		if r.IntN(2) == 0 {
			e := tm()
			t.LeaseExpires = &e
		}
		if r.IntN(2) == 0 {
			t.LastError = str()
		}
		if r.IntN(2) == 0 {
			t.Traceparent = str()
		}
		if r.IntN(2) == 0 {
			t.Tracestate = str()
		}
		if r.IntN(2) == 0 {
			t.Key = str()
		}
		return t
	}
	check := func(v any) {
		t.Helper()
		var want bytes.Buffer
		if err := encodeJSON(&want, v); err != nil {
			t.Fatal(err)
		}
		got, ok := appendJSON(nil, v)
		if !ok || !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("appendJSON(%#v)\n got %s\nwant %s", v, got, want.Bytes())
		}
	}
	for range 2000 {
		check(task())
		var rr api.ReserveResponse
		if r.IntN(5) > 0 {
			rr.Tasks = make([]api.Task, r.IntN(4))
			for i := range rr.Tasks {
				rr.Tasks[i] = task()
			}
		}
		check(rr)
		var br api.BatchResponse
		if r.IntN(5) > 0 {
			br.Results = make([]api.BatchResult, r.IntN(4))
			for i := range br.Results {
				if r.IntN(2) == 0 {
					tk := task()
					br.Results[i].Task = &tk
				}
				if r.IntN(2) == 0 {
					br.Results[i].Error = str()
				}
				if r.IntN(2) == 0 {
					br.Results[i].Status = 100 + r.IntN(500)
				}
				if r.IntN(3) == 0 {
					br.Results[i].Finished = &api.FinishedRecord{ID: str(), JobID: r.Uint64(), Queue: str(), State: api.StateFinished,
						Outcome: str(), Finished: time.Unix(0, r.Int64()).UTC(), Attempts: r.IntN(100), LastError: str()}
				}
			}
		}
		check(br)
		var ar api.AcksResponse
		if r.IntN(5) > 0 {
			ar.Results = make([]api.AckResult, r.IntN(4))
			for i := range ar.Results {
				if r.IntN(2) == 0 {
					ar.Results[i].Error = str()
				}
			}
		}
		check(ar)
	}
}

// TestAppendTask_PayloadAsPut: a payload comes back byte for byte, white
// space included, where encoding/json would compact it.
func TestAppendTask_PayloadAsPut(t *testing.T) {
	p := "{ \"a\" :\n [1, 2] }"
	got, _ := appendJSON(nil, api.Task{Payload: json.RawMessage(p)})
	if !bytes.Contains(got, []byte(`"payload":`+p+`,`)) {
		t.Fatalf("payload not as put: %s", got)
	}
	var back api.Task
	if err := json.Unmarshal(got, &back); err != nil || string(back.Payload) != p {
		t.Fatalf("round trip: %q %v", back.Payload, err)
	}
}
