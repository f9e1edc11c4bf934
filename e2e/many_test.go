package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/client"
)

// TestReserveQueues_Acks checks POST /v1/reserve (several queues, in
// delivery order across them, with its long-poll) and POST /v1/acks (each
// ack answered alone), and that bad input is refused and changes nothing.
func TestReserveQueues_Acks(t *testing.T) { engines(t, testReserveQueuesAcks) }

func testReserveQueuesAcks(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.client()
	ctx := context.Background()
	put := func(queue, id string, prio uint32) {
		t.Helper()
		if _, _, err := c.Put(ctx, queue, api.PutRequest{ID: id, Priority: &prio}); err != nil {
			t.Fatalf("put %s/%s: %v", queue, id, err)
		}
	}
	put("a", "a1", 5)
	put("b", "b1", 1)
	put("a", "a2", 3)
	put("c", "c1", 0) // not asked for

	got, err := c.ReserveQueues(ctx, []string{"a", "b"}, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, tk := range got {
		order = append(order, tk.Queue+"/"+tk.ID)
		if tk.Lease == "" || tk.State != api.StateReserved {
			t.Errorf("reserved %+v", tk)
		}
	}
	if strings.Join(order, " ") != "b/b1 a/a2 a/a1" {
		t.Fatalf("reserve from a and b: %v; want b/b1 a/a2 a/a1 (by priority across queues, c left)", order)
	}

	// The long-poll wakes for a task put into any of the queues.
	go func() {
		time.Sleep(300 * time.Millisecond)
		put("y", "y1", 0)
	}()
	start := time.Now()
	polled, err := c.ReserveQueues(ctx, []string{"x", "y"}, 5, 5*time.Second)
	if err != nil || len(polled) != 1 || polled[0].ID != "y1" || time.Since(start) > 4*time.Second {
		t.Fatalf("long-poll on x and y: %+v, %v after %v", polled, err, time.Since(start))
	}

	// Many acks: two good, one stale lease, one unknown task.
	acks := []api.Ack{
		{Queue: "b", ID: "b1", Lease: got[0].Lease},
		{Queue: "a", ID: "a2", Lease: "stale"},
		{Queue: "a", ID: "a1", Lease: got[2].Lease},
		{Queue: "a", ID: "nothing", Lease: "x"},
	}
	errs, err := c.AckMany(ctx, acks)
	if err != nil {
		t.Fatal(err)
	}
	if len(errs) != 4 || errs[0] != nil || errs[1] == nil || errs[2] != nil || errs[3] == nil {
		t.Fatalf("acks: %v", errs)
	}
	for _, e := range errs[1:2] {
		if !strings.HasPrefix(e.Error(), "hourglass: ") || strings.Count(e.Error(), "hourglass:") != 1 {
			t.Errorf("ack error %q: want one prefix", e)
		}
	}
	for _, id := range []string{"b/b1", "a/a1"} {
		q, i, _ := strings.Cut(id, "/")
		if f, err := c.Get(ctx, q, i); err != nil || f.State != api.StateFinished {
			t.Errorf("get %s after its ack: %+v, %v; want its finished record", id, f, err)
		}
	}
	if tk, err := c.Get(ctx, "a", "a2"); err != nil || tk.State != api.StateReserved {
		t.Errorf("a2 after an ack with a stale lease: %+v, %v", tk, err)
	}

	// Bad input: 400, nothing reserved or acked.
	many := make([]string, api.MaxReserveQueues+1)
	for i := range many {
		many[i] = fmt.Sprintf("q%d", i)
	}
	tooMany := make([]api.Ack, api.MaxAcks+1)
	for i := range tooMany {
		tooMany[i] = api.Ack{Queue: "a", ID: "a2", Lease: got[1].Lease}
	}
	for _, bad := range []struct {
		what string
		err  error
	}{
		{"no queue", func() error { _, err := c.ReserveQueues(ctx, nil, 1, 0); return err }()},
		{"a bad queue name", func() error { _, err := c.ReserveQueues(ctx, []string{"a", "bad queue"}, 1, 0); return err }()},
		{"too many queues", func() error { _, err := c.ReserveQueues(ctx, many, 1, 0); return err }()},
		{"no ack", func() error { _, err := c.AckMany(ctx, nil); return err }()},
		{"too many acks", func() error { _, err := c.AckMany(ctx, tooMany); return err }()},
	} {
		if !errors.Is(bad.err, client.ErrInvalid) {
			t.Errorf("%s: %v, want 400", bad.what, bad.err)
		}
	}
	if a := s.call("POST", "/v1/acks", `{"acks":[{"queue":"a","id":"a2","lease":"x"}],"extra":1}`); a.status != 400 {
		t.Errorf("acks with an unknown field: %v", a)
	}
	if a := s.call("POST", "/v1/reserve", `{"queues":["c"],"max":0}`); a.status != 400 {
		t.Errorf("reserve of max 0: %v", a)
	}
	if a := s.call("POST", "/v1/reserve", `{"queues":["c"],"max":1`); a.status != 400 {
		t.Errorf("truncated reserve: %v", a)
	}
	if tk, err := c.Get(ctx, "a", "a2"); err != nil || tk.State != api.StateReserved || tk.Attempts != 1 {
		t.Errorf("a2 after the refused calls: %+v, %v; want reserved once", tk, err)
	}
	if tk, err := c.Get(ctx, "c", "c1"); err != nil || tk.State != api.StateReady {
		t.Errorf("c1 after the refused calls: %+v, %v; want ready", tk, err)
	}
}
