package broker_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hourglass-go/hourglass/store"
	"github.com/hourglass-go/hourglass/store/memstore"
	"github.com/hourglass-go/hourglass/task"
)

// gatedStore is a store.Pipeliner over memstore whose fsyncs end only
// when the test says so: each wait takes one value from gate. It records
// the task writes of each Apply.
type gatedStore struct {
	store.Store
	gate chan struct{}

	mu      sync.Mutex
	applied []int // task writes of each Apply, in order
}

func (s *gatedStore) Apply(b *store.Batch) (func() error, error) {
	if err := s.Store.Commit(b); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.applied = append(s.applied, len(b.Ops))
	s.mu.Unlock()
	return func() error {
		<-s.gate
		return nil
	}, nil
}

func (s *gatedStore) applies() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.applied)
}

// TestCommit_SmallGroupWaitsForSync checks that a small group is not
// applied while the group before it waits for its fsync, but gathers the
// writes that arrive meanwhile and is applied once that fsync ends; and
// that a group of a batch put is applied at once.
func TestCommit_SmallGroupWaitsForSync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &gatedStore{Store: memstore.New(), gate: make(chan struct{})}
		b := open(t, st)
		var puts sync.WaitGroup
		putAsync := func(rs ...task.PutRequest) {
			puts.Go(func() {
				for _, r := range b.PutBatch(ctx, "q", rs) {
					if r.Err != nil {
						t.Error(r.Err)
					}
				}
			})
		}
		want := func(step string, applied ...int) {
			t.Helper()
			synctest.Wait()
			if got := st.applies(); !slices.Equal(got, applied) {
				t.Fatalf("%s: applies of %v task writes, want %v", step, got, applied)
			}
		}

		putAsync(task.PutRequest{ID: "a"})
		want("a put", 1)
		for _, id := range []string{"b", "c", "d"} {
			putAsync(task.PutRequest{ID: id})
		}
		want("three puts while a's group syncs", 1)
		st.gate <- struct{}{} // a's fsync ends
		want("a synced", 1, 3)
		st.gate <- struct{}{}
		puts.Wait()

		putAsync(task.PutRequest{ID: "e"})
		want("e put", 1, 3, 1)
		big := make([]task.PutRequest, 300)
		for i := range big {
			big[i] = task.PutRequest{ID: fmt.Sprint("big-", i), Delay: time.Hour}
		}
		putAsync(big...)
		want("a batch of 300 while e's group syncs", 1, 3, 1, 300)
		st.gate <- struct{}{}
		st.gate <- struct{}{}
		puts.Wait()
		qs, err := b.Queues(ctx)
		if err != nil || len(qs) != 1 || qs[0].Ready+qs[0].Delayed != 305 {
			t.Fatalf("queues %+v, %v: want q with 305 tasks", qs, err)
		}
	})
}
