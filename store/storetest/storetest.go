// Package storetest is the conformance suite of [store.Store]: one set of
// tests that every implementation (the Pebble store, a database store)
// must pass. An implementation's test file runs it over a constructor:
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store { ... a new, empty store ... })
//		storetest.RunDurable(t, func(t *testing.T, dir string) store.Store { ... the store kept in dir ... })
//	}
//
// The suite knows nothing of how a store keeps its records. Beyond the
// letter of the [store.Store] docs it checks what the broker relies on,
// each case saying so: job ids start at 1; Task and Lookup return
// [store.ErrNotFound] itself, since callers compare with ==; a batch with
// a failing op changes nothing. It does not test what the Store docs
// leave undefined, since the broker never does it: an update that changes
// a task's queue or id or names a task not in the store, a delete that
// names a task not in the store, a put giving a task the (queue, id) of
// another live task.
package storetest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/store"
)

// Run runs the conformance suite over open, which returns a new, empty
// store each time it is called; the suite closes it when the subtest
// ends. Subtests run one after another.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	t.Helper()
	cases := []struct {
		name string
		fn   func(t *testing.T, st store.Store)
	}{
		{"PutAndRead", testPutAndRead},
		{"NotFound", testNotFound},
		{"List", testList},
		{"Recover", testRecover},
		{"Records", testRecords},
		{"UpdateKeepsPayload", testUpdateKeepsPayload},
		{"PutReplaces", testPutReplaces},
		{"Delete", testDelete},
		{"LastError", testLastError},
		{"Trace", testTrace},
		{"Key", testKey},
		{"Schedules", testSchedules},
		{"Queues", testQueues},
		{"QueuesCopied", testQueuesCopied},
		{"QueuesPush", testQueuesPush},
		{"QueuesBucket", testQueuesBucket},
		{"Reserved", testReserved},
		{"Attempts", testAttempts},
		{"LastFinished", testLastFinished},
		{"History", testHistory},
		{"HistorySeq", testHistorySeq},
		{"PruneHistory", testPruneHistory},
		{"HistoryAtomic", testHistoryAtomic},
		{"Deduped", testDeduped},
		{"NextJobID", testNextJobID},
		{"BatchLaterWins", testBatchLaterWins},
		{"BatchAtomic", testBatchAtomic},
		{"EmptyBatch", testEmptyBatch},
		{"LargePayload", testLargePayload},
		{"BinaryPayload", testBinaryPayload},
		{"ConcurrentReads", testConcurrentReads},
		{"ConcurrentCommits", testConcurrentCommits},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := open(t)
			t.Cleanup(func() {
				if err := st.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			c.fn(t, st)
		})
	}
}

// RunDurable runs the cases that close a store and open it again. open
// returns the store kept in dir (a directory, or whatever names a store's
// place for the implementation): new and empty for a dir not used
// before, the same contents for a dir used before. The suite closes every
// store it opens.
func RunDurable(t *testing.T, open func(t *testing.T, dir string) store.Store) {
	t.Helper()
	cases := []struct {
		name string
		fn   func(t *testing.T, reopen func() store.Store)
	}{
		{"Reopen", testReopen},
		{"NextJobIDPersisted", testNextJobIDPersisted},
		{"HistoryPersisted", testHistoryPersisted},
		{"CloseIdempotent", testCloseIdempotent},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			c.fn(t, func() store.Store { return open(t, dir) })
		})
	}
}

// sample returns a task with every field set, derived from job, in queue
// with id (a last error for odd job ids), and a payload that tells job
// and version apart.
func sample(job uint64, queue, id string) store.Task {
	return store.Task{
		JobID:       job,
		Queue:       queue,
		ID:          id,
		State:       store.Waiting,
		Priority:    uint32(job * 7),
		Due:         time.Date(2030, 1, 2, 3, 4, 5, int(job), time.UTC).UnixNano(),
		Created:     time.Date(2026, 1, 2, 3, 4, 5, int(job), time.UTC).UnixNano(),
		TTR:         time.Duration(job) * time.Second,
		Attempts:    uint32(job % 3),
		MaxAttempts: 5,
		Timeouts:    uint32(job % 5),
		Releases:    uint32(job % 7),
		Buries:      uint32(job % 11),
		Kicks:       uint32(job % 13),
		LastError:   lastErrorOf(job),
		Payload:     payloadOf(job, 0),
	}
}

// lastErrorOf returns the last error of sample task job: none for even
// job ids, a text that varies with job for odd ones.
func lastErrorOf(job uint64) string {
	if job%2 == 0 {
		return ""
	}
	return fmt.Sprintf("attempt %d: connection refused ✗", job%5)
}

// payloadOf returns the payload of version v of job: binary, with zero
// bytes, and of a length that varies with job.
func payloadOf(job uint64, v int) []byte {
	n := 16 + int(job%64)
	p := make([]byte, n)
	r := rand.New(rand.NewPCG(job, uint64(v)))
	for i := range p {
		p[i] = byte(r.UintN(256))
	}
	p[0], p[n-1] = 0, 0
	return p
}

// reserved returns t reserved: state, attempts, reservation's start and
// lease changed, with payload, which an update must ignore.
func reserved(t store.Task, lease string) store.Task {
	t.State = store.Reserved
	t.Attempts++
	t.Lease = lease
	t.Reserved = t.Due + 1
	t.LeaseUntil = t.Due + int64(t.TTR)
	t.Payload = []byte("an update must not write this")
	return t
}

