package servicetest

import (
	"context"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// urgentBound checks the bound of a queue's urgent count
// (service.UrgentBelow) on b: ready tasks of priority 0 and
// UrgentBelow-1 count, one of UrgentBelow does not, nor a delayed or a
// reserved task of priority 0.
func urgentBound(t *testing.T, b service.Service) {
	ctx := context.Background()
	for id, prio := range map[string]uint32{"zero": 0, "under": service.UrgentBelow - 1, "at": service.UrgentBelow, "held": 0} {
		_, _, err := b.Put(ctx, "u", task.PutRequest{ID: id, Priority: prio})
		must(t, "put "+id, err)
	}
	_, _, err := b.Put(ctx, "u", task.PutRequest{ID: "later", Priority: 0, Delay: time.Hour})
	must(t, "put later", err)
	ts, err := b.Reserve(ctx, "u", 1, 0)
	must(t, "reserve", err)
	if len(ts) != 1 || ts[0].Priority != 0 {
		t.Fatalf("reserve took %+v; want one of priority 0", ts)
	}
	qd, err := b.Queue("u")
	must(t, "queue", err)
	if qd.Ready != 3 || qd.Urgent != 2 {
		t.Fatalf("Queue(u): %d ready, %d urgent; want 3 ready, 2 urgent (priority 0 and %d)", qd.Ready, qd.Urgent, service.UrgentBelow-1)
	}
}
