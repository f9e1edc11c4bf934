package pebblestore_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hourglass-go/hourglass/broker"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/store"
	"github.com/hourglass-go/hourglass/store/pebblestore"
	"github.com/hourglass-go/hourglass/task"
)

// TestDamage_PayloadDoesNotBlockQueue runs a broker over a store in
// which the payload of the first task of a queue is damaged: reserves
// skip it (it dies, and the log names it) and hand out the tasks behind
// it, and it can be deleted. Before, every reserve reaching it failed
// whole and so did its delete (issue 27).
func TestDamage_PayloadDoesNotBlockQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "db")
	st := open(t, dir)
	var log logBuffer
	b, err := broker.Open(st, broker.Config{Logger: slog.New(slog.NewTextHandler(&log, nil)), RecentBytes: noRecent})
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{"a", "b", "c", "d"}
	jobs := map[string]uint64{}
	for i, id := range ids {
		put, _, err := service.New(b).Put(ctx, "q", task.PutRequest{ID: id, Priority: uint32(i), Payload: []byte(`"` + id + `"`)})
		if err != nil {
			t.Fatal(err)
		}
		jobs[id] = put.JobID
	}
	key := pebblestore.PayloadKey(jobs["a"])
	raw, err := st.Raw(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetRaw(key, flip(raw)); err != nil {
		t.Fatal(err)
	}

	// The first reserve meets "a" first: it must hand out "b", and then
	// "c" and "d" together.
	var got []string
	for _, max := range []int{1, 2} {
		ts, err := service.New(b).Reserve(ctx, "q", max, 0)
		if err != nil {
			t.Fatalf("Reserve(max %d): %v; want the tasks behind the damaged one", max, err)
		}
		for _, tk := range ts {
			got = append(got, tk.ID)
			if string(tk.Payload) != `"`+tk.ID+`"` {
				t.Errorf("task %s handed out with payload %q", tk.ID, tk.Payload)
			}
		}
	}
	if strings.Join(got, ",") != "b,c,d" {
		t.Errorf("reserved %v, want [b c d]", got)
	}
	if ts, err := service.New(b).Reserve(ctx, "q", 1, 0); err != nil || len(ts) != 0 {
		t.Errorf("Reserve of the emptied queue: %v, %v; want nothing, no error", ts, err)
	}
	if l := log.String(); !strings.Contains(l, "task damaged in the store") || !strings.Contains(l, "id=a") || !strings.Contains(l, "payload") {
		t.Errorf("no log line naming the damaged task:\n%s", l)
	}

	// The damaged task can be deleted, durably.
	if err := service.New(b).Delete(ctx, "q", "a"); err != nil {
		t.Fatalf("Delete of the damaged task: %v", err)
	}
	if _, err := service.New(b).Get("q", "a"); !errors.Is(err, task.ErrNotFound) {
		t.Errorf("Get after Delete: %v; want ErrNotFound", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = open(t, dir)
	defer st.Close()
	var left []string
	if err := st.Recover(func(tk store.Task) error {
		left = append(left, tk.ID+":"+tk.State.String())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(left, ",") != "b:reserved,c:reserved,d:reserved" {
		t.Errorf("after a restart the store holds %v; want b, c and d reserved", left)
	}
}

// TestDamage_PayloadDeadRecorded: the death of a task whose payload is
// damaged is recorded, so that after a restart it stays dead rather than
// blocking its queue again.
func TestDamage_PayloadDeadRecorded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "db")
	st := open(t, dir)
	b, err := broker.Open(st, broker.Config{Logger: quiet, RecentBytes: noRecent})
	if err != nil {
		t.Fatal(err)
	}
	put, _, err := service.New(b).Put(ctx, "q", task.PutRequest{ID: "a", Payload: []byte(`"a"`)})
	if err != nil {
		t.Fatal(err)
	}
	key := pebblestore.PayloadKey(put.JobID)
	raw, _ := st.Raw(key)
	if err := st.SetRaw(key, flip(raw)); err != nil {
		t.Fatal(err)
	}
	if ts, err := service.New(b).Reserve(ctx, "q", 1, 0); err != nil || len(ts) != 0 {
		t.Fatalf("Reserve: %v, %v; want nothing, no error", ts, err)
	}
	b.Close()
	st.Close()

	st = open(t, dir)
	defer st.Close()
	var states []store.State
	st.Recover(func(tk store.Task) error { states = append(states, tk.State); return nil })
	if len(states) != 1 || states[0] != store.Dead {
		t.Errorf("after a restart: states %v; want the damaged task dead", states)
	}
}

// TestDamage_PayloadDelete deletes a task whose payload is damaged before
// any reserve met it: the delete reads the record alone, and succeeds.
func TestDamage_PayloadDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := open(t, filepath.Join(t.TempDir(), "db"))
	defer st.Close()
	b, err := broker.Open(st, broker.Config{Logger: quiet, RecentBytes: noRecent})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	put, _, err := service.New(b).Put(ctx, "q", task.PutRequest{ID: "a", Payload: []byte(`"a"`)})
	if err != nil {
		t.Fatal(err)
	}
	key := pebblestore.PayloadKey(put.JobID)
	raw, _ := st.Raw(key)
	if err := st.SetRaw(key, flip(raw)); err != nil {
		t.Fatal(err)
	}
	if err := service.New(b).Delete(ctx, "q", "a"); err != nil {
		t.Fatalf("Delete of a task whose payload is damaged: %v", err)
	}
	if _, err := st.Task(put.JobID); err != store.ErrNotFound {
		t.Errorf("Task after Delete: %v; want ErrNotFound", err)
	}
}

// noRecent keeps the brokers of these tests from keeping records of tasks
// due soon in memory: a reserve would hand out the record it kept, intact,
// and never read the damaged one from the store, which is what these
// tests are about.
const noRecent = -1