// commit commits the ops and fails the test on an error.
func commit(t *testing.T, st store.Store, ops ...store.Op) {
	t.Helper()
	b := &store.Batch{Ops: ops}
	if err := st.Commit(b); err != nil {
		t.Fatalf("Commit(%d ops): %v", len(ops), err)
	}
}

func put(t store.Task) store.Op    { return store.Op{Kind: store.PutTask, Task: t} }
func update(t store.Task) store.Op { return store.Op{Kind: store.UpdateTask, Task: t} }
func del(t store.Task) store.Op    { return store.Op{Kind: store.DeleteTask, Task: t} }

// diff returns what differs between got and want, "" for nothing.
// Payloads are compared when withPayload, else got.Payload must be nil.
func diff(got, want store.Task, withPayload bool) string {
	gp, wp := got.Payload, want.Payload
	got.Payload, want.Payload = nil, nil
	var d string
	if !reflect.DeepEqual(got, want) {
		d = fmt.Sprintf("record\n got %+v\nwant %+v", got, want)
	}
	switch {
	case withPayload && !bytes.Equal(gp, wp):
		d += fmt.Sprintf("; payload: got %d bytes %.32x…, want %d bytes %.32x…", len(gp), gp, len(wp), wp)
	case !withPayload && gp != nil:
		d += fmt.Sprintf("; payload: got %d bytes, want nil (no payloads here)", len(gp))
	}
	return d
}

// checkTask checks that Task(want.JobID) returns want, payload included.
func checkTask(t *testing.T, st store.Store, want store.Task) {
	t.Helper()
	got, err := st.Task(want.JobID)
	if err != nil {
		t.Fatalf("Task(%d): %v", want.JobID, err)
	}
	if d := diff(got, want, true); d != "" {
		t.Fatalf("Task(%d): %s", want.JobID, d)
	}
}

// checkGone checks that task job is not in the store for Task.
func checkGone(t *testing.T, st store.Store, job uint64) {
	t.Helper()
	if got, err := st.Task(job); err != store.ErrNotFound {
		t.Fatalf("Task(%d) = %+v, %v; want ErrNotFound itself", job, got, err)
	}
}

// checkLookup checks that Lookup(queue, id) gives job, or ErrNotFound
// itself for job 0.
func checkLookup(t *testing.T, st store.Store, queue, id string, job uint64) {
	t.Helper()
	got, err := st.Lookup(queue, id)
	if job == 0 {
		if err != store.ErrNotFound {
			t.Fatalf("Lookup(%q, %q) = %d, %v; want ErrNotFound itself", queue, id, got, err)
		}
		return
	}
	if err != nil || got != job {
		t.Fatalf("Lookup(%q, %q) = %d, %v; want %d", queue, id, got, err, job)
	}
}

// all returns every task through Recover, checking job id order.
func all(t *testing.T, st store.Store) []store.Task {
	t.Helper()
	var out []store.Task
	err := st.Recover(func(task store.Task) error {
		if n := len(out); n > 0 && out[n-1].JobID >= task.JobID {
			return fmt.Errorf("st.Recover: job %d after job %d", task.JobID, out[n-1].JobID)
		}
		out = append(out, task)
		return nil
	})
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	return out
}

// checkAll checks that Recover returns exactly want (in job id order,
// without payloads).
func checkAll(t *testing.T, st store.Store, want ...store.Task) {
	t.Helper()
	got := all(t, st)
	if len(got) != len(want) {
		t.Fatalf("Recover: %d tasks %v, want %d %v", len(got), jobs(got), len(want), jobs(want))
	}
	for i := range got {
		if d := diff(got[i], want[i], false); d != "" {
			t.Fatalf("Recover, task %d: %s", i, d)
		}
	}
}

// listAll returns every task of queue through List pages of size page.
func listAll(t *testing.T, st store.Store, queue string, page int) []store.Task {
	t.Helper()
	var out []store.Task
	after := uint64(0)
	for i := 0; ; i++ {
		p, err := st.List(queue, after, page)
		if err != nil {
			t.Fatalf("List(%q, %d, %d): %v", queue, after, page, err)
		}
		if len(p) > page {
			t.Fatalf("List(%q, %d, %d): %d tasks", queue, after, page, len(p))
		}
		for _, task := range p {
			if task.JobID <= after {
				t.Fatalf("List(%q, %d, %d): job %d out of order", queue, after, page, task.JobID)
			}
			after = task.JobID
		}
		out = append(out, p...)
		if len(p) < page {
			return out
		}
		if i > 1e6 {
			t.Fatalf("List(%q): no end", queue)
		}
	}
}

// jobs returns the job ids of tasks.
func jobs(tasks []store.Task) []uint64 {
	out := make([]uint64, len(tasks))
	for i, t := range tasks {
		out[i] = t.JobID
	}
	return out
}

// checkNext checks NextJobID.
func checkNext(t *testing.T, st store.Store, want uint64) {
	t.Helper()
	if got, err := st.NextJobID(); err != nil || got != want {
		t.Fatalf("NextJobID() = %d, %v; want %d", got, err, want)
	}
}
