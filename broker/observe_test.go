package broker_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hourglass-go/hourglass/store/memstore"
	"github.com/hourglass-go/hourglass/task"
)

func TestBroker_LatenessAndDueHistogram(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := open(t, memstore.New())
		for i := range 10 {
			put(t, b, "q", task.PutRequest{Delay: time.Duration(i+1) * time.Minute})
		}
		put(t, b, "q", task.PutRequest{Delay: 2 * time.Hour})
		_, counts, err := b.DueHistogram(context.Background(), "q", time.Minute, 60)
		if err != nil {
			t.Fatal(err)
		}
		sum := 0
		for _, c := range counts {
			sum += c
		}
		if sum != 10 || counts[0] != 0 || counts[1] != 1 {
			t.Fatalf("histogram %v", counts)
		}
		put(t, b, "r", task.PutRequest{At: time.Now().Add(-300 * time.Millisecond)})
		reserve1(t, b, "r")
		ws, _ := b.Lateness(context.Background())
		if len(ws) != 1 || ws[0].Deliveries != 1 || ws[0].Max != 300*time.Millisecond || ws[0].P99 != 300*time.Millisecond {
			t.Fatalf("lateness %+v", ws)
		}
	})
}
