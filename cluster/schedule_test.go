package cluster_test

import (
	"context"
	"net"
	neturl "net/url"
	"strconv"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/cluster"
	"github.com/hourglass-go/hourglass/internal/tcpproxy"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// TestSchedule_RetriesFailedPut: an occurrence that falls while the
// node's link to its database is cut (connections reset) is put once the
// link is back, before the next occurrence, by the Runner's retries;
// before them it was logged and lost.
func TestSchedule_RetriesFailedPut(t *testing.T) {
	pg := server(t)
	url := pg.CreateDatabase(t)
	proxy, err := tcpproxy.Start(net.JoinHostPort("127.0.0.1", strconv.Itoa(pg.Port)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = proxy.Addr()
	// A lease long enough that a cut of a second keeps the partitions.
	n := startNode(t, u.String(), "a", func(o *cluster.Options) { o.Lease = 6 * time.Second })
	ctx := context.Background()
	if _, _, err := svc(n).SetSchedule(ctx, task.ScheduleSpec{Name: "tick", Cron: "@every 4s", Queue: "cron"}); err != nil {
		t.Fatal(err)
	}
	var at time.Time
	eventually(t, 10*time.Second, "the schedule armed", func() bool {
		at = n.ScheduleNext("tick")
		return !at.IsZero() && time.Until(at) > 700*time.Millisecond
	})
	time.Sleep(time.Until(at) - 500*time.Millisecond)
	proxy.Set(tcpproxy.Cut)
	time.Sleep(time.Until(at) + 500*time.Millisecond)
	proxy.Set(tcpproxy.Pass)
	id := service.OccurrenceID("tick", at)
	eventually(t, 3*time.Second, "the occurrence at "+at.String()+" put", func() bool {
		_, err := svc(n).Get("cron", id)
		return err == nil
	})
}
