package hourglass_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/hourglass-go/hourglass"
)

// inboxCounts is what hourglass.Inbox reports of a shard.
type inboxCounts struct{ filed, waiting, handed int }

func inboxOf(tm *hourglass.Timer) inboxCounts {
	f, w, h := hourglass.Inbox(tm, 0)
	return inboxCounts{f, w, h}
}

// TestInbox_HandedToAwakeDriver checks that a full inbox goes to the
// driver goroutine, not into the structure on the caller's goroutine,
// while the driver is awake and will pass again (here: a callback
// running on it, Inline, between two passes), that at most FullMax
// inboxes wait so before a caller files them, and that the driver's next
// pass files them all.
func TestInbox_HandedToAwakeDriver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tm := hourglass.New(hourglass.WithShards(1), hourglass.WithExecutor(hourglass.Inline))
		defer tm.Stop()
		n := hourglass.BatchSize * (hourglass.FullMax + 2)
		var first, last inboxCounts
		done := make(chan struct{})
		if _, err := tm.AfterFunc(0, func() {
			defer close(done)
			for i := range n {
				if _, err := tm.AfterFunc(time.Hour, noop); err != nil {
					t.Error(err)
					return
				}
				if i == hourglass.BatchSize-1 {
					first = inboxOf(tm)
				}
			}
			last = inboxOf(tm)
		}); err != nil {
			t.Fatal(err)
		}
		<-done
		if want := (inboxCounts{0, 0, hourglass.BatchSize}); first != want {
			t.Errorf("after one full inbox: %+v; want %+v (handed to the driver, not filed)", first, want)
		}
		// The inbox after FullMax handed ones makes the caller file them
		// all, oldest first; the next is handed again.
		if want := (inboxCounts{(hourglass.FullMax + 1) * hourglass.BatchSize, 0, hourglass.BatchSize}); last != want {
			t.Errorf("after %d: %+v; want %+v (%d inboxes handed then filed by the caller, one handed)", n, last, want, hourglass.FullMax)
		}
		synctest.Wait() // the driver has passed and sleeps
		if got, want := inboxOf(tm), (inboxCounts{n, 0, 0}); got != want {
			t.Errorf("once the driver sleeps: %+v; want %+v", got, want)
		}
	})
}

// TestInbox_StopTakesHandedInboxes checks that Stop, called while
// inboxes wait for the driver, returns their timeouts with the rest, and
// that a cancelled one among them is not returned.
func TestInbox_StopTakesHandedInboxes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tm := hourglass.New(hourglass.WithShards(1), hourglass.WithExecutor(hourglass.Inline))
		n := 3 * hourglass.BatchSize
		var stopped []*hourglass.Timeout
		var handed int
		done := make(chan struct{})
		if _, err := tm.AfterFunc(0, func() {
			defer close(done)
			for i := range n {
				to, err := tm.AfterFunc(time.Hour, noop)
				if err != nil {
					t.Error(err)
					return
				}
				if i == 0 {
					to.Cancel()
				}
			}
			handed = inboxOf(tm).handed
			stopped = tm.Stop()
		}); err != nil {
			t.Fatal(err)
		}
		<-done
		if handed == 0 {
			t.Errorf("no inbox was handed to the driver")
		}
		if len(stopped) != n-1 {
			t.Errorf("Stop returned %d timeouts; want %d", len(stopped), n-1)
		}
		for _, to := range stopped {
			if !to.Cancelled() {
				t.Fatalf("Stop returned a timeout not cancelled")
			}
		}
	})
}
