package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/broker"
	"github.com/hourglass-go/hourglass/internal/testserver"
	"github.com/hourglass-go/hourglass/task"
)

// BenchmarkServer_PutBatch measures tasks:batch of 100 tasks with
// 200-byte payloads and 1 h delays, from 8 clients over loopback HTTP,
// through the whole server (HTTP, broker, Pebble with fsync): the serve
// scenario's batch row, in one process so that it can be profiled.
func BenchmarkServer_PutBatch(b *testing.B) {
	_, url := benchServer(b)
	body := func(r *rand.Rand) []byte {
		var buf bytes.Buffer
		buf.WriteString(`{"tasks":[`)
		for i := range 100 {
			if i > 0 {
				buf.WriteByte(',')
			}
			p := make([]byte, 198)
			for j := range p {
				p[j] = "abcdefghijklmnopqrstuvwxyz0123456789"[r.IntN(36)]
			}
			fmt.Fprintf(&buf, `{"payload":"%s","delay":"1h"}`, p)
		}
		buf.WriteString(`]}`)
		return buf.Bytes()
	}
	b.SetParallelism(4) // 8 clients on 2 CPUs
	cpu0 := cpuTime()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		r := rand.New(rand.NewPCG(rand.Uint64(), 0))
		hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
		for pb.Next() {
			resp, err := hc.Post(url+"/v1/queues/q/tasks:batch", "application/json", bytes.NewReader(body(r)))
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)*100/b.Elapsed().Seconds(), "tasks/s")
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N*100), "cpu-ns/task")
}

// cpuTime returns the process's user and system CPU time so far, which
// other load on the machine disturbs far less than rates: a benchmark's
// CPU per operation (client and server together) compares across runs.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkServer_ReserveAck measures reserve (max 10) then ack of each
// task from 8 clients over loopback HTTP through the whole server, on a
// queue kept full of ready tasks: the delivery half of the serve
// scenario's lateness row.
func BenchmarkServer_ReserveAck(b *testing.B) {
	br, url := benchServer(b)
	rs := make([]task.PutRequest, 1000)
	for i := range rs {
		rs[i] = task.PutRequest{Payload: []byte(`"` + string(bytes.Repeat([]byte("x"), 198)) + `"`)}
	}
	for range 300 {
		br.PutBatch(context.Background(), "q", rs)
	}
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
		post := func(path, body string) []byte {
			resp, err := hc.Post(url+path, "application/json", bytes.NewReader([]byte(body)))
			if err != nil {
				b.Error(err)
				return nil
			}
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode/100 != 2 {
				b.Errorf("%s: %d %s", path, resp.StatusCode, out)
			}
			return out
		}
		for pb.Next() {
			var got api.ReserveResponse
			if err := json.Unmarshal(post("/v1/queues/q/reserve", `{"max":10}`), &got); err != nil {
				b.Error(err)
				return
			}
			for _, t := range got.Tasks {
				post("/v1/queues/q/tasks/"+t.ID+"/ack", `{"lease":"`+t.Lease+`"}`)
			}
		}
	})
	b.ReportMetric(float64(b.N)*10/b.Elapsed().Seconds(), "tasks/s")
}

// benchServer serves a broker on a Pebble store in a temporary directory
// over loopback HTTP (internal/testserver) until the benchmark ends, and
// returns the broker and the server's URL.
func benchServer(b *testing.B) (*broker.Broker, string) {
	s, err := testserver.Start(testserver.Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Close)
	return s.Broker, s.URL
}
