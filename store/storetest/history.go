package storetest

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/store"
	"github.com/hourglass-go/hourglass/task"
)

// histTime is the time of the history's samples: base plus i seconds.
func histTime(i int) int64 {
	return time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC).Add(time.Duration(i) * time.Second).UnixNano()
}

// attempt returns attempt n of job, its fields derived from both: an
// error for even n, a status and a node for odd ones.
func attempt(job uint64, n uint32) store.Attempt {
	a := store.Attempt{
		JobID:   job,
		N:       n,
		Started: histTime(int(job)*10 + int(n)),
		Ended:   histTime(int(job)*10+int(n)) + int64(n)*int64(time.Millisecond),
		Outcome: task.AttemptNacked,
	}
	if n%2 == 0 {
		a.Error = fmt.Sprintf("attempt %d of %d: connection refused ✗", n, job)
	} else {
		a.Outcome, a.Status, a.Node = task.AttemptPushFailed, -500-int32(n), "node-ü"
	}
	return a
}

// finished returns the Finished record seq of the task (queue, id), job
// id 100+seq, finished at histTime(at), with outcome.
func finished(seq uint64, queue, id, outcome string, at int) store.Finished {
	f := store.Finished{
		Seq:      seq,
		JobID:    100 + seq,
		Queue:    queue,
		ID:       id,
		Outcome:  outcome,
		Finished: histTime(at),
		Attempts: uint32(seq % 4),
	}
	if outcome == task.FinishedDead {
		f.LastError = fmt.Sprintf("gave up after %d ✗", f.Attempts)
	}
	return f
}

// commitHistory commits a batch of the attempts and Finished records.
func commitHistory(t *testing.T, st store.Store, recs ...any) {
	t.Helper()
	var b store.Batch
	for _, r := range recs {
		switch r := r.(type) {
		case store.Attempt:
			b.PutAttempt(r)
		case store.Finished:
			b.PutFinished(r)
		default:
			t.Fatalf("commitHistory: %T", r)
		}
	}
	if err := st.Commit(&b); err != nil {
		t.Fatalf("Commit(%d history records): %v", len(recs), err)
	}
}

// checkAttempts checks that Attempts(job) returns want.
func checkAttempts(t *testing.T, st store.Store, job uint64, want ...store.Attempt) {
	t.Helper()
	got, err := st.Attempts(job)
	if err != nil {
		t.Fatalf("Attempts(%d): %v", job, err)
	}
	if len(got) != len(want) || (len(want) > 0 && !reflect.DeepEqual(got, want)) {
		t.Fatalf("Attempts(%d):\n got %+v\nwant %+v", job, got, want)
	}
}

// checkLast checks that LastFinished(queue, id) returns want, or
// ErrNotFound itself for a want with Seq 0.
func checkLast(t *testing.T, st store.Store, queue, id string, want store.Finished) {
	t.Helper()
	got, err := st.LastFinished(queue, id)
	if want.Seq == 0 {
		if err != store.ErrNotFound {
			t.Fatalf("LastFinished(%q, %q) = %+v, %v; want ErrNotFound itself", queue, id, got, err)
		}
		return
	}
	if err != nil || got != want {
		t.Fatalf("LastFinished(%q, %q) = %+v, %v;\nwant %+v", queue, id, got, err, want)
	}
}

// checkHistory checks that History returns want, in its order.
func checkHistory(t *testing.T, st store.Store, queue, outcome string, before uint64, limit int, want ...store.Finished) {
	t.Helper()
	got, err := st.History(queue, outcome, before, limit)
	if err != nil {
		t.Fatalf("History(%q, %q, %d, %d): %v", queue, outcome, before, limit, err)
	}
	if len(got) != len(want) || (len(want) > 0 && !reflect.DeepEqual(got, want)) {
		t.Fatalf("History(%q, %q, %d, %d) = seqs %v, want %v\n got %+v\nwant %+v",
			queue, outcome, before, limit, seqs(got), seqs(want), got, want)
	}
}

