package broker_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hourglass-go/hourglass/store/memstore"
	"github.com/hourglass-go/hourglass/task"
)

func TestBroker_ListTasksPagesByState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := open(t, memstore.New())
		for i := range 25 {
			d := time.Duration(0)
			if i%5 == 0 {
				d = time.Hour
			}
			put(t, b, "q", task.PutRequest{ID: fmt.Sprint(i), Delay: d})
		}
		var all []task.Task
		after := uint64(0)
		for pages := 0; ; pages++ {
			page, next, err := b.ListTasks(context.Background(), "q", 0, after, 10)
			if err != nil || pages > 5 {
				t.Fatal(err, pages)
			}
			all = append(all, page...)
			if next == 0 {
				break
			}
			after = next
		}
		if len(all) != 25 || all[0].ID != "0" || all[24].ID != "24" || all[3].Payload != nil {
			t.Fatalf("pages gave %d tasks", len(all))
		}
		delayed, _, err := b.ListTasks(context.Background(), "q", task.Delayed, 0, 100)
		if err != nil || len(delayed) != 5 {
			t.Fatalf("delayed: %d %v", len(delayed), err)
		}
	})
}

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
