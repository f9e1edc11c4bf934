package servicetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// keys: a task keeps the key it was put with, single or in a batch, and
// shows it in every answer that carries the task: the put, a get, a
// reserve (at once, and of a delayed task handed to a waiting reserver),
// a nack, the reserve of the retry, a page of FindTasks, a move. A put
// without one has the key "". A bad key is refused, changing nothing;
// FindTasks's Key filter finds a key's tasks.
func keys(t *testing.T, b service.Service) {
	ctx := context.Background()
	want := func(what string, got task.Task, key string) {
		t.Helper()
		if got.Key != key {
			t.Fatalf("%s: task %s has key %q, want %q", what, got.ID, got.Key, key)
		}
	}
	a, _, err := b.Put(ctx, "ky", task.PutRequest{ID: "a", Key: "tenant-42"})
	must(t, "put a", err)
	want("put a", a, "tenant-42")
	res := b.PutBatch(ctx, "ky", []task.PutRequest{
		{ID: "b", Key: "~!@#$%^&*()", Priority: 1},
		{ID: "c", Key: "tenant-42", Priority: 2},
		{ID: "bad", Key: "a b", Priority: 3},
		{ID: "none", Priority: 4},
	})
	for i, k := range []string{"~!@#$%^&*()", "tenant-42", "", ""} {
		if i == 2 {
			wantErr(t, "batch put of a bad key", res[i].Err, task.ErrInvalid)
			if !strings.Contains(res[i].Err.Error(), "key") {
				t.Fatalf("batch put of a bad key: %v; want it named", res[i].Err)
			}
			continue
		}
		must(t, "batch put", res[i].Err)
		want("batch put", res[i].Task, k)
	}
	for _, k := range []string{"a/b", " ", "é", strings.Repeat("k", task.MaxNameLen+1), "a\x7f"} {
		_, _, err := b.Put(ctx, "ky", task.PutRequest{ID: "x", Key: k})
		wantErr(t, "put with key "+k, err, task.ErrInvalid)
	}
	if _, err := b.Get("ky", "bad"); err == nil {
		t.Fatal("a task of a bad key was put")
	}
	got, err := b.Get("ky", "a")
	must(t, "get a", err)
	want("get a", got, "tenant-42")

	find := func(f service.Filter) []string {
		t.Helper()
		page, _, err := b.FindTasks(ctx, "ky", f, service.Cursor{}, task.MaxList)
		must(t, "find", err)
		var ids []string
		for _, p := range page {
			ids = append(ids, p.ID+"="+p.Key)
		}
		slices.Sort(ids)
		return ids
	}
	if got := find(service.Filter{Key: "tenant-42"}); !slices.Equal(got, []string{"a=tenant-42", "c=tenant-42"}) {
		t.Fatalf("find key tenant-42: %q", got)
	}
	if got := find(service.Filter{}); len(got) != 4 {
		t.Fatalf("find all: %q", got)
	}
	_, _, err = b.FindTasks(ctx, "ky", service.Filter{Key: "a/b"}, service.Cursor{}, 10)
	wantErr(t, "find a bad key", err, task.ErrInvalid)

	ts, err := b.Reserve(ctx, "ky", 5, 0)
	must(t, "reserve", err)
	byID := map[string]string{"a": "tenant-42", "b": "~!@#$%^&*()", "c": "tenant-42", "none": ""}
	if len(ts) != len(byID) {
		t.Fatalf("reserve: %d tasks, want %d", len(ts), len(byID))
	}
	for _, r := range ts {
		want("reserve", r, byID[r.ID])
	}
	for _, r := range ts {
		if r.ID == "b" {
			n, err := b.Nack(ctx, "ky", r.ID, r.Lease, 0, "boom")
			must(t, "nack b", err)
			want("nack b", n, byID["b"])
			continue
		}
		must(t, "ack "+r.ID, b.Ack(ctx, "ky", r.ID, r.Lease))
	}
	retry := ReserveOne(t, b, "ky", 5*time.Second)
	if retry.ID != "b" {
		t.Fatalf("the retry is %s; want b", retry.ID)
	}
	want("reserve of the retry", retry, byID["b"])
	must(t, "ack b", b.Ack(ctx, "ky", retry.ID, retry.Lease))

	// A delayed task, handed to a reserver waiting when it falls due.
	_, _, err = b.Put(ctx, "ky", task.PutRequest{ID: "later", Delay: 200 * time.Millisecond, Key: "k-later"})
	must(t, "put later", err)
	later := ReserveOne(t, b, "ky", 10*time.Second)
	want("reserve of a delayed task", later, "k-later")
	must(t, "ack later", b.Ack(ctx, "ky", later.ID, later.Lease))

	// A move keeps the key.
	_, _, err = b.Put(ctx, "ky", task.PutRequest{ID: "moved", Key: "k-move"})
	must(t, "put moved", err)
	_, err = b.Bulk(ctx, "ky", service.BulkRequest{Action: service.Move, Filter: service.Filter{Key: "k-move"}, To: "ky2"})
	must(t, "move", err)
	got, err = b.Get("ky2", "moved")
	must(t, "get moved", err)
	want("get moved", got, "k-move")
}

