package storetest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hourglass-go/hourglass/store"
)

// In the concurrent cases a task's queue, id, priority and payload follow
// from its job id, so a reader can check any task it sees without asking
// the writer.
var concQueues = []string{"c0", "c1", "c2"}

func concTask(job uint64) store.Task {
	return sample(job, concQueues[job%uint64(len(concQueues))], fmt.Sprintf("id-%d", job))
}

// checkConc checks a task read while commits go on: fields that follow
// from its job id, and the payload if withPayload.
func checkConc(got store.Task, withPayload bool) error {
	want := concTask(got.JobID)
	if got.Queue != want.Queue || got.ID != want.ID || got.Priority != want.Priority || got.Created != want.Created {
		return fmt.Errorf("task %d: queue %q id %q priority %d, want %q %q %d", got.JobID, got.Queue, got.ID, got.Priority, want.Queue, want.ID, want.Priority)
	}
	if withPayload && !bytes.Equal(got.Payload, want.Payload) {
		return fmt.Errorf("task %d: payload of %d bytes is not its own (%d bytes)", got.JobID, len(got.Payload), len(want.Payload))
	}
	if !withPayload && got.Payload != nil {
		return fmt.Errorf("task %d: a payload where none belongs", got.JobID)
	}
	return nil
}

// testConcurrentReads: readers on several goroutines see whole tasks, an
// index that agrees with the tasks, ordered pages and a monotone
// NextJobID while one goroutine commits puts, updates and deletes. Run
// with -race.
func testConcurrentReads(t *testing.T, st store.Store) {
	const rounds = 150
	var published atomic.Uint64 // highest job id committed
	done := make(chan struct{})
	var wg sync.WaitGroup

	live := map[uint64]store.Task{}
	wg.Go(func() {
		defer close(done)
		r := rand.New(rand.NewPCG(7, 8))
		var order []uint64 // live job ids, for picking
		next := uint64(1)
		for range rounds {
			var b store.Batch
			for range 3 {
				task := concTask(next)
				b.Put(task)
				live[next] = task
				order = append(order, next)
				next++
			}
			if len(order) > 3 {
				u := live[order[r.IntN(len(order)-3)]]
				u.Attempts++
				u.State = store.Reserved
				u.Lease = fmt.Sprintf("lease-%d", u.Attempts)
				b.Update(u)
				u.Payload = concTask(u.JobID).Payload
				live[u.JobID] = u
				i := r.IntN(len(order) - 3)
				d := live[order[i]]
				b.Delete(d)
				delete(live, d.JobID)
				order = append(order[:i], order[i+1:]...)
			}
			if err := st.Commit(&b); err != nil {
				t.Errorf("Commit: %v", err)
				return
			}
			published.Store(next - 1)
		}
	})

	reader := func(seed uint64) error {
		r := rand.New(rand.NewPCG(seed, 9))
		var lastNext uint64
		for i := 0; ; i++ {
			select {
			case <-done:
				return nil
			default:
			}
			hi := published.Load()
			if hi == 0 {
				continue
			}
			job := 1 + r.Uint64N(hi)
			task, err := st.Task(job)
			switch {
			case err == store.ErrNotFound:
			case err != nil:
				return fmt.Errorf("Task(%d): %v", job, err)
			default:
				if err := checkConc(task, true); err != nil {
					return fmt.Errorf("st.Task: %v", err)
				}
			}
			want := concTask(job)
			if got, err := st.Lookup(want.Queue, want.ID); err == nil && got != job {
				return fmt.Errorf("st.Lookup(%q, %q) = %d, want %d", want.Queue, want.ID, got, job)
			} else if err != nil && err != store.ErrNotFound {
				return fmt.Errorf("st.Lookup: %v", err)
			}
			q := concQueues[r.IntN(len(concQueues))]
			page, err := st.List(q, r.Uint64N(hi+1), 20)
			if err != nil {
				return fmt.Errorf("st.List: %v", err)
			}
			for k, task := range page {
				if task.Queue != q || (k > 0 && page[k-1].JobID >= task.JobID) {
					return fmt.Errorf("st.List(%q): job %d of queue %q at %d of %v", q, task.JobID, task.Queue, k, jobs(page))
				}
				if err := checkConc(task, false); err != nil {
					return fmt.Errorf("st.List: %v", err)
				}
			}
			if i%50 == 0 {
				prev := uint64(0)
				err := st.Recover(func(task store.Task) error {
					if task.JobID <= prev {
						return fmt.Errorf("st.Recover: job %d after %d", task.JobID, prev)
					}
					prev = task.JobID
					return checkConc(task, false)
				})
				if err != nil {
					return err
				}
			}
			n, err := st.NextJobID()
			if err != nil || n < lastNext {
				return fmt.Errorf("NextJobID() = %d, %v after %d", n, err, lastNext)
			}
			lastNext = n
		}
	}
	for i := range 4 {
		wg.Go(func() {
			if err := reader(uint64(i)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	got := all(t, st)
	if len(got) != len(live) {
		t.Fatalf("after the commits: %d tasks, want %d", len(got), len(live))
	}
	for _, task := range got {
		want := live[task.JobID]
		if d := diff(task, want, false); d != "" {
			t.Fatalf("after the commits: %s", d)
		}
	}
	checkNext(t, st, 3*rounds+1)
}

// testConcurrentCommits: commits from several goroutines at once (the
// broker commits from one, but a Store is safe for concurrent use) all
// land, each whole.
func testConcurrentCommits(t *testing.T, st store.Store) {
	const (
		writers = 4
		rounds  = 25
		perTx   = 3
	)
	var wg sync.WaitGroup
	for w := range uint64(writers) {
		wg.Go(func() {
			for r := range uint64(rounds) {
				var b store.Batch
				for k := range uint64(perTx) {
					// Writer w owns the job ids congruent to w+1 modulo writers.
					job := 1 + w + writers*(r*perTx+k)
					b.Put(concTask(job))
				}
				if r > 0 {
					u := concTask(1 + w + writers*((r-1)*perTx))
					u.Attempts = 9
					b.Update(u)
				}
				if err := st.Commit(&b); err != nil {
					t.Errorf("writer %d: Commit: %v", w, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	got := all(t, st)
	const total = writers * rounds * perTx
	if len(got) != total {
		t.Fatalf("%d tasks, want %d", len(got), total)
	}
	for i, task := range got {
		if task.JobID != uint64(i+1) {
			t.Fatalf("task %d has job id %d", i, task.JobID)
		}
		if err := checkConc(task, false); err != nil {
			t.Fatal(err)
		}
		r := (task.JobID - 1) / writers / perTx
		k := (task.JobID - 1) / writers % perTx
		if wantAttempts := uint32(9); k == 0 && r < rounds-1 && task.Attempts != wantAttempts {
			t.Fatalf("task %d: attempts %d, want %d (updated)", task.JobID, task.Attempts, wantAttempts)
		}
	}
	checkNext(t, st, total+1)
}
