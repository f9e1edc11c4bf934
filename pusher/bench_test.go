//go:build unix

package pusher_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/pusher"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// BenchmarkPusher_Push_Ready pushes b.N ready tasks of 200 bytes from a
// broker on a memory store to a receiver on loopback that answers 204 at
// once: the pusher's own cost per push (reserve, POST, ack), without the
// fsyncs of a durable store. The bench's push scenario measures the
// server as a whole.
func BenchmarkPusher_Push_Ready(b *testing.B) {
	br := openBroker(b)
	var got atomic.Int64
	all := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if got.Add(1) == int64(b.N) {
			close(all)
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	ctx := context.Background()
	payload := []byte(`"` + string(make([]byte, 198)) + `"`)
	for i := range payload[1 : len(payload)-1] {
		payload[i+1] = 'x'
	}
	rs := make([]task.PutRequest, 0, task.MaxBatch)
	for n := 0; n < b.N; n += len(rs) {
		rs = rs[:0]
		for range min(task.MaxBatch, b.N-n) {
			rs = append(rs, task.PutRequest{Payload: payload})
		}
		for _, r := range br.PutBatch(ctx, "q", rs) {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
	}
	s := &withPush{Service: service.New(br), ends: map[string]*task.Push{"q": {URL: srv.URL + "/hook"}}}
	b.ResetTimer()
	cpu0 := cpuTime()
	p := pusher.New(s, pusher.Options{Logger: quiet})
	p.Start()
	select {
	case <-all:
	case <-time.After(time.Minute):
		b.Fatalf("%d of %d pushed in a minute", got.Load(), b.N)
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
	p.Stop(ctx)
}

// cpuTime returns the CPU time (user and system) this process has used:
// on a machine shared with other work, what a push costs is read from it
// rather than from the wall clock.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
