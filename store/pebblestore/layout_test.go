package pebblestore_test

import (
	"encoding/hex"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/store"
	"github.com/hourglass-go/hourglass/store/pebblestore"
	hgtask "github.com/hourglass-go/hourglass/task"
)

// TestLayout_Example checks the worked example of the package doc: the
// keys of task 42 and the sizes of their values, the queue record, and
// the history's keys of task 42 acked.
func TestLayout_Example(t *testing.T) {
	st := open(t, filepath.Join(t.TempDir(), "db"))
	defer st.Close()
	task := store.Task{JobID: 42, Queue: "mail", ID: "welcome-7", State: store.Waiting, Payload: []byte("hello")}
	if err := st.Commit(&store.Batch{Ops: []store.Op{{Kind: store.PutTask, Task: task}}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key     []byte
		wantKey string // hex, as in the doc without spaces
		valLen  int
	}{
		{pebblestore.MetaKey(42), "6a00000000000000006d000000000000002a", 90},
		{pebblestore.PayloadKey(42), "6a000000000000000070000000000000002a", 9},
		{pebblestore.ListKey("mail", 42), "6a000000000000000071046d61696c000000000000002a", 4},
		{pebblestore.IndexKey("mail", "welcome-7"), "6b046d61696c77656c636f6d652d37", 12},
		{pebblestore.MetaKey(4096), "6a00000000000000016d0000000000001000", 0},
	} {
		if got := hex.EncodeToString(c.key); got != c.wantKey {
			t.Errorf("key %s, want %s", got, c.wantKey)
		}
		if c.valLen == 0 {
			continue // a key shown for its era only
		}
		v, err := st.Raw(c.key)
		if err != nil || len(v) != c.valLen {
			t.Errorf("value under %x: %d bytes, %v; want %d bytes", c.key, len(v), err, c.valLen)
		}
	}
	if v, err := st.Raw(pebblestore.IndexKey("mail", "welcome-7")); err != nil || hex.EncodeToString(v[:8]) != "2a00000000000000" {
		t.Errorf("index value %x, %v; want job 42 little-endian first", v, err)
	}
	if n, _ := st.NextJobID(); n != 43 {
		t.Errorf("NextJobID() = %d, want 43", n)
	}

	// A nack's error lengthens the record by its bytes.
	task.LastError = "timeout"
	if err := st.Commit(&store.Batch{Ops: []store.Op{{Kind: store.UpdateTask, Task: task}}}); err != nil {
		t.Fatal(err)
	}
	if v, err := st.Raw(pebblestore.MetaKey(42)); err != nil || len(v) != 97 {
		t.Errorf("record with a last error: %d bytes, %v; want 97", len(v), err)
	}

	// The queue record of the example, byte for byte.
	q := store.Queue{Name: "mail", PausedUntil: 1<<63 - 1, Pauses: 2, Policy: hgtask.Policy{
		Retry: &hgtask.Retry{Initial: time.Second, Max: time.Minute, Multiplier: 2, Jitter: 0.1},
	}}
	if err := st.Commit(&store.Batch{Ops: []store.Op{{Kind: store.PutQueue, Queue: q}}}); err != nil {
		t.Fatal(err)
	}
	key := pebblestore.QueueKey("mail")
	if got := hex.EncodeToString(key); got != "516d61696c" {
		t.Errorf("queue key %s, want 516d61696c", got)
	}
	const body = "ffffffffffffff7f0200000000000000" +
		"0180a8d6b90780e0ba84bf0300000000000000409a9999999999b93f" +
		"000000000000"
	if v, err := st.Raw(key); err != nil || len(v) != 54 || hex.EncodeToString(v[:len(v)-4]) != body {
		t.Errorf("queue value %x, %v; want 54 bytes, %s and a checksum", v, err, body)
	}

	// Task 42 acked on its first attempt: its history's keys.
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano()
	var hb store.Batch
	hb.PutAttempt(store.Attempt{JobID: 42, N: 1, Started: at - int64(time.Second), Ended: at, Outcome: hgtask.AttemptAcked})
	hb.PutFinished(store.Finished{Seq: 7, JobID: 42, Queue: "mail", ID: "welcome-7", Outcome: hgtask.FinishedAcked, Finished: at, Attempts: 1})
	if err := st.Commit(&hb); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key     []byte
		wantKey string
		valLen  int
	}{
		{pebblestore.AttemptKey(42, 1), "41000000000000002a00000001", 32},
		{pebblestore.FinishedKey("mail", 7), "48046d61696c0000000000000007", 41},
		{pebblestore.FinishedIDKey("mail", "welcome-7"), "49046d61696c77656c636f6d652d37", 12},
		{pebblestore.FinishedTimeKey(at, 7), "549886caf21c9632000000000000000007", 27},
		{pebblestore.HistorySeqKey, "68", 12},
	} {
		if got := hex.EncodeToString(c.key); got != c.wantKey {
			t.Errorf("key %s, want %s", got, c.wantKey)
		}
		if v, err := st.Raw(c.key); err != nil || len(v) != c.valLen {
			t.Errorf("value under %x: %d bytes, %v; want %d bytes", c.key, len(v), err, c.valLen)
		}
	}
	if v, err := st.Raw(pebblestore.FinishedIDKey("mail", "welcome-7")); err != nil || hex.EncodeToString(v[:8]) != "0700000000000000" {
		t.Errorf("last finished value %x, %v; want Seq 7 little-endian first", v, err)
	}
	if got := hex.EncodeToString(pebblestore.FinishedTimeKey(-1, 0)[1:9]); got != "7fffffffffffffff" {
		t.Errorf("time -1 in a T key: %s, want 7fffffffffffffff (below every time from 1970 on)", got)
	}

	// A task whose id is its job id in decimal (put without one) has no
	// index entry; Lookup finds it through its record.
	own := store.Task{JobID: 43, Queue: "mail", ID: "43", State: store.Waiting}
	if err := st.Commit(&store.Batch{Ops: []store.Op{{Kind: store.PutTask, Task: own}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Raw(pebblestore.IndexKey("mail", "43")); err == nil {
		t.Error("index entry written for an id that is the task's job id")
	}
	if job, err := st.Lookup("mail", "43"); err != nil || job != 43 {
		t.Errorf(`Lookup("mail", "43") = %d, %v; want 43`, job, err)
	}
	if _, err := st.Lookup("other", "43"); err != store.ErrNotFound {
		t.Errorf(`Lookup("other", "43") = %v; want ErrNotFound`, err)
	}
}

// TestLayout_ErasModel puts tasks of three queues with job ids scattered
// over many eras (runs of neighbours, and jumps of up to a few eras),
// deletes some, and checks List pages from random cursors, Recover and
// NextJobID against a plain model: the per-era seeks of List and Recover
// must neither skip nor repeat a task.
func TestLayout_ErasModel(t *testing.T) {
	st := open(t, filepath.Join(t.TempDir(), "db"))
	defer st.Close()
	r := rand.New(rand.NewPCG(7, 11))
	queues := []string{"a", "b", "bb"}
	model := map[string][]uint64{}
	var all []uint64
	ids, queueOf := map[uint64]string{}, map[uint64]string{}
	job := uint64(0)
	var b store.Batch
	for range 3000 {
		if r.IntN(10) == 0 {
			job += uint64(r.IntN(3 * 4096))
		}
		job++
		q := queues[r.IntN(len(queues))]
		if q == "bb" && r.IntN(4) != 0 {
			q = "a" // "bb" stays rare: many eras have none
		}
		id := strconv.FormatUint(job, 10)
		if r.IntN(5) == 0 {
			id = "x" + id
		}
		b.Put(store.Task{JobID: job, Queue: q, ID: id, State: store.Waiting, Payload: []byte(id)})
		model[q] = append(model[q], job)
		ids[job], queueOf[job] = id, q
		all = append(all, job)
	}
	if err := st.Commit(&b); err != nil {
		t.Fatal(err)
	}
	// Delete every seventh task.
	b = store.Batch{}
	for q, jobs := range model {
		var kept []uint64
		for i, j := range jobs {
			if i%7 == 3 {
				b.Delete(store.Task{JobID: j, Queue: q, ID: ids[j]})
				all = slices.DeleteFunc(all, func(x uint64) bool { return x == j })
				continue
			}
			kept = append(kept, j)
		}
		model[q] = kept
	}
	if err := st.Commit(&b); err != nil {
		t.Fatal(err)
	}
	if err := st.Flush(); err != nil {
		t.Fatal(err)
	}
	for range 300 {
		q := queues[r.IntN(len(queues))]
		after := uint64(r.IntN(int(job) + 2))
		limit := 1 + r.IntN(50)
		var want []uint64
		for _, j := range model[q] {
			if j > after && len(want) < limit {
				want = append(want, j)
			}
		}
		page, err := st.List(q, after, limit)
		var got []uint64
		for _, tk := range page {
			got = append(got, tk.JobID)
		}
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("List(%q, %d, %d) = %v, %v; want %v", q, after, limit, got, err, want)
		}
	}
	var got []uint64
	if err := st.Recover(func(tk store.Task) error { got = append(got, tk.JobID); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, all) {
		t.Fatalf("Recover: %d tasks, want %d", len(got), len(all))
	}
	if n, _ := st.NextJobID(); n != job+1 {
		t.Errorf("NextJobID() = %d, want %d", n, job+1)
	}
	for j, id := range ids {
		q, live := queueOf[j], slices.Contains(model[queueOf[j]], j)
		got, err := st.Lookup(q, id)
		if !live && err != store.ErrNotFound {
			t.Fatalf("Lookup of deleted task %d (id %q) = %d, %v", j, id, got, err)
		}
		if live && (err != nil || got != j) {
			t.Fatalf("Lookup(%q, %q) = %d, %v; want %d", q, id, got, err, j)
		}
	}
}
