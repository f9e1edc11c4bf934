package storetest

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/hourglass-go/hourglass/store"
	"github.com/hourglass-go/hourglass/task"
)

// testPutAndRead: tasks put are read back whole by Task, Lookup, List and
// Recover.
func testPutAndRead(t *testing.T, st store.Store) {
	a := sample(1, "mail", "welcome-1")
	b := reserved(sample(2, "mail", "welcome-2"), "lease-token-2")
	b.Payload = payloadOf(2, 0)
	c := sample(3, "sms", "welcome-1") // same id, other queue
	c.State = store.Dead
	commit(t, st, put(a), put(b), put(c))

	for _, want := range []store.Task{a, b, c} {
		checkTask(t, st, want)
		checkLookup(t, st, want.Queue, want.ID, want.JobID)
	}
	checkAll(t, st, a, b, c)
	got := listAll(t, st, "mail", 10)
	if len(got) != 2 || diff(got[0], a, false) != "" || diff(got[1], b, false) != "" {
		t.Fatalf("List(mail) = %+v, want jobs 1 and 2 without payloads", got)
	}
	checkNext(t, st, 4)
}

// testNotFound: what an empty store and missing keys return. Task and
// Lookup return ErrNotFound itself: the broker compares with ==.
func testNotFound(t *testing.T, st store.Store) {
	checkGone(t, st, 1)
	checkLookup(t, st, "mail", "x", 0)
	if l, err := st.List("mail", 0, 10); err != nil || len(l) != 0 {
		t.Fatalf("List on an empty store = %v, %v", l, err)
	}
	checkAll(t, st)
	if s, err := st.Schedules(); err != nil || len(s) != 0 {
		t.Fatalf("Schedules on an empty store = %v, %v", s, err)
	}
	if q, err := st.Queues(); err != nil || len(q) != 0 {
		t.Fatalf("Queues on an empty store = %v, %v", q, err)
	}
	checkNext(t, st, 1) // job ids start at 1

	commit(t, st, put(sample(1, "a", "x")))
	checkGone(t, st, 2)
	checkGone(t, st, 0)
	checkGone(t, st, ^uint64(0))
	checkLookup(t, st, "a", "y", 0)
	checkLookup(t, st, "b", "x", 0)
	checkLookup(t, st, "a", "", 0)
	checkLookup(t, st, "", "x", 0)
}

// testList: paging through a queue returns its tasks in job id order,
// without payloads, and none of another queue, even one whose name
// extends this one's.
func testList(t *testing.T, st store.Store) {
	queues := []string{"a", "ab", "a.b", "b", "a-"}
	want := make(map[string][]store.Task)
	var ops []store.Op
	for job := uint64(1); job <= 60; job++ {
		q := queues[job%uint64(len(queues))]
		task := sample(job, q, "id")
		task.ID = "t" + string(rune('0'+job%10)) + string(rune('a'+job/10))
		want[q] = append(want[q], task)
		ops = append(ops, put(task))
	}
	// Put in a shuffled order: the order of List is the job id order, not
	// the order of writes.
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(ops), func(i, j int) { ops[i], ops[j] = ops[j], ops[i] })
	commit(t, st, ops...)

	for _, q := range queues {
		for _, page := range []int{1, 5, 12, 100} {
			got := listAll(t, st, q, page)
			if len(got) != len(want[q]) {
				t.Fatalf("List(%q) by %d: %v, want %v", q, page, jobs(got), jobs(want[q]))
			}
			for i := range got {
				if d := diff(got[i], want[q][i], false); d != "" {
					t.Fatalf("List(%q) by %d, task %d: %s", q, page, i, d)
				}
			}
		}
	}
	// A page starting inside the queue, between its job ids.
	w := want["a"]
	got, err := st.List("a", w[2].JobID-1, 2)
	if err != nil || len(got) != 2 || got[0].JobID != w[2].JobID || got[1].JobID != w[3].JobID {
		t.Fatalf("List(a, %d, 2) = %v, %v; want jobs %d, %d", w[2].JobID-1, jobs(got), err, w[2].JobID, w[3].JobID)
	}
	for _, c := range []struct {
		queue string
		after uint64
		limit int
	}{
		{"a", 0, 0},
		{"a", w[len(w)-1].JobID, 10},
		{"a", ^uint64(0), 10},
		{"c", 0, 10},
		{"", 0, 10},
	} {
		if got, err := st.List(c.queue, c.after, c.limit); err != nil || len(got) != 0 {
			t.Fatalf("List(%q, %d, %d) = %v, %v; want none", c.queue, c.after, c.limit, jobs(got), err)
		}
	}
}

