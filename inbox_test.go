package hourglass_test

import (
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
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
		// The first handed inbox makes the ring, where the next
		// FullMax·BatchSize go; the call that finds it full files them all
		// and queues in the inbox, and the next ones go to the ring again.
		if want := (inboxCounts{(hourglass.FullMax + 1) * hourglass.BatchSize, 1, hourglass.BatchSize - 1}); last != want {
			t.Errorf("after %d: %+v; want %+v (one inbox and a full ring handed, then filed by the caller; one in the inbox, the rest in the ring)", n, last, want)
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

// awakeWithRing starts tm's shard 0 driver on a callback that schedules
// a full inbox an hour away (so that the driver, awake, makes its ring)
// and then waits for release: the driver stays awake until then.
func awakeWithRing(t *testing.T, tm *hourglass.Timer) (release chan struct{}) {
	t.Helper()
	ready, release := make(chan struct{}), make(chan struct{})
	if _, err := tm.AfterFunc(0, func() {
		for range hourglass.BatchSize {
			if _, err := tm.AfterFunc(time.Hour, noop); err != nil {
				t.Error(err)
			}
		}
		close(ready)
		<-release
	}); err != nil {
		t.Fatal(err)
	}
	<-ready
	if !hourglass.Ring(tm, 0) {
		t.Fatal("no ring after a full inbox went to the awake driver")
	}
	return release
}

// TestInbox_RingWithoutLock checks that, while the driver is awake and
// has its ring, scheduling a one-shot timeout does not take the shard's
// lock, and that the driver files every timeout so queued.
func TestInbox_RingWithoutLock(t *testing.T) {
	tm := hourglass.New(hourglass.WithShards(1), hourglass.WithExecutor(hourglass.Inline))
	defer tm.Stop()
	release := awakeWithRing(t, tm)
	const n = 1000
	unlock := hourglass.LockShard(tm, 0)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range n {
			if _, err := tm.AfterFunc(time.Hour, noop); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Error("AfterFunc waited for the shard's lock while the driver was awake")
	}
	unlock()
	<-done
	close(release)
	if got, want := tm.Pending(), hourglass.BatchSize+n; got != want {
		t.Errorf("Pending = %d; want %d", got, want)
	}
	if got, want := len(tm.Stop()), hourglass.BatchSize+n; got != want {
		t.Errorf("Stop returned %d; want %d", got, want)
	}
}

// TestInbox_RingStop checks that a timeout scheduled through the ring
// while Stop runs either gets ErrStopped or is returned by Stop,
// cancelled: none is lost. Goroutines schedule until Stop (or 30,000 each), many rounds,
// so that some calls are between their two looks at the ring as Stop
// drops it.
func TestInbox_RingStop(t *testing.T) {
	for range 200 {
		tm := hourglass.New(hourglass.WithShards(1), hourglass.WithExecutor(hourglass.Inline))
		release := awakeWithRing(t, tm)
		const goroutines = 3
		var wg sync.WaitGroup
		made := make([][]*hourglass.Timeout, goroutines)
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 30_000 {
					to, err := tm.AfterFunc(time.Hour, noop)
					if errors.Is(err, hourglass.ErrStopped) {
						return
					}
					if err != nil {
						t.Error(err)
						return
					}
					made[g] = append(made[g], to)
				}
			}()
		}
		time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
		stopped := map[*hourglass.Timeout]bool{}
		for _, to := range tm.Stop() {
			stopped[to] = true
		}
		wg.Wait()
		close(release)
		for _, tos := range made {
			for _, to := range tos {
				if !stopped[to] || !to.Cancelled() {
					t.Fatalf("a timeout scheduled before Stop was not returned by it, cancelled (cancelled: %v)", to.Cancelled())
				}
			}
		}
	}
}