// keyList: Service.Keys counts a queue's ready, reserved and delayed
// tasks by key (dead ones not), busiest first then by key, in pages
// whose cursors chain; a bad cursor or limit is refused.
func keyList(t *testing.T, b service.Service) {
	ctx := context.Background()
	puts := []task.PutRequest{
		{ID: "a1", Key: "A", Priority: 7}, {ID: "a2", Key: "A", Priority: 7}, {ID: "a3", Key: "A", Priority: 7, Delay: time.Hour},
		{ID: "b1", Key: "B", Priority: 0}, {ID: "b2", Key: "B", Priority: 5},
		{ID: "n1", Priority: 9}, {ID: "n2", Priority: 9},
		{ID: "c1", Key: "C", MaxAttempts: 1, Priority: 1},
	}
	for i, r := range b.PutBatch(ctx, "kl", puts) {
		must(t, "put "+puts[i].ID, r.Err)
	}
	// Reserve b1 and c1 (the first two by priority), and let c1 die.
	ts, err := b.Reserve(ctx, "kl", 2, 0)
	must(t, "reserve", err)
	if len(ts) != 2 {
		t.Fatalf("reserve: %d tasks", len(ts))
	}
	for _, tk := range ts {
		if tk.ID == "c1" {
			_, err := b.Nack(ctx, "kl", tk.ID, tk.Lease, 0, "boom")
			must(t, "nack c1", err)
		} else if tk.ID != "b1" {
			t.Fatalf("reserved %s, want b1 and c1", tk.ID)
		}
	}
	want := []task.KeyCount{
		{Key: "A", Ready: 2, Delayed: 1},
		{Key: "", Ready: 2},
		{Key: "B", Ready: 1, Reserved: 1},
	}
	page, err := b.Keys(ctx, "kl", "", 10)
	must(t, "keys", err)
	if !slices.Equal(page.Keys, want) || page.Next != "" {
		t.Fatalf("keys: %+v, next %q; want %+v", page.Keys, page.Next, want)
	}
	var got []task.KeyCount
	after := ""
	for range 4 {
		p, err := b.Keys(ctx, "kl", after, 1)
		must(t, "a page of keys", err)
		got = append(got, p.Keys...)
		if after = p.Next; after == "" {
			break
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("pages of 1: %+v; want %+v", got, want)
	}
	if p, err := b.Keys(ctx, "nothing-here", "", 10); err != nil || len(p.Keys) != 0 {
		t.Fatalf("keys of an empty queue: %+v, %v", p, err)
	}
	for _, c := range []struct {
		after string
		limit int
	}{{"x", 10}, {"3/a b", 10}, {"-1/A", 10}, {"", 0}, {"", task.MaxList + 1}} {
		_, err := b.Keys(ctx, "kl", c.after, c.limit)
		wantErr(t, fmt.Sprintf("keys after %q limit %d", c.after, c.limit), err, task.ErrInvalid)
	}
}
