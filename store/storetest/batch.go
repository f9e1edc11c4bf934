package storetest

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/store"
)

// schedule returns a schedule with every field set, its payload binary.
func schedule(name string, v int) store.Schedule {
	return store.Schedule{
		Name:     name,
		Cron:     fmt.Sprintf("*/%d * * * *", v+1),
		Queue:    "q-" + name,
		Timezone: "Europe/Paris",
		Payload:  []byte{0, byte(v), 0xff, 0},
		Created:  time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano(),
		Last:     int64(v) * int64(time.Hour),
		Misfire:  "all", Overlap: "skip", CatchUp: int64(v) * int64(time.Minute),
		Priority: uint32(v), TTR: int64(v) * int64(time.Second), MaxAttempts: v,
		Paused: v%2 == 1, LastRun: int64(v)*int64(time.Hour) + 1, LastID: fmt.Sprintf("%s@run-%d", name, v),
	}
}

// checkSchedules checks that Schedules returns want, which is ordered by
// name.
func checkSchedules(t *testing.T, st store.Store, want ...store.Schedule) {
	t.Helper()
	got, err := st.Schedules()
	if err != nil {
		t.Fatalf("Schedules: %v", err)
	}
	if len(got) != len(want) {
		t.Fatalf("Schedules: %d %+v, want %d %+v", len(got), got, len(want), want)
	}
	for i := range got {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("Schedules[%d]:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
}

// testSchedules: schedules put, replaced and deleted, listed by name.
func testSchedules(t *testing.T, st store.Store) {
	a, b, c := schedule("a", 1), schedule("b", 2), schedule("c", 3)
	var batch store.Batch
	batch.PutSchedule(c)
	batch.PutSchedule(a)
	batch.PutSchedule(b)
	if err := st.Commit(&batch); err != nil {
		t.Fatal(err)
	}
	checkSchedules(t, st, a, b, c)

	b2 := schedule("b", 9)
	b2.Timezone = ""
	b2.Payload = nil
	batch.Reset()
	batch.PutSchedule(b2)
	batch.DeleteSchedule("a")
	batch.DeleteSchedule("never-there")
	if err := st.Commit(&batch); err != nil {
		t.Fatal(err)
	}
	b2.Payload = []byte{} // an empty payload may come back empty or nil
	got, err := st.Schedules()
	if err != nil || len(got) != 2 {
		t.Fatalf("Schedules = %+v, %v; want b and c", got, err)
	}
	if len(got[0].Payload) == 0 {
		got[0].Payload = []byte{}
	}
	if !reflect.DeepEqual(got[0], b2) || !reflect.DeepEqual(got[1], c) {
		t.Fatalf("Schedules =\n %+v\nwant\n %+v", got, []store.Schedule{b2, c})
	}
	// Schedules and tasks are apart: no task appeared.
	checkAll(t, st)
}

// testNextJobID: NextJobID is one above the highest job id ever put or
// the highest Batch.NextJobID committed, never goes down, and counts
// deleted tasks.
func testNextJobID(t *testing.T, st store.Store) {
	checkNext(t, st, 1)
	commit(t, st, put(sample(5, "q", "a")))
	checkNext(t, st, 6)
	if err := st.Commit(&store.Batch{NextJobID: 100}); err != nil {
		t.Fatal(err)
	}
	checkNext(t, st, 100)
	if err := st.Commit(&store.Batch{Ops: []store.Op{put(sample(6, "q", "b"))}, NextJobID: 50}); err != nil {
		t.Fatal(err)
	}
	checkNext(t, st, 100)
	commit(t, st, put(sample(7, "q", "c")))
	checkNext(t, st, 100)
	commit(t, st, del(sample(5, "q", "a")), del(sample(6, "q", "b")), del(sample(7, "q", "c")))
	checkNext(t, st, 100)
	commit(t, st, put(sample(150, "q", "d")), del(sample(150, "q", "d")))
	checkNext(t, st, 151)
	if err := st.Commit(&store.Batch{NextJobID: 151}); err != nil {
		t.Fatal(err)
	}
	checkNext(t, st, 151)
	checkAll(t, st)
}

// testBatchLaterWins: writes apply in order, a later write of the same
// task, schedule or queue record wins, and a later op sees what earlier ops of its batch
// did.
func testBatchLaterWins(t *testing.T, st store.Store) {
	old := sample(3, "q", "z")
	commit(t, st, put(old))

	a := sample(1, "q", "a")
	b := sample(1, "r", "b") // job 1 again, moved and with a new payload
	b.Payload = payloadOf(1, 1)
	gone := sample(2, "q", "gone")
	heir := sample(4, "q", "z") // old's id, freed earlier in the batch
	var batch store.Batch
	batch.Put(a)
	batch.Update(reserved(a, "l"))
	batch.Put(b)
	batch.Put(gone)
	batch.Delete(gone)
	batch.Delete(old)
	batch.Put(heir)
	batch.PutSchedule(schedule("s", 1))
	batch.PutSchedule(schedule("s", 2))
	batch.PutSchedule(schedule("t", 1))
	batch.DeleteSchedule("t")
	batch.PutQueue(queueRecord("q", 1))
	batch.PutQueue(queueRecord("q", 2))
	batch.PutQueue(queueRecord("r", 1))
	batch.DeleteQueue("r")
	batch.DeleteQueue("s")
	batch.PutQueue(queueRecord("s", 3))
	if err := st.Commit(&batch); err != nil {
		t.Fatal(err)
	}
	checkTask(t, st, b)
	checkLookup(t, st, "q", "a", 0)
	checkLookup(t, st, "r", "b", 1)
	checkGone(t, st, 2)
	checkLookup(t, st, "q", "gone", 0)
	checkGone(t, st, 3)
	checkTask(t, st, heir)
	checkLookup(t, st, "q", "z", 4)
	checkAll(t, st, b, heir)
	if got := listAll(t, st, "q", 10); len(got) != 1 || got[0].JobID != 4 {
		t.Fatalf("List(q) = %v, want [4]", jobs(got))
	}
	checkSchedules(t, st, schedule("s", 2))
	checkQueues(t, st, queueRecord("q", 2), queueRecord("s", 3))
	checkNext(t, st, 5)
}

// testBatchAtomic: a batch with a failing op changes nothing, not even
// the writes before that op, nor NextJobID; the store goes on working.
func testBatchAtomic(t *testing.T, st store.Store) {
	a := sample(1, "q", "a")
	kept := queueRecord("q", 1)
	commit(t, st, put(a), store.Op{Kind: store.PutQueue, Queue: kept})

	var batch store.Batch
	batch.Put(sample(2, "q", "b"))
	batch.Update(reserved(a, "l"))
	batch.Delete(a)
	batch.PutSchedule(schedule("s", 1))
	batch.PutQueue(queueRecord("q", 2))
	batch.DeleteQueue("q")
	batch.PutQueue(queueRecord("r", 1))
	batch.Put(sample(3, "q", "c"))
	batch.Ops = append(batch.Ops, store.Op{Kind: 99}) // fails: no such kind
	batch.NextJobID = 1000
	if err := st.Commit(&batch); err == nil {
		t.Fatal("Commit of a batch with an op of unknown kind: nil error")
	}
	checkTask(t, st, a)
	checkLookup(t, st, "q", "a", 1)
	checkGone(t, st, 2)
	checkGone(t, st, 3)
	checkLookup(t, st, "q", "b", 0)
	checkSchedules(t, st)
	checkQueues(t, st, kept)
	checkAll(t, st, a)
	checkNext(t, st, 2)

	c := sample(2, "q", "c")
	commit(t, st, put(c))
	checkAll(t, st, a, c)
}

// testEmptyBatch: an empty batch is a no-op, whether new, zero or reset.
func testEmptyBatch(t *testing.T, st store.Store) {
	a := sample(1, "q", "a")
	commit(t, st, put(a))
	if err := st.Commit(&store.Batch{}); err != nil {
		t.Fatalf("Commit(empty): %v", err)
	}
	var b store.Batch
	b.Put(sample(2, "q", "b"))
	b.NextJobID = 10
	b.Reset()
	if b.Len() != 0 {
		t.Fatalf("Len after Reset = %d", b.Len())
	}
	if err := st.Commit(&b); err != nil {
		t.Fatalf("Commit(reset): %v", err)
	}
	if err := st.Commit(&store.Batch{Ops: []store.Op{}}); err != nil {
		t.Fatalf("Commit(no ops): %v", err)
	}
	checkAll(t, st, a)
	checkTask(t, st, a)
	checkNext(t, st, 2)
}