func seqs(fs []store.Finished) []uint64 {
	out := make([]uint64, len(fs))
	for i, f := range fs {
		out[i] = f.Seq
	}
	return out
}

// checkSeq checks HistorySeq.
func checkSeq(t *testing.T, st store.Store, want uint64) {
	t.Helper()
	if got, err := st.HistorySeq(); err != nil || got != want {
		t.Fatalf("HistorySeq() = %d, %v; want %d", got, err, want)
	}
}

// prune calls PruneHistory and checks how many it removed.
func prune(t *testing.T, st store.Store, before int64, max, want int) {
	t.Helper()
	if n, err := st.PruneHistory(before, max); err != nil || n != want {
		t.Fatalf("PruneHistory(%d, %d) = %d, %v; want %d", before, max, n, err, want)
	}
}

// testAttempts: attempts read back by N whatever order they were put in,
// in one batch or several, a later put of the same job and N replacing
// the earlier; jobs' attempts apart, job ids that differ in any byte
// included; a job with none has none.
func testAttempts(t *testing.T, st store.Store) {
	checkAttempts(t, st, 1)
	a1, a2, a3 := attempt(1, 1), attempt(1, 2), attempt(1, 3)
	commitHistory(t, st, a3, a1)
	commitHistory(t, st, a2)
	checkAttempts(t, st, 1, a1, a2, a3)

	// Replaced, in a later batch and within one (the later write wins).
	r2 := a2
	r2.Outcome, r2.Error = task.AttemptExpired, task.LeaseExpired
	x, y := a3, a3
	x.Node, y.Node = "first", "second"
	commitHistory(t, st, r2, x, y)
	checkAttempts(t, st, 1, a1, r2, y)

	// Jobs apart: neighbours, one 256 above, the largest job id, and N
	// across its bytes.
	big := attempt(^uint64(0), 1<<24+1)
	commitHistory(t, st, attempt(2, 1), attempt(257, 1), attempt(257, 256), big, attempt(0x0100000000000001, 1))
	checkAttempts(t, st, 1, a1, r2, y)
	checkAttempts(t, st, 2, attempt(2, 1))
	checkAttempts(t, st, 257, attempt(257, 1), attempt(257, 256))
	checkAttempts(t, st, ^uint64(0), big)
	checkAttempts(t, st, 0x0100000000000001, attempt(0x0100000000000001, 1))
	checkAttempts(t, st, 3)
	checkAttempts(t, st, 256)

	// Attempts are apart from tasks: a task of job 2 put and deleted
	// leaves its attempts.
	commit(t, st, put(sample(2, "q", "a")))
	commit(t, st, del(sample(2, "q", "a")))
	checkAttempts(t, st, 2, attempt(2, 1))

	// DeleteAttempt removes one attempt, of its job alone; in the batch
	// that writes the next (as the broker bounds a task's records); of
	// one not recorded, nothing.
	var b store.Batch
	b.PutAttempt(attempt(257, 257))
	b.DeleteAttempt(257, 1)
	b.DeleteAttempt(257, 9)
	commit(t, st, b.Ops...)
	checkAttempts(t, st, 257, attempt(257, 256), attempt(257, 257))
	checkAttempts(t, st, 1, a1, r2, y)
	checkAll(t, st)
}

