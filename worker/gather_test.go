package worker

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// TestGatherSlots: a reserve waits up to reserveLinger for the slots still
// held to free, and goes as soon as all are free.
func TestGatherSlots(t *testing.T) {
	free := func(slots chan struct{}, k int) {
		for range k {
			slots <- struct{}{}
		}
	}
	t.Run("all free within the linger", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			slots := make(chan struct{}, 8)
			free(slots, 2) // the first slot, taken by the caller, is the eighth
			go func() {
				time.Sleep(reserveLinger / 4)
				free(slots, 5)
			}()
			start := time.Now()
			if n := gatherSlots(context.Background(), slots, start.Add(reserveLinger)); n != 8 {
				t.Errorf("took %d slots, want 8", n)
			}
			if d := time.Since(start); d != reserveLinger/4 {
				t.Errorf("sent after %v, want %v (as soon as every slot was free)", d, reserveLinger/4)
			}
		})
	})
	t.Run("some held past the linger", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			slots := make(chan struct{}, 8)
			free(slots, 2)
			go func() {
				time.Sleep(reserveLinger / 2)
				free(slots, 1)
				time.Sleep(reserveLinger)
				free(slots, 4)
			}()
			start := time.Now()
			if n := gatherSlots(context.Background(), slots, start.Add(reserveLinger)); n != 4 {
				t.Errorf("took %d slots, want 4", n)
			}
			if d := time.Since(start); d != reserveLinger {
				t.Errorf("sent after %v, want %v", d, reserveLinger)
			}
			time.Sleep(2 * reserveLinger) // the rest free, after the reserve
		})
	})
	t.Run("cancelled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			slots := make(chan struct{}, 8)
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			start := time.Now()
			if n := gatherSlots(ctx, slots, start.Add(reserveLinger)); n != 1 || time.Since(start) != 0 {
				t.Errorf("took %d slots after %v, want 1 at once", n, time.Since(start))
			}
		})
	})
}