// testRecover: Recover calls fn in job id order whatever the order of
// writes, without payloads, and stops at fn's first error.
func testRecover(t *testing.T, st store.Store) {
	var want []store.Task
	var ops []store.Op
	for job := uint64(1); job <= 50; job++ {
		task := sample(job, []string{"x", "y", "z"}[job%3], "id")
		task.ID = string(rune('A' + job))
		if job%4 == 0 {
			task = reserved(task, "lease")
			task.Payload = payloadOf(job, 0)
		}
		want = append(want, task)
		ops = append(ops, put(task))
	}
	rand.New(rand.NewPCG(3, 4)).Shuffle(len(ops), func(i, j int) { ops[i], ops[j] = ops[j], ops[i] })
	commit(t, st, ops[:20]...)
	commit(t, st, ops[20:]...)
	checkAll(t, st, want...)

	stop := errors.New("stop here")
	calls := 0
	err := st.Recover(func(store.Task) error {
		calls++
		if calls == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || calls != 3 {
		t.Fatalf("Recover with fn failing on call 3: %v after %d calls; want fn's error after 3", err, calls)
	}
}

// testUpdateKeepsPayload: an update writes the record and leaves the
// stored payload, whatever Payload the op carries.
func testUpdateKeepsPayload(t *testing.T, st store.Store) {
	a := sample(1, "q", "a")
	commit(t, st, put(a))

	r := reserved(a, "tok")
	commit(t, st, update(r))
	want := r
	want.Payload = a.Payload
	checkTask(t, st, want)
	checkAll(t, st, want)

	w := r
	w.State, w.Lease, w.LeaseUntil, w.Releases, w.Payload = store.Waiting, "", 0, r.Releases+1, nil
	commit(t, st, update(w))
	want = w
	want.Payload = a.Payload
	checkTask(t, st, want)
	checkLookup(t, st, "q", "a", 1)
}

// testPutReplaces: a put of an existing job id replaces record, payload
// and index, and removes the old index and list entries.
func testPutReplaces(t *testing.T, st store.Store) {
	a := sample(5, "q", "x")
	commit(t, st, put(a))

	same := a
	same.Payload = payloadOf(5, 1)
	same.Priority = 1
	commit(t, st, put(same))
	checkTask(t, st, same)
	checkLookup(t, st, "q", "x", 5)

	moved := sample(5, "r", "y")
	moved.Payload = payloadOf(5, 2)
	commit(t, st, put(moved))
	checkTask(t, st, moved)
	checkLookup(t, st, "q", "x", 0)
	checkLookup(t, st, "r", "y", 5)
	if got := listAll(t, st, "q", 10); len(got) != 0 {
		t.Fatalf("List(q) after moving job 5 = %v, want none", jobs(got))
	}
	checkAll(t, st, moved)
}

// testDelete: a delete removes the task from Task, Lookup, List and
// Recover, frees its (queue, id) for a new task, and a delete of a task
// not in the store is a no-op.
func testDelete(t *testing.T, st store.Store) {
	a := sample(1, "q", "x")
	b := sample(2, "q", "y")
	commit(t, st, put(a), put(b))
	commit(t, st, del(a))
	checkGone(t, st, 1)
	checkLookup(t, st, "q", "x", 0)
	checkAll(t, st, b)
	if got := listAll(t, st, "q", 10); len(got) != 1 || got[0].JobID != 2 {
		t.Fatalf("List(q) after deleting job 1 = %v, want [2]", jobs(got))
	}

	c := sample(3, "q", "x")
	commit(t, st, put(c))
	checkLookup(t, st, "q", "x", 3)
	checkTask(t, st, c)

	commit(t, st, del(b), del(c))
	checkAll(t, st)
	checkLookup(t, st, "q", "y", 0)
	checkLookup(t, st, "q", "x", 0)
	checkNext(t, st, 4) // deleted job ids are never given again
}

// testLargePayload: a 1 MiB payload (the broker's default limit) is kept
// whole, and List and Recover do not return it.
func testLargePayload(t *testing.T, st store.Store) {
	big := sample(1, "q", "big")
	big.Payload = make([]byte, 1<<20)
	r := rand.New(rand.NewPCG(5, 6))
	for i := range big.Payload {
		big.Payload[i] = byte(r.UintN(256))
	}
	small := sample(2, "q", "small")
	commit(t, st, put(big), put(small))
	checkTask(t, st, big)
	checkTask(t, st, small)
	checkAll(t, st, big, small)
	if got := listAll(t, st, "q", 10); len(got) != 2 || got[0].Payload != nil {
		t.Fatalf("List(q) = %d tasks, first payload %d bytes; want 2 tasks, no payloads", len(got), len(got[0].Payload))
	}
	commit(t, st, update(reserved(big, "l")))
	got, err := st.Task(1)
	if err != nil || !bytes.Equal(got.Payload, big.Payload) {
		t.Fatalf("Task(1) after an update: %d bytes, %v; want the 1 MiB payload", len(got.Payload), err)
	}
}

// testBinaryPayload: payloads are bytes, not text: every byte value, zero
// bytes at both ends, and the empty payload come back as put. Ids and
// queue names are not limited to ASCII.
func testBinaryPayload(t *testing.T, st store.Store) {
	all := make([]byte, 0, 258)
	all = append(all, 0)
	for i := range 256 {
		all = append(all, byte(i))
	}
	all = append(all, 0)
	a := sample(1, "q", "bin")
	a.Payload = all
	z := sample(2, "q", "zeros")
	z.Payload = make([]byte, 1000)
	e := sample(3, "q", "empty")
	e.Payload = nil
	u := sample(4, "file d'attente ü", "id with spaces / and ü ✓")
	u.Lease = "lease ✓"
	commit(t, st, put(a), put(z), put(e), put(u))
	checkTask(t, st, a)
	checkTask(t, st, z)
	got, err := st.Task(3)
	if err != nil || len(got.Payload) != 0 {
		t.Fatalf("Task(3) with an empty payload = %d bytes, %v", len(got.Payload), err)
	}
	checkTask(t, st, u)
	checkLookup(t, st, u.Queue, u.ID, 4)
}

// testLastError: a task's last error is kept by puts and updates and read
// back by Task, List and Recover: set by a failed attempt (an update, the
// payload untouched), replaced, cleared, as long as task.MaxErrorLen
// allows and in any UTF-8; and a put replaces it like every field.
func testLastError(t *testing.T, st store.Store) {
	a := sample(1, "q", "a")
	a.LastError = ""
	b := sample(2, "q", "b")
	b.LastError = "put with an error: a task moved from another queue"
	commit(t, st, put(a), put(b))
	checkTask(t, st, a)
	checkTask(t, st, b)

	// A nack: reserved, then waiting again with the worker's error.
	failed := reserved(a, "lease-1")
	failed.State, failed.Lease, failed.LeaseUntil = store.Waiting, "", 0
	failed.LastError = "smtp: 421 4.7.0 try again later"
	commit(t, st, update(failed))
	failed.Payload = a.Payload
	checkTask(t, st, failed)
	checkAll(t, st, failed, b)
	if got := listAll(t, st, "q", 1); len(got) != 2 || diff(got[0], failed, false) != "" {
		t.Fatalf("List(q) = %+v; want job 1 with its last error first", got)
	}

	// The longest error a nack keeps, in multi-byte UTF-8, then dead with
	// it; b's error cleared.
	long := strings.Repeat("é✓", task.MaxErrorLen/5) + "!" // 819 × 5 + 1 bytes
	if len(long) != task.MaxErrorLen {
		t.Fatalf("the long error is %d bytes, want %d", len(long), task.MaxErrorLen)
	}
	dead := failed
	dead.State, dead.LastError = store.Dead, long
	b2 := b
	b2.LastError = ""
	commit(t, st, update(dead), update(b2))
	checkTask(t, st, dead)
	b2.Payload = b.Payload
	checkTask(t, st, b2)
	checkAll(t, st, dead, b2)

	// A later write in one batch wins; a put replaces the error too.
	x, y := dead, dead
	x.LastError, y.LastError = "first", "second"
	again := sample(2, "q", "b")
	again.LastError = "put again"
	commit(t, st, update(x), update(y), put(again))
	checkTask(t, st, y)
	checkTask(t, st, again)
	if got := listAll(t, st, "q", 10); len(got) != 2 || got[0].LastError != "second" || got[1].LastError != "put again" {
		t.Fatalf("List(q) = %+v; want last errors %q and %q", got, "second", "put again")
	}
}

// testTrace: a task's trace context is kept by puts and updates and read
// back by Task, List and Recover; a task without one reads back without.
func testTrace(t *testing.T, st store.Store) {
	a := sample(1, "q", "a")
	a.TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	a.TraceState = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
	b := sample(2, "q", "b")
	c := sample(3, "q", "c")
	c.TraceParent = a.TraceParent
	commit(t, st, put(a), put(b), put(c))
	checkTask(t, st, a)
	checkTask(t, st, b)
	checkTask(t, st, c)
	checkAll(t, st, a, b, c)

	// A reservation, then a nack: an update keeps the trace.
	r := reserved(a, "lease-1")
	commit(t, st, update(r))
	r.Payload = a.Payload
	checkTask(t, st, r)
	failed := r
	failed.State, failed.Lease, failed.LeaseUntil, failed.LastError = store.Waiting, "", 0, "boom"
	commit(t, st, update(failed))
	checkTask(t, st, failed)
	checkAll(t, st, failed, b, c)
}

// testKey: a task's key is kept by puts and updates and read back by
// Task, List and Recover, with a trace context and without; a task
// without one reads back without.
func testKey(t *testing.T, st store.Store) {
	a := sample(1, "q", "a")
	a.Key = "tenant-42"
	b := sample(2, "q", "b")
	c := sample(3, "q", "c")
	c.Key = "~!@#$%^&*()"
	c.TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	commit(t, st, put(a), put(b), put(c))
	checkTask(t, st, a)
	checkTask(t, st, b)
	checkTask(t, st, c)
	checkAll(t, st, a, b, c)

	r := reserved(a, "lease-1")
	commit(t, st, update(r))
	r.Payload = a.Payload
	checkTask(t, st, r)
	checkAll(t, st, r, b, c)
}

// testReserved: a reservation's start reads back as written through Task,
// List and Recover, in a put and in an update, at the bounds of int64
// too; an update back to waiting with 0 clears it.
func testReserved(t *testing.T, st store.Store) {
	a := reserved(sample(1, "q", "a"), "lease-a")
	a.Payload = payloadOf(1, 0)
	b := sample(2, "q", "b")
	b.State, b.Reserved, b.Lease = store.Reserved, math.MaxInt64, "lease-b"
	c := sample(3, "q", "c")
	c.State, c.Reserved, c.Lease = store.Reserved, math.MinInt64, "lease-c"
	commit(t, st, put(a), put(b), put(c))
	checkTask(t, st, a)
	checkTask(t, st, b)
	checkTask(t, st, c)
	checkAll(t, st, a, b, c)

	// A release: waiting again, no reservation; and a new reservation.
	a2 := a
	a2.State, a2.Lease, a2.LeaseUntil, a2.Reserved = store.Waiting, "", 0, 0
	b2 := reserved(b, "lease-b2")
	b2.Reserved = 1
	commit(t, st, update(a2), update(b2))
	b2.Payload = b.Payload
	checkTask(t, st, a2)
	checkTask(t, st, b2)
	checkAll(t, st, a2, b2, c)
	got := listAll(t, st, "q", 2)
	if len(got) != 3 || got[0].Reserved != 0 || got[1].Reserved != 1 || got[2].Reserved != math.MinInt64 {
		t.Fatalf("List(q) = %+v; want reservations' starts 0, 1 and MinInt64", got)
	}
}

// testRecords: Records reads the records of the jobs asked for, in that
// order, without payloads, updates included; a job deleted or never put
// answers JobID 0, and the others are still read.
func testRecords(t *testing.T, st store.Store) {
	a := sample(1, "mail", "a")
	b := sample(2, "mail", "b")
	c := sample(3, "sms", "c")
	commit(t, st, put(a), put(b), put(c))
	b.LastError = "timeout"
	b.Due += 5
	commit(t, st, update(b), del(c))
	got, err := st.Records([]uint64{2, 9, 1, 3, 2})
	if err != nil || len(got) != 5 {
		t.Fatalf("Records = %+v, %v; want 5 answers", got, err)
	}
	for i, want := range []store.Task{b, {}, a, {}, b} {
		if want.JobID == 0 {
			if got[i].JobID != 0 {
				t.Fatalf("Records[%d] = %+v, want JobID 0 (not in the store)", i, got[i])
			}
			continue
		}
		if d := diff(got[i], want, false); d != "" || got[i].Payload != nil {
			t.Fatalf("Records[%d]: %s (payload %q)", i, d, got[i].Payload)
		}
	}
	if got, err := st.Records(nil); err != nil || len(got) != 0 {
		t.Fatalf("Records(nil) = %+v, %v", got, err)
	}
}