// testLastFinished: ErrNotFound itself before any record; the record of
// a task put last wins (a later batch, and a later op of one batch); the
// keys (queue, id) are apart however the two strings split.
func testLastFinished(t *testing.T, st store.Store) {
	checkLast(t, st, "q", "a", store.Finished{})
	f1 := finished(1, "q", "a", task.FinishedDead, 1)
	commitHistory(t, st, f1)
	checkLast(t, st, "q", "a", f1)

	// The task came back and finished again.
	f2 := finished(2, "q", "a", task.FinishedAcked, 2)
	commitHistory(t, st, f2)
	checkLast(t, st, "q", "a", f2)
	f3, f4 := finished(3, "q", "a", task.FinishedDeleted, 3), finished(4, "q", "a", task.FinishedAcked, 4)
	commitHistory(t, st, f3, f4)
	checkLast(t, st, "q", "a", f4)

	// Apart: ("q", "ab"), ("qa", "b"), ("q", "") and ("", "qa").
	g := []store.Finished{
		finished(5, "q", "ab", task.FinishedAcked, 5),
		finished(6, "qa", "b", task.FinishedDead, 6),
		finished(7, "q", "", task.FinishedAcked, 7),
		finished(8, "", "qa", task.FinishedDeleted, 8),
	}
	commitHistory(t, st, g[0], g[1], g[2], g[3])
	checkLast(t, st, "q", "a", f4)
	checkLast(t, st, "q", "ab", g[0])
	checkLast(t, st, "qa", "b", g[1])
	checkLast(t, st, "q", "", g[2])
	checkLast(t, st, "", "qa", g[3])
	checkLast(t, st, "qa", "", store.Finished{})
	checkLast(t, st, "q", "b", store.Finished{})
	// Nothing of the history is a task.
	checkLookup(t, st, "q", "a", 0)
	checkAll(t, st)
}

// testHistory: a queue's records newest first (by Seq, not by time or by
// order of the puts), the outcome filter, pages by before (0 and values
// between, below and above the Seqs), limits, queues apart (names that
// extend others), a queue with none.
func testHistory(t *testing.T, st store.Store) {
	checkHistory(t, st, "q", "", 0, 10)
	outcomes := []string{task.FinishedAcked, task.FinishedDead, task.FinishedAcked, task.FinishedDeleted}
	var q, qa []store.Finished // by Seq
	var recs []any
	for i := range 12 {
		seq := uint64(10 + 3*i) // 10, 13, …, 43: gaps for before to fall in
		f := finished(seq, "q", fmt.Sprint("t", i), outcomes[i%4], 100-i)
		q = append(q, f)
		recs = append(recs, f)
		if i%3 == 0 {
			g := finished(seq+1, "qa", fmt.Sprint("t", i), outcomes[(i+1)%4], i)
			qa = append(qa, g)
			recs = append(recs, g)
		}
	}
	// Put in two batches, the second's Seqs interleaved with the first's
	// order reversed.
	commitHistory(t, st, recs[len(recs)/2:]...)
	commitHistory(t, st, recs[:len(recs)/2]...)

	newest := func(fs []store.Finished, outcome string, before uint64, limit int) []store.Finished {
		var out []store.Finished
		for i := len(fs) - 1; i >= 0 && len(out) < limit; i-- {
			f := fs[i]
			if (before == 0 || f.Seq < before) && (outcome == "" || f.Outcome == outcome) {
				out = append(out, f)
			}
		}
		return out
	}
	for _, outcome := range []string{"", task.FinishedAcked, task.FinishedDead, task.FinishedDeleted, "no such outcome"} {
		for _, before := range []uint64{0, 1, 10, 11, 12, 13, 25, 43, 44, 1 << 40, ^uint64(0)} {
			for _, limit := range []int{0, 1, 2, 5, 100} {
				checkHistory(t, st, "q", outcome, before, limit, newest(q, outcome, before, limit)...)
				checkHistory(t, st, "qa", outcome, before, limit, newest(qa, outcome, before, limit)...)
			}
		}
	}
	checkHistory(t, st, "", "", 0, 100)
	checkHistory(t, st, "qb", "", 0, 100)
	checkHistory(t, st, "Q", "", 0, 100)

	// Paging by the last Seq of each page reads every record once.
	for _, outcome := range []string{"", task.FinishedAcked} {
		var got []store.Finished
		before := uint64(0)
		for {
			page, err := st.History("q", outcome, before, 2)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, page...)
			if len(page) < 2 {
				break
			}
			before = page[len(page)-1].Seq
		}
		if want := newest(q, outcome, 0, 100); !reflect.DeepEqual(got, want) {
			t.Fatalf("History(q, %q) by pages of 2: seqs %v, want %v", outcome, seqs(got), seqs(want))
		}
	}
}

