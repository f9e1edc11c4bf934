package loadgen_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/beanstalk"
	"github.com/hourglass-go/hourglass/broker"
	"github.com/hourglass-go/hourglass/internal/loadgen"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/store/memstore"
)

// small keeps the measurements to a few seconds.
var small = loadgen.Options{Conns: 4, Duration: 300 * time.Millisecond, Prefill: 2000, Jobs: 2000, Lead: 2 * time.Second}

func TestRun_Hourglass(t *testing.T) {
	t.Parallel()
	b, err := broker.Open(memstore.New(), broker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := beanstalk.NewServer(service.New(b), beanstalk.Options{})
	go srv.Serve(l)
	defer srv.Shutdown(context.Background())
	addr := l.Addr().String()
	check(t, addr)
	qs, _ := b.Queues(context.Background())
	for _, q := range qs {
		if q.Reserved+q.Dead > 0 {
			t.Errorf("queue %s left with reserved or buried jobs: %+v", q.Name, q)
		}
		if err := loadgen.Drain(context.Background(), addr, q.Name); err != nil {
			t.Fatal(err)
		}
	}
	qs, _ = b.Queues(context.Background())
	for _, q := range qs {
		if q.Ready+q.Delayed+q.Reserved+q.Dead > 0 {
			t.Errorf("queue %s not drained: %+v", q.Name, q)
		}
	}
}

func TestRun_Beanstalkd(t *testing.T) {
	t.Parallel()
	bs, err := loadgen.StartBeanstalkd(t.TempDir())
	if errors.Is(err, loadgen.ErrNoBeanstalkd) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer bs.Stop()
	check(t, bs.Addr)
}

func check(t *testing.T, addr string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := loadgen.Run(ctx, addr, small)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %.0f puts/s, %.0f round trips/s, lateness p50 %v p99 %v max %v over %d jobs",
		addr, r.PutsPerSec, r.RoundTripsPerSec, r.Lateness.P50, r.Lateness.P99, r.Lateness.Max, r.Lateness.Jobs)
	if r.PutsPerSec <= 0 || r.RoundTripsPerSec <= 0 || r.Lateness.Jobs != small.Jobs || r.Lateness.P99 < 0 {
		t.Fatalf("report %+v", r)
	}
}
