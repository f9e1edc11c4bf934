package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/broker"
)

func TestSmoke(t *testing.T) {
	srv := server(t)
	url := srv.CreateDatabase(t)
	a := startNode(t, url, "a")
	b := startNode(t, url, "b")
	ctx := context.Background()
	eventually(t, 5*time.Second, "rebalanced", func() bool { return len(a.Owned()) == 32 && len(b.Owned()) == 32 })
	task, created, err := a.Put(ctx, "q", broker.PutRequest{ID: "x", Payload: []byte(`"hi"`), Delay: 300 * time.Millisecond})
	if err != nil || !created {
		t.Fatal(task, created, err)
	}
	t.Logf("put %+v", task)
	start := time.Now()
	got, err := b.Reserve(ctx, "q", 1, 2*time.Second)
	if err != nil || len(got) != 1 {
		t.Fatal(got, err)
	}
	t.Logf("reserved after %v, late %v: %+v", time.Since(start), time.Since(got[0].Due), got[0])
	if err := a.Ack(ctx, "q", "x", got[0].Lease); err != nil {
		t.Fatal(err)
	}
}