// testHistorySeq: 0 for none; raised by the highest Seq of a batch, never
// lowered by a batch of lower ones; kept when its record is pruned.
func testHistorySeq(t *testing.T, st store.Store) {
	checkSeq(t, st, 0)
	commit(t, st, put(sample(1, "q", "a")))
	commitHistory(t, st, attempt(1, 1))
	checkSeq(t, st, 0)
	commitHistory(t, st, finished(5, "q", "a", task.FinishedAcked, 1), finished(3, "q", "b", task.FinishedAcked, 2))
	checkSeq(t, st, 5)
	commitHistory(t, st, finished(4, "r", "c", task.FinishedDead, 3))
	checkSeq(t, st, 5)
	commitHistory(t, st, finished(1<<40, "r", "d", task.FinishedDeleted, 4))
	checkSeq(t, st, 1<<40)
	prune(t, st, histTime(100), 100, 4)
	checkSeq(t, st, 1<<40)
	checkHistory(t, st, "q", "", 0, 10)
	checkHistory(t, st, "r", "", 0, 10)
	checkNext(t, st, 2)
}

// testPruneHistory: PruneHistory removes the records finished before
// before, oldest first by time (not by Seq), at most max a call, and
// answers how many; with each record go its job's attempts and its
// LastFinished entry, unless that names a newer record of the same task,
// which stays. Records at or after before and other jobs' attempts stay.
func testPruneHistory(t *testing.T, st store.Store) {
	prune(t, st, histTime(1000), 10, 0)
	// Seq and time in different orders; task (q, a) finished three
	// times: at 2 (Seq 6), at 5 (Seq 1) and at 20 (Seq 7, the newest).
	fs := []store.Finished{
		finished(1, "q", "a", task.FinishedDead, 5),
		finished(2, "q", "b", task.FinishedAcked, 3),
		finished(3, "r", "c", task.FinishedAcked, 9),
		finished(4, "q", "d", task.FinishedDeleted, 1),
		finished(5, "r", "e", task.FinishedAcked, 9), // same time as 3
		finished(6, "q", "a", task.FinishedAcked, 2),
		finished(7, "q", "a", task.FinishedDead, 20),
		finished(8, "r", "f", task.FinishedAcked, 30),
	}
	var recs []any
	for _, f := range fs {
		recs = append(recs, f, attempt(f.JobID, 1), attempt(f.JobID, 2))
	}
	recs = append(recs, attempt(1, 1)) // the attempt of a job with no record
	commitHistory(t, st, recs...)
	gone := map[uint64]bool{}
	check := func() {
		t.Helper()
		var q, r []store.Finished
		for _, f := range fs {
			if gone[f.Seq] {
				checkAttempts(t, st, f.JobID)
				continue
			}
			checkAttempts(t, st, f.JobID, attempt(f.JobID, 1), attempt(f.JobID, 2))
			if f.Queue == "q" {
				q = append([]store.Finished{f}, q...)
			} else {
				r = append([]store.Finished{f}, r...)
			}
		}
		checkHistory(t, st, "q", "", 0, 100, q...)
		checkHistory(t, st, "r", "", 0, 100, r...)
		checkAttempts(t, st, 1, attempt(1, 1))
		checkSeq(t, st, 8)
	}
	check()
	checkLast(t, st, "q", "a", fs[6])

	// Before 5: Seqs 4 (at 1), 6 (at 2), 2 (at 3), one a call.
	prune(t, st, histTime(5), 1, 1)
	gone[4] = true
	check()
	checkLast(t, st, "q", "d", store.Finished{})
	prune(t, st, histTime(5), 1, 1)
	gone[6] = true
	check()
	checkLast(t, st, "q", "a", fs[6]) // Seq 7's, not 6's, which pointed nowhere
	prune(t, st, histTime(5), 0, 0)
	prune(t, st, histTime(5), 10, 1)
	gone[2] = true
	check()
	prune(t, st, histTime(5), 10, 0) // Seq 1 is at 5: not before

	// Up to 9 at most 2: Seq 1 (at 5) and 3 (at 9, before Seq 5 at 9); (q, a)
	// keeps its newest.
	prune(t, st, histTime(9)+1, 2, 2)
	gone[1], gone[3] = true, true
	check()
	checkLast(t, st, "q", "a", fs[6])
	checkLast(t, st, "r", "c", store.Finished{})
	checkLast(t, st, "r", "e", fs[4])

	// The newest of (q, a) pruned: its entry goes.
	prune(t, st, histTime(21), 100, 2)
	gone[5], gone[7] = true, true
	check()
	checkLast(t, st, "q", "a", store.Finished{})
	checkLast(t, st, "r", "f", fs[7])

	// A record put after a prune reads as any other; (q, a) again.
	again := finished(9, "q", "a", task.FinishedAcked, 0)
	commitHistory(t, st, again)
	checkLast(t, st, "q", "a", again)
	checkHistory(t, st, "q", "", 0, 10, again)
	checkSeq(t, st, 9)
	prune(t, st, histTime(1000), 100, 2)
	checkHistory(t, st, "q", "", 0, 10)
	checkHistory(t, st, "r", "", 0, 10)
	checkLast(t, st, "q", "a", store.Finished{})
	checkAttempts(t, st, 1, attempt(1, 1))
	checkSeq(t, st, 9)
}

