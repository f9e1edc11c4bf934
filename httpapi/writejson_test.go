package httpapi

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/task"
)

// discardWriter is an http.ResponseWriter that keeps the last body
// written, as net/http's copies it into its own buffer.
type discardWriter struct {
	h    http.Header
	body []byte
}

func (w *discardWriter) Header() http.Header { return w.h }
func (w *discardWriter) WriteHeader(int)     {}
func (w *discardWriter) Write(p []byte) (int, error) {
	w.body = append(w.body[:0], p...)
	return len(p), nil
}

// reserved64 returns a reserve's answer of 64 tasks of 200-byte payloads,
// as answerReserve builds it.
func reserved64() []task.Task {
	tasks := make([]task.Task, 64)
	now := time.Now()
	for i := range tasks {
		tasks[i] = task.Task{
			ID: strconv.Itoa(100000 + i), JobID: uint64(100000 + i), Queue: "bench_throughput", State: task.Reserved,
			Payload: []byte(`"` + string(bytes.Repeat([]byte("x"), 198)) + `"`), Due: now, Created: now,
			TTR: time.Minute, Attempts: 1, MaxAttempts: 25, Lease: "0123456789abcdef186a0", LeaseUntil: now.Add(time.Minute),
		}
	}
	return tasks
}

// BenchmarkWriteJSON_Reserve_64 measures the answer of a reserve of 64
// tasks with 200-byte payloads, from the tasks the service returns to
// the bytes handed to the ResponseWriter: benchmarks/river's reserve.
func BenchmarkWriteJSON_Reserve_64(b *testing.B) {
	tasks := reserved64()
	s := New(Options{})
	w := &discardWriter{h: http.Header{}}
	r := httptest.NewRequest("POST", "/v1/queues/q/reserve", nil)
	reserve := func(context.Context) ([]task.Task, error) { return tasks, nil }
	b.ReportAllocs()
	for b.Loop() {
		s.answerReserve(w, r, reserve)
	}
}

// TestAnswerReserve_AsReserveResponse: a reserve's answer is, byte for
// byte, what writeJSON writes for the api.ReserveResponse of its tasks,
// reserved or not, with or without a lease's end, and for none.
func TestAnswerReserve_AsReserveResponse(t *testing.T) {
	tasks := reserved64()[:3]
	tasks[1].State, tasks[1].LeaseUntil = task.Ready, time.Time{}
	tasks[2].LeaseUntil = time.Time{}
	tasks[2].Trace, tasks[2].Key, tasks[2].LastError = task.Trace{Parent: "00-ab-cd-01", State: "k=v"}, "key", "boom"
	s := New(Options{})
	r := httptest.NewRequest("POST", "/v1/queues/q/reserve", nil)
	for _, ts := range [][]task.Task{tasks, tasks[:1], {}} {
		got := &discardWriter{h: http.Header{}}
		s.answerReserve(got, r, func(context.Context) ([]task.Task, error) { return ts, nil })
		want := &discardWriter{h: http.Header{}}
		out := api.ReserveResponse{Tasks: make([]api.Task, len(ts))}
		for i, tk := range ts {
			out.Tasks[i] = toTask(tk, true)
		}
		writeJSON(want, http.StatusOK, out)
		if !bytes.Equal(got.body, want.body) {
			t.Errorf("answer:\n%s\nwant:\n%s", got.body, want.body)
		}
		if g, w := got.h.Get("Content-Length"), want.h.Get("Content-Length"); g != w {
			t.Errorf("Content-Length %s, want %s", g, w)
		}
	}
}

// TestAnswerReserve_Allocs: the answer of a reserve of 64 tasks allocates
// a few objects, not several per task (92 when each task became an
// api.Task, with its lease's end on the heap, in an answer grown from
// nothing), so that the server's CPU per task delivered is not spent in
// the garbage collector. Under the race detector, whose sync.Pool drops
// a share of what it is given on purpose, it makes about 27.
func TestAnswerReserve_Allocs(t *testing.T) {
	tasks := reserved64()
	s := New(Options{})
	w := &discardWriter{h: http.Header{}}
	r := httptest.NewRequest("POST", "/v1/queues/q/reserve", nil)
	reserve := func(context.Context) ([]task.Task, error) { return tasks, nil }
	most := 16.0
	if raceBuild {
		most = 40
	}
	if n := testing.AllocsPerRun(50, func() { s.answerReserve(w, r, reserve) }); n > most {
		t.Errorf("an answer of 64 tasks made %v allocations, want at most %v", n, most)
	}
}
