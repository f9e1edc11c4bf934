package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/api"
)

// TestNames_WaitLeavesNothing reserves from 120,000 distinct queue names
// that hold nothing (reserves of 100 names each, half with wait 0s, half
// long polls with wait 1ms, 16 at a time), more than the embedded
// engine's 100,000 queues. Afterwards puts to new queues answer 201,
// GET /v1/queues lists only the queues put to, the server's heap is back
// near where it was, and a cluster node listens to as many channels as
// before (issue 39).
func TestNames_WaitLeavesNothing(t *testing.T) { engines(t, testNamesWaitLeavesNothing) }

func testNamesWaitLeavesNothing(t *testing.T) {
	const (
		names     = 120_000
		perCall   = api.MaxReserveQueues
		workers   = 16
		heapBound = 16 << 20 // the names kept cost about 40 MiB on a node, over 100 MiB embedded
	)
	// GOGC=10: the heap in use follows what is live closely, so that
	// what the reserves left behind shows in it.
	s := startServer(t, withEnv("GOGC=10"))
	ctx := context.Background()
	c := s.client()
	heapBefore := heapInUse(t, s)
	listenBefore := metricValue(t, s, "hourglass_cluster_listen_channels")

	start := time.Now()
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i*perCall >= names {
					return
				}
				wait := "0s"
				if i%2 == 1 {
					wait = "1ms"
				}
				var b strings.Builder
				b.WriteString(`{"queues":[`)
				for j := range perCall {
					if j > 0 {
						b.WriteByte(',')
					}
					fmt.Fprintf(&b, `"n%d"`, i*perCall+int64(j))
				}
				fmt.Fprintf(&b, `],"max":1,"wait":%q}`, wait)
				a, err := s.try("POST", "/v1/reserve", b.String(), "")
				if err != nil || a.status != 200 {
					if failed.Add(1) == 1 {
						t.Errorf("reserve %d: %v, %v", i, a, err)
					}
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d names reserved from in %d calls of %d: %s", names, names/perCall, perCall, time.Since(start).Round(time.Millisecond))
	if failed.Load() > 0 {
		t.Fatalf("%d reserves failed", failed.Load())
	}

	for i := range 10 {
		if _, _, err := c.Put(ctx, fmt.Sprintf("real%d", i), api.PutRequest{ID: "1"}); err != nil {
			t.Fatalf("put to a new queue after the reserves: %v", err)
		}
	}
	qs, err := c.Queues(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 10 {
		t.Errorf("GET /v1/queues lists %d queues, want the 10 put to", len(qs))
	}
	for _, q := range qs {
		if !strings.HasPrefix(q.Name, "real") {
			t.Errorf("GET /v1/queues lists %q, which holds nothing", q.Name)
			break
		}
	}
	// The embedded engine keeps a name's state for a second or two after
	// its last wait (broker's idleGrace); each scrape allocates, so the
	// collector runs meanwhile.
	var heapAfter int64
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		heapAfter = heapInUse(t, s)
		if heapAfter-heapBefore <= heapBound || time.Now().After(deadline) {
			break
		}
	}
	t.Logf("heap in use: %.1f MiB before, %.1f MiB after", float64(heapBefore)/(1<<20), float64(heapAfter)/(1<<20))
	if heapAfter-heapBefore > heapBound {
		t.Errorf("the heap grew by %d MiB over the reserves, over %d MiB", (heapAfter-heapBefore)>>20, heapBound>>20)
	}
	if engineOf(t) == clusterEngine {
		listenAfter := metricValue(t, s, "hourglass_cluster_listen_channels")
		t.Logf("channels listened to: %v before, %v after", listenBefore, listenAfter)
		if listenAfter < 1 || listenAfter > listenBefore+2 {
			t.Errorf("the node listens to %v channels after the reserves, %v before", listenAfter, listenBefore)
		}
	}
}

// TestNames_QueueSeriesGo: a queue's series in /metrics go with the
// queue: hourglass_queue_tasks of a paused queue that holds nothing goes
// when it is resumed, and hourglass_task_retries_total of a queue goes
// when its last task is deleted.
func TestNames_QueueSeriesGo(t *testing.T) { engines(t, testNamesQueueSeriesGo) }

func testNamesQueueSeriesGo(t *testing.T) {
	s := startServer(t)
	ctx := context.Background()
	c := s.client()
	if err := c.Pause(ctx, "paused", time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := c.Resume(ctx, "paused"); err != nil {
		t.Fatal(err)
	}
	if n := seriesOf(t, s, "hourglass_queue_tasks", "paused"); n != 0 {
		t.Errorf("hourglass_queue_tasks of a resumed queue that holds nothing: %d series", n)
	}

	if _, _, err := c.Put(ctx, "retried", api.PutRequest{ID: "1"}); err != nil {
		t.Fatal(err)
	}
	var retried bool
	for deadline := time.Now().Add(20 * time.Second); !retried && time.Now().Before(deadline); {
		got, err := c.Reserve(ctx, "retried", 1, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 1 {
			if _, err := c.Nack(ctx, "retried", "1", got[0].Lease, 0, "again"); err != nil {
				t.Fatal(err)
			}
		}
		retried = seriesOf(t, s, "hourglass_task_retries_total", "retried") > 0
	}
	if !retried {
		t.Fatal("no hourglass_task_retries_total series of the queue after a nack")
	}
	if err := c.Delete(ctx, "retried", "1"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if seriesOf(t, s, "hourglass_task_retries_total", "retried") == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("hourglass_task_retries_total of a queue that went still has series")
		}
	}
}

// metricValue reads the sample of name (no labels) from the server's
// /metrics, 0 when there is none.
func metricValue(t *testing.T, s *server, name string) float64 {
	t.Helper()
	a := s.call("GET", "/metrics", "")
	for _, line := range strings.Split(string(a.body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err == nil {
				return f
			}
		}
	}
	return 0
}

// seriesOf counts the series of name in the server's /metrics whose
// queue label is queue.
func seriesOf(t *testing.T, s *server, name, queue string) (n int) {
	t.Helper()
	a := s.call("GET", "/metrics", "")
	for _, line := range strings.Split(string(a.body), "\n") {
		if strings.HasPrefix(line, name+"{") && strings.Contains(line, `queue="`+queue+`"`) {
			n++
		}
	}
	return n
}