// testHistoryAtomic: a batch with a failing op writes none of its
// attempts and Finished records, nor raises HistorySeq.
func testHistoryAtomic(t *testing.T, st store.Store) {
	kept := finished(1, "q", "a", task.FinishedAcked, 1)
	commitHistory(t, st, kept, attempt(kept.JobID, 1))
	var b store.Batch
	b.PutAttempt(attempt(kept.JobID, 2))
	b.PutAttempt(attempt(7, 1))
	b.PutFinished(finished(5, "q", "a", task.FinishedDead, 2))
	b.PutFinished(finished(6, "q", "b", task.FinishedDead, 3))
	b.Ops = append(b.Ops, store.Op{Kind: 99}) // fails: no such kind
	if err := st.Commit(&b); err == nil {
		t.Fatal("Commit of a batch with an op of unknown kind: nil error")
	}
	checkAttempts(t, st, kept.JobID, attempt(kept.JobID, 1))
	checkAttempts(t, st, 7)
	checkLast(t, st, "q", "a", kept)
	checkLast(t, st, "q", "b", store.Finished{})
	checkHistory(t, st, "q", "", 0, 10, kept)
	checkSeq(t, st, 1)
}

// testHistoryPersisted: attempts, Finished records, LastFinished entries
// and HistorySeq survive a reopen, and so does a prune: HistorySeq stays
// at a pruned record's Seq.
func testHistoryPersisted(t *testing.T, reopen func() store.Store) {
	st := reopen()
	old := finished(3, "q", "a", task.FinishedDead, 1)
	last := finished(4, "q", "a", task.FinishedAcked, 2)
	other := finished(9, "r", "b", task.FinishedDeleted, 3)
	commitHistory(t, st, old, attempt(old.JobID, 1), last, attempt(last.JobID, 1), attempt(last.JobID, 2))
	commitHistory(t, st, other)
	closeStore(t, st)

	st = reopen()
	checkAttempts(t, st, old.JobID, attempt(old.JobID, 1))
	checkAttempts(t, st, last.JobID, attempt(last.JobID, 1), attempt(last.JobID, 2))
	checkLast(t, st, "q", "a", last)
	checkHistory(t, st, "q", "", 0, 10, last, old)
	checkHistory(t, st, "r", "", 0, 10, other)
	checkSeq(t, st, 9)
	prune(t, st, histTime(3)+1, 1, 1)
	prune(t, st, histTime(3)+1, 10, 2)
	closeStore(t, st)

	st = reopen()
	defer closeStore(t, st)
	checkSeq(t, st, 9)
	checkHistory(t, st, "q", "", 0, 10)
	checkHistory(t, st, "r", "", 0, 10)
	checkAttempts(t, st, last.JobID)
	checkLast(t, st, "q", "a", store.Finished{})
	next := finished(10, "q", "a", task.FinishedAcked, 4)
	commitHistory(t, st, next)
	checkSeq(t, st, 10)
	checkLast(t, st, "q", "a", next)
}