// TestInbox_RingBurstFires checks that a burst scheduled from several
// goroutines, much of it through the ring while the driver passes and
// sleeps, fires every timeout once and none early.
func TestInbox_RingBurstFires(t *testing.T) {
	tm := hourglass.New(hourglass.WithExecutor(hourglass.Inline))
	defer tm.Stop()
	const goroutines, each = 4, 50_000
	var fired, early, twice atomic.Int64
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				d := time.Duration(i%3000) * time.Microsecond
				due := time.Now().Add(d)
				var once atomic.Bool
				if _, err := tm.AfterFunc(d, func() {
					if time.Now().Before(due) {
						early.Add(1)
					}
					if once.Swap(true) {
						twice.Add(1)
					}
					fired.Add(1)
				}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for deadline := time.Now().Add(30 * time.Second); fired.Load() < goroutines*each && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if got := fired.Load(); got != goroutines*each {
		t.Errorf("fired %d of %d", got, goroutines*each)
	}
	if early.Load() != 0 || twice.Load() != 0 {
		t.Errorf("%d fired early, %d twice", early.Load(), twice.Load())
	}
}

// TestInbox_RingIdleFires checks that timeouts due at once, queued
// through the ring as the driver finds nothing else pending and goes to
// sleep (dropping its ring), all fire: a driver going to sleep sees what
// was queued after its last look, or the caller sees that it slept.
func TestInbox_RingIdleFires(t *testing.T) {
	tm := hourglass.New(hourglass.WithShards(1), hourglass.WithExecutor(hourglass.Inline))
	defer tm.Stop()
	const goroutines, each = 2, 2000
	var fired atomic.Int64
	f := func() { fired.Add(1) }
	want := int64(0)
	for round := range 300 {
		var wg sync.WaitGroup
		for range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range each {
					if _, err := tm.AfterFunc(0, f); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		want += goroutines * each
		for deadline := time.Now().Add(10 * time.Second); fired.Load() < want && time.Now().Before(deadline); {
			time.Sleep(100 * time.Microsecond)
		}
		if got := fired.Load(); got != want {
			t.Fatalf("round %d: fired %d of %d", round, got, want)
		}
	}
}

// TestInbox_RingBeforeSleep checks that a timeout queued in the ring
// after the driver's pass has taken from it, and before the driver
// records how long it sleeps, fires at its deadline: the driver looks at
// the ring again once it has recorded that (sleepAfter).
func TestInbox_RingBeforeSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tm := hourglass.New(hourglass.WithShards(1), hourglass.WithExecutor(hourglass.Inline))
		defer tm.Stop()
		fired := make(chan struct{})
		if _, err := tm.AfterFunc(0, func() {
			for range hourglass.BatchSize {
				tm.AfterFunc(time.Hour, noop)
			}
			// The next pass is followed by one AfterFunc, made through the
			// ring: the driver is awake and the shard's lock is held.
			hourglass.AfterPass(tm, 0, func() {
				if _, err := tm.AfterFunc(0, func() { close(fired) }); err != nil {
					t.Error(err)
				}
			})
		}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		select {
		case <-fired:
		default:
			t.Fatal("a timeout due at once, queued as the driver was about to sleep, did not fire before the driver slept")
		}
	})
}

// TestInbox_RingFullSpills checks that a timeout whose shard's ring is
// full (its driver far behind) goes to the next shard, so that a burst
// from one goroutine fires on more than one driver.
func TestInbox_RingFullSpills(t *testing.T) {
	tm := hourglass.New(hourglass.WithShards(2), hourglass.WithExecutor(hourglass.Inline))
	defer tm.Stop()
	// Each shard's driver runs a callback that schedules a full inbox on
	// its shard (making its ring) and then waits: both stay awake.
	release := make(chan struct{})
	defer close(release)
	for i := range 2 {
		ready := make(chan struct{})
		if _, err := hourglass.AfterFuncOnShard(tm, i, 0, func() {
			for range hourglass.BatchSize {
				if _, err := hourglass.AfterFuncOnShard(tm, i, time.Hour, noop); err != nil {
					t.Error(err)
				}
			}
			close(ready)
			<-release
		}); err != nil {
			t.Fatal(err)
		}
		<-ready
		if !hourglass.Ring(tm, i) {
			t.Fatalf("shard %d has no ring", i)
		}
	}
	n := 2*hourglass.RingSize + 100
	for range n {
		if _, err := tm.AfterFunc(time.Hour, noop); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		f, w, h := hourglass.Inbox(tm, i)
		if got, least := f+w+h-hourglass.BatchSize, hourglass.RingSize; got < least {
			t.Errorf("shard %d holds %d of the %d timeouts; want at least %d (a full ring's, spilled from the other shard)", i, got, n, least)
		}
	}
}

// TestInbox_RingFullWaitsOnce checks that a callback running on the
// driver, which no pass can answer while it runs, waits for room in its
// shard's full ring once, RoomWait, however many timeouts it schedules,
// and that all of them are filed.
func TestInbox_RingFullWaitsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tm := hourglass.New(hourglass.WithShards(1), hourglass.WithExecutor(hourglass.Inline))
		defer tm.Stop()
		n := 5 * hourglass.RingSize
		var took time.Duration
		done := make(chan struct{})
		if _, err := tm.AfterFunc(0, func() {
			defer close(done)
			start := time.Now()
			for range n {
				if _, err := tm.AfterFunc(time.Hour, noop); err != nil {
					t.Error(err)
					return
				}
			}
			took = time.Since(start)
		}); err != nil {
			t.Fatal(err)
		}
		<-done
		if took > hourglass.RoomWait {
			t.Errorf("scheduling %d from a callback on the driver took %v; want at most one wait of %v", n, took, hourglass.RoomWait)
		}
		if got := tm.Pending(); got != n {
			t.Errorf("Pending = %d; want %d", got, n)
		}
	})
}
