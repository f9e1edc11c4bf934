package servicetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// pushAttempts: the Ack and Nack that settle a push (made under
// service.WithPush) end attempts recorded as pushed and push-failed with
// the push's HTTP status (service.AttemptOutcome), on every engine; the
// task is acked all the same; a worker's ack and nack keep their
// outcomes and have no status.
func pushAttempts(t *testing.T, b service.Service) {
	ctx := context.Background()
	reserve := func(what string) task.Task {
		t.Helper()
		ts, err := b.Reserve(ctx, "p", 1, 0)
		must(t, what, err)
		if len(ts) != 1 {
			t.Fatalf("%s: reserved %d tasks, want 1", what, len(ts))
		}
		return ts[0]
	}
	_, _, err := b.Put(ctx, "p", task.PutRequest{ID: "a", Payload: []byte(`1`)})
	must(t, "put a", err)
	r := reserve("reserve 1")
	_, err = b.Nack(service.WithPush(ctx, 503), "p", "a", r.Lease, 0, "push: HTTP 503: busy")
	must(t, "nack under a push's 503", err)
	r = reserve("reserve 2")
	_, err = b.Nack(service.WithPush(ctx, 0), "p", "a", r.Lease, 0, "push: timeout after 1s")
	must(t, "nack under a push without an answer", err)
	r = reserve("reserve 3")
	_, err = b.Nack(ctx, "p", "a", r.Lease, 0, "worker")
	must(t, "a worker's nack", err)
	r = reserve("reserve 4")
	must(t, "ack under a push's 202", b.Ack(service.WithPush(ctx, 202), "p", "a", r.Lease))

	_, _, err = b.Put(ctx, "p", task.PutRequest{ID: "b", Payload: []byte(`1`)})
	must(t, "put b", err)
	r = reserve("reserve b")
	must(t, "a worker's ack", b.Ack(ctx, "p", "b", r.Lease))

	for id, want := range map[string][]string{
		"a": {"1 push-failed 503 push: HTTP 503: busy", "2 push-failed 0 push: timeout after 1s", "3 nacked 0 worker", "4 pushed 202 "},
		"b": {"1 acked 0 "},
	} {
		as, err := b.Attempts(ctx, "p", id)
		must(t, "attempts of "+id, err)
		got := make([]string, len(as))
		for i, a := range as {
			got[i] = fmt.Sprintf("%d %s %d %s", a.N, a.Outcome, a.Status, a.Error)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("attempts of %s: %q, want %q", id, got, want)
		}
	}
	fs, _, err := b.FinishedTasks(ctx, "p", "", 0, 10)
	must(t, "history of p", err)
	if len(fs) != 2 || fs[0].Outcome != task.FinishedAcked || fs[1].Outcome != task.FinishedAcked {
		t.Errorf("history of p: %+v; want a and b acked, pushed or not", fs)
	}
}
