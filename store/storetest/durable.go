package storetest

import (
	"bytes"
	"testing"

	"github.com/hourglass-go/hourglass/store"
)

// closeStore closes st and fails the test on an error.
func closeStore(t *testing.T, st store.Store) {
	t.Helper()
	if err := st.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// testReopen: everything committed is there after Close and Open, twice:
// tasks with payloads (one of 1 MiB) and last errors, updates, deletes,
// the index, the lists, schedules, queue records and NextJobID; and the
// reopened store takes commits.
func testReopen(t *testing.T, reopen func() store.Store) {
	st := reopen()
	a := sample(1, "q", "a")
	b := sample(2, "q", "b")
	b.Payload = bytes.Repeat([]byte{0, 1, 2, 0xff}, 1<<18) // 1 MiB
	c := sample(3, "r", "c")
	d := sample(4, "r", "d")
	commit(t, st, put(a), put(b), put(c), put(d))
	ra := reserved(a, "lease-a")
	ra.LastError = "a last error kept across reopens ✓"
	commit(t, st, update(ra), del(c))
	var sb store.Batch
	sb.PutSchedule(schedule("s1", 1))
	sb.PutSchedule(schedule("s2", 2))
	q1, q2 := queueRecord("q", 1), queueRecord("r", 2)
	q2.Policy.Retry = nil
	sb.PutQueue(q1)
	sb.PutQueue(queueRecord("gone", 3))
	sb.PutQueue(q2)
	sb.DeleteQueue("gone")
	sb.NextJobID = 1000
	if err := st.Commit(&sb); err != nil {
		t.Fatal(err)
	}
	closeStore(t, st)

	ra.Payload = a.Payload
	check := func(st store.Store) {
		t.Helper()
		checkTask(t, st, ra)
		checkTask(t, st, b)
		checkTask(t, st, d)
		checkGone(t, st, 3)
		checkLookup(t, st, "q", "a", 1)
		checkLookup(t, st, "q", "b", 2)
		checkLookup(t, st, "r", "c", 0)
		checkLookup(t, st, "r", "d", 4)
		if got := listAll(t, st, "r", 10); len(got) != 1 || got[0].JobID != 4 {
			t.Fatalf("List(r) = %v, want [4]", jobs(got))
		}
		checkAll(t, st, ra, b, d)
		checkSchedules(t, st, schedule("s1", 1), schedule("s2", 2))
		checkQueues(t, st, q1, q2)
		checkNext(t, st, 1000)
	}
	for range 2 {
		st = reopen()
		check(st)
		closeStore(t, st)
	}

	st = reopen()
	e := sample(1000, "q", "e")
	q2.Policy.Rate = nil
	q2.PausedUntil = 0
	commit(t, st, put(e), del(d), store.Op{Kind: store.PutQueue, Queue: q2}, store.Op{Kind: store.DeleteQueue, Queue: q1})
	closeStore(t, st)
	st = reopen()
	defer closeStore(t, st)
	checkTask(t, st, e)
	checkGone(t, st, 4)
	checkNext(t, st, 1001)
	checkQueues(t, st, q2)
}

// testNextJobIDPersisted: the high-water mark survives a reopen when the
// task that raised it was deleted: job ids are never given twice.
func testNextJobIDPersisted(t *testing.T, reopen func() store.Store) {
	st := reopen()
	checkNext(t, st, 1)
	task := sample(10, "q", "x")
	commit(t, st, put(task))
	commit(t, st, del(task))
	checkNext(t, st, 11)
	closeStore(t, st)

	st = reopen()
	checkNext(t, st, 11)
	checkAll(t, st)
	if err := st.Commit(&store.Batch{NextJobID: 20}); err != nil {
		t.Fatal(err)
	}
	closeStore(t, st)

	st = reopen()
	defer closeStore(t, st)
	checkNext(t, st, 20)
}

// testCloseIdempotent: a second Close returns nil, and methods after Close
// return errors rather than panic.
func testCloseIdempotent(t *testing.T, reopen func() store.Store) {
	st := reopen()
	commit(t, st, put(sample(1, "q", "a")))
	closeStore(t, st)
	if err := st.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := st.Task(1); err == nil {
		t.Fatal("Task after Close: nil error")
	}
	if err := st.Commit(&store.Batch{Ops: []store.Op{put(sample(2, "q", "b"))}}); err == nil {
		t.Fatal("Commit after Close: nil error")
	}
	if _, err := st.Lookup("q", "a"); err == nil {
		t.Fatal("Lookup after Close: nil error")
	}
	if _, err := st.List("q", 0, 10); err == nil {
		t.Fatal("List after Close: nil error")
	}
	if err := st.Recover(func(store.Task) error { return nil }); err == nil {
		t.Fatal("Recover after Close: nil error")
	}
	if _, err := st.Schedules(); err == nil {
		t.Fatal("Schedules after Close: nil error")
	}
	if _, err := st.Queues(); err == nil {
		t.Fatal("Queues after Close: nil error")
	}
	if _, err := st.NextJobID(); err == nil {
		t.Fatal("NextJobID after Close: nil error")
	}
	if _, err := st.Attempts(1); err == nil {
		t.Fatal("Attempts after Close: nil error")
	}
	if _, err := st.LastFinished("q", "a"); err == nil {
		t.Fatal("LastFinished after Close: nil error")
	}
	if _, err := st.History("q", "", 0, 10); err == nil {
		t.Fatal("History after Close: nil error")
	}
	if _, err := st.HistorySeq(); err == nil {
		t.Fatal("HistorySeq after Close: nil error")
	}
	if _, err := st.PruneHistory(1<<62, 10); err == nil {
		t.Fatal("PruneHistory after Close: nil error")
	}
}