// testDeduped: a finished-id record reads back by (queue, id), a later
// one of the same id replaces it, and PruneDeduped removes those that
// ended before its time, soonest first, at most max at a time, never a
// record replaced since by one that ends later.
func testDeduped(t *testing.T, st store.Store) {
	rec := func(queue, id string, job uint64, until int64) store.Deduped {
		return store.Deduped{Queue: queue, ID: id, JobID: job, Outcome: "acked", Finished: until - 100, Until: until,
			Attempts: uint32(job), LastError: "e" + id}
	}
	var b store.Batch
	for _, r := range []store.Deduped{rec("q", "a", 1, 1000), rec("q", "b", 2, 2000), rec("qq", "a", 3, 3000), rec("q", "c", 4, 4000)} {
		b.PutDeduped(r)
	}
	if err := st.Commit(&b); err != nil {
		t.Fatal(err)
	}
	b.Reset()
	b.PutDeduped(rec("q", "a", 5, 5000)) // a later finish of q/a
	if err := st.Commit(&b); err != nil {
		t.Fatal(err)
	}
	check := func(queue, id string, want store.Deduped, found bool) {
		t.Helper()
		got, err := st.Deduped(queue, id)
		if !found {
			if err != store.ErrNotFound {
				t.Fatalf("Deduped(%s, %s) = %+v, %v; want ErrNotFound", queue, id, got, err)
			}
			return
		}
		if err != nil || got != want {
			t.Fatalf("Deduped(%s, %s) = %+v, %v; want %+v", queue, id, got, err, want)
		}
	}
	check("q", "a", rec("q", "a", 5, 5000), true)
	check("qq", "a", rec("qq", "a", 3, 3000), true)
	check("q", "zz", store.Deduped{}, false)
	// Before 3500: q/a's first end (replaced since), q/b, qq/a; one at a time first.
	if n, err := st.PruneDeduped(3500, 1); err != nil || n != 1 {
		t.Fatalf("PruneDeduped(3500, 1) = %d, %v; want 1", n, err)
	}
	check("q", "a", rec("q", "a", 5, 5000), true) // its first end pruned, not the record
	check("q", "c", rec("q", "c", 4, 4000), true)
	// A store may count the end it passed of a record replaced since.
	if n, err := st.PruneDeduped(3500, 10); err != nil || n < 1 {
		t.Fatalf("PruneDeduped(3500, 10) = %d, %v; want 1 or 2", n, err)
	}
	check("q", "b", store.Deduped{}, false)
	check("qq", "a", store.Deduped{}, false)
	check("q", "a", rec("q", "a", 5, 5000), true)
	check("q", "c", rec("q", "c", 4, 4000), true)
	if n, err := st.PruneDeduped(10000, 10); err != nil || n < 2 {
		t.Fatalf("PruneDeduped(10000, 10) = %d, %v; want 2", n, err)
	}
	check("q", "a", store.Deduped{}, false)
	check("q", "c", store.Deduped{}, false)
	if n, err := st.PruneDeduped(10000, 10); err != nil || n != 0 {
		t.Fatalf("PruneDeduped of an empty set = %d, %v; want 0", n, err)
	}
}
