package pebblestore_test

import (
	"fmt"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/hourglass-go/hourglass/store"
)

// TestStore_Tasks checks that Tasks reads what Task reads, for tasks
// across several eras, in job id order, passing over the jobs not in the
// store (never put, deleted), and that it stops at f's first false.
func TestStore_Tasks(t *testing.T) {
	st := open(t, filepath.Join(t.TempDir(), "db"))
	var b store.Batch
	var jobs []uint64
	for job := uint64(1); job < 10_000; job += 7 {
		var p []byte
		if job%3 != 0 {
			p = fmt.Appendf(nil, `"payload of %d"`, job)
		}
		b.Put(store.Task{JobID: job, Queue: "q", ID: fmt.Sprint(job), State: store.Waiting, Due: int64(job), Payload: p})
		jobs = append(jobs, job, job+1) // job+1: never put
	}
	if err := st.Commit(&b); err != nil {
		t.Fatal(err)
	}
	var del store.Batch
	del.Delete(store.Task{JobID: 8, Queue: "q", ID: "8"})
	if err := st.Commit(&del); err != nil {
		t.Fatal(err)
	}
	var want []store.Task
	for _, job := range jobs {
		if task, err := st.Task(job); err == nil {
			want = append(want, task)
		}
	}
	var got []store.Task
	if err := st.Tasks(jobs, func(task store.Task) bool {
		got = append(got, task)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || len(got) < 1000 {
		t.Fatalf("Tasks read %d tasks, Task %d", len(got), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("Tasks read %+v, Task %+v", got[i], want[i])
		}
	}
	n := 0
	if err := st.Tasks(jobs, func(store.Task) bool { n++; return n < 3 }); err != nil || n != 3 {
		t.Errorf("Tasks stopping at the third: %d calls, %v", n, err)
	}
}
