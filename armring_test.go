package hourglass_test

import (
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hourglass-go/hourglass"
)

// The tests of Arm's way in without the lock (armInbox, handle.go).

// awakeWithArms starts tm's shard 0 driver on a callback that arms a
// pass's worth of timeouts an hour away, taking the lock while the driver
// is awake (so that the shard makes its armInbox), and then waits for
// release: the driver stays awake, and makes no pass, until then.
func awakeWithArms(t *testing.T, tm *hourglass.Timer) (release chan struct{}) {
	t.Helper()
	ready, release := make(chan struct{}), make(chan struct{})
	if _, err := tm.Arm(0, func() {
		for range hourglass.BatchSize {
			if _, err := tm.Arm(time.Hour, noop); err != nil {
				t.Error(err)
			}
		}
		close(ready)
		<-release
	}); err != nil {
		t.Fatal(err)
	}
	<-ready
	if made, _ := hourglass.Arms(tm, 0); !made {
		t.Fatal("no armInbox after a pass's worth of Arms while the driver was awake")
	}
	return release
}

// TestArmRing_WithoutLock checks that, while the driver is awake through
// a burst, Arm does not take the shard's lock, and that every timeout so
// armed is pending and returned by Stop.
func TestArmRing_WithoutLock(t *testing.T) {
	tm := hourglass.New(hourglass.WithShards(1), hourglass.WithExecutor(hourglass.Inline))
	defer tm.Stop()
	release := awakeWithArms(t, tm)
	const n = 1000
	unlock := hourglass.LockShard(tm, 0)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range n {
			if _, err := tm.Arm(time.Hour, noop); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Error("Arm waited for the shard's lock while the driver was awake")
	}
	unlock()
	<-done
	if _, waiting := hourglass.Arms(tm, 0); waiting != n {
		t.Errorf("%d Arms wait in the ring; want %d", waiting, n)
	}
	close(release)
	if got, want := tm.Pending(), hourglass.BatchSize+n; got != want {
		t.Errorf("Pending = %d; want %d", got, want)
	}
	if got, want := len(tm.Stop()), hourglass.BatchSize+n; got != want {
		t.Errorf("Stop returned %d; want %d", got, want)
	}
}

// TestArmRing_CancelBeforeFiled checks that Timer.Cancel and
// Batch.Cancel of a Handle whose timeout still waits in the ring, not yet
// filed, report true and keep it from running, and that a second Cancel
// reports false.
func TestArmRing_CancelBeforeFiled(t *testing.T) {
	tm := hourglass.New(hourglass.WithShards(1), hourglass.WithExecutor(hourglass.Inline))
	defer tm.Stop()
	release := awakeWithArms(t, tm)
	var ran atomic.Int32
	run := func() { ran.Add(1) }
	// arm arms a timeout due at once, which waits in the ring alone.
	arm := func() hourglass.Handle {
		t.Helper()
		h, err := tm.Arm(0, run)
		if err != nil {
			t.Fatal(err)
		}
		if _, waiting := hourglass.Arms(tm, 0); waiting != 1 {
			t.Fatalf("%d Arms wait in the ring; want 1", waiting)
		}
		return h
	}
	h := arm()
	if !tm.Cancel(h) {
		t.Error("Timer.Cancel of a timeout waiting in the ring reported false")
	}
	if tm.Cancel(h) {
		t.Error("a second Timer.Cancel reported true")
	}
	h = arm()
	tm.Batch(func(b *hourglass.Batch) {
		if !b.Cancel(h) {
			t.Error("Batch.Cancel of a timeout waiting in the ring reported false")
		}
	})
	h = arm()
	tm.Batch(func(b *hourglass.Batch) {
		// The batch files on the shard first: Cancel's other way.
		if _, err := b.AfterFunc(time.Hour, noop); err != nil {
			t.Error(err)
		}
		if !b.Cancel(h) {
			t.Error("Batch.Cancel, in a batch filing on the shard, of a timeout waiting in the ring reported false")
		}
	})
	close(release)
	// One more, due at once, fires after the two would have.
	fired := make(chan struct{})
	if _, err := tm.Arm(0, func() { close(fired) }); err != nil {
		t.Fatal(err)
	}
	select {
	case <-fired:
	case <-time.After(10 * time.Second):
		t.Fatal("a timeout due at once did not fire")
	}
	if n := ran.Load(); n != 0 {
		t.Errorf("%d cancelled timeouts ran", n)
	}
}

// TestArmRing_BeforeSleep checks that a timeout armed through the ring
// after the driver's pass has taken from it, and before the driver
// records how long it sleeps, fires at its deadline: the driver looks at
// the ring again once it has recorded that (sleepAfter).
func TestArmRing_BeforeSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tm := hourglass.New(hourglass.WithShards(1), hourglass.WithExecutor(hourglass.Inline))
		defer tm.Stop()
		fired := make(chan struct{})
		if _, err := tm.Arm(0, func() {
			for range hourglass.BatchSize {
				tm.Arm(time.Hour, noop)
			}
			// The next pass is followed by one Arm, made through the
			// ring: the driver is awake and the shard's lock is held.
			hourglass.AfterPass(tm, 0, func() {
				if _, err := tm.Arm(0, func() { close(fired) }); err != nil {
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
			t.Fatal("a timeout due at once, armed as the driver was about to sleep, did not fire before the driver slept")
		}
	})
}

// TestArmRing_Stop checks that a timeout armed through the ring while
// Stop runs either gets ErrStopped or is returned by Stop: none is lost
// and none runs. Goroutines arm until Stop (or 30,000 each), many rounds,
// so that some are between their two looks at the ring as Stop drops it.
func TestArmRing_Stop(t *testing.T) {
	for range 100 {
		tm := hourglass.New(hourglass.WithShards(1), hourglass.WithExecutor(hourglass.Inline))
		release := awakeWithArms(t, tm)
		const goroutines = 3
		var wg sync.WaitGroup
		var made, ran atomic.Int64
		handles := make([][]hourglass.Handle, goroutines)
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 30_000 {
					h, err := tm.Arm(time.Hour, func() { ran.Add(1) })
					if errors.Is(err, hourglass.ErrStopped) {
						return
					}
					if err != nil {
						t.Error(err)
						return
					}
					made.Add(1)
					handles[g] = append(handles[g], h)
				}
			}()
		}
		time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
		stopped := tm.Stop()
		wg.Wait()
		close(release)
		if got, want := int64(len(stopped)), made.Load()+hourglass.BatchSize; got != want {
			t.Fatalf("Stop returned %d timeouts; want %d (%d armed before it, %d by the callback)", got, want, made.Load(), hourglass.BatchSize)
		}
		for _, to := range stopped {
			if !to.Cancelled() {
				t.Fatal("Stop returned a timeout not cancelled")
			}
		}
		for _, hs := range handles {
			for _, h := range hs {
				if tm.Cancel(h) {
					t.Fatal("Cancel after Stop reported true")
				}
			}
		}
		if n := ran.Load(); n != 0 {
			t.Fatalf("%d timeouts ran after Stop", n)
		}
	}
}

// TestArmRing_BurstFires checks that a burst armed from several
// goroutines, much of it through the ring while the driver passes and
// sleeps, with every other timeout cancelled at once, fires every
// timeout not cancelled once and none early, and none whose Cancel
// reported true.
func TestArmRing_BurstFires(t *testing.T) {
	tm := hourglass.New(hourglass.WithExecutor(hourglass.Inline))
	defer tm.Stop()
	const goroutines, each = 4, 50_000
	runs := make([]atomic.Int32, goroutines*each)
	cancelled := make([]bool, goroutines*each)
	var early, fired atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				k := g*each + i
				d := time.Duration(i%3000) * time.Microsecond
				due := time.Now().Add(d)
				h, err := tm.Arm(d, func() {
					if time.Now().Before(due) {
						early.Add(1)
					}
					runs[k].Add(1)
					fired.Add(1)
				})
				if err != nil {
					t.Error(err)
					return
				}
				if i%2 == 1 {
					cancelled[k] = tm.Cancel(h)
				}
			}
		}()
	}
	wg.Wait()
	want := int64(0)
	for _, c := range cancelled {
		if !c {
			want++
		}
	}
	for deadline := time.Now().Add(30 * time.Second); fired.Load() < want && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(10 * time.Millisecond) // a run too many would show now
	var lost, twice, ranCancelled int
	for k := range runs {
		switch n := runs[k].Load(); {
		case cancelled[k] && n != 0:
			ranCancelled++
		case !cancelled[k] && n == 0:
			lost++
		case n > 1:
			twice++
		}
	}
	if lost != 0 || twice != 0 || ranCancelled != 0 || early.Load() != 0 {
		t.Errorf("of %d timeouts (%d not cancelled): %d lost, %d fired twice, %d ran though cancelled, %d early", len(runs), want, lost, twice, ranCancelled, early.Load())
	}
	if p := tm.Pending(); p != 0 {
		t.Errorf("Pending = %d after the burst", p)
	}
}

// TestArmRing_IdleFires checks that timeouts due at once, armed through
// the ring as the driver finds nothing else pending and goes to sleep
// (dropping the armInbox), all fire.
func TestArmRing_IdleFires(t *testing.T) {
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
					if _, err := tm.Arm(0, f); err != nil {
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

// TestArmRing_QuietDropped checks that a shard drops its armInbox once
// its driver has passed armsQuietMax times with nothing armed through
// it, while timeouts are still pending: the burst is over.
func TestArmRing_QuietDropped(t *testing.T) {
	tm := hourglass.New(hourglass.WithShards(1), hourglass.WithExecutor(hourglass.Inline))
	defer tm.Stop()
	release := awakeWithArms(t, tm)
	close(release)
	// A chain of 100 timeouts, each scheduled by the one before a
	// millisecond ahead: a pass each, however late, and none armed.
	var fired atomic.Int64
	var next func()
	next = func() {
		if fired.Add(1) < 100 {
			if _, err := tm.AfterFunc(time.Millisecond, next); err != nil {
				t.Error(err)
			}
		}
	}
	if _, err := tm.AfterFunc(time.Millisecond, next); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); fired.Load() < 100 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if made, _ := hourglass.Arms(tm, 0); made {
		t.Errorf("the armInbox is still there after %d passes with nothing armed", fired.Load())
	}
	if got, want := tm.Pending(), hourglass.BatchSize; got != want {
		t.Errorf("Pending = %d; want %d", got, want)
	}
}

// TestArmRing_OversleptWakes checks that an Arm through the ring, which
// takes no lock, still wakes a driver that has overslept, as a call
// under the lock does (see driver.settle): firing comes before
// scheduling.
func TestArmRing_OversleptWakes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tm := hourglass.New(hourglass.WithShards(1), hourglass.WithExecutor(hourglass.Inline))
		defer tm.Stop()
		if _, err := tm.Arm(0, func() {
			for range hourglass.BatchSize {
				if _, err := tm.Arm(time.Hour, noop); err != nil {
					t.Error(err)
				}
			}
		}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the driver sleeps until the hour
		if made, _ := hourglass.Arms(tm, 0); !made {
			t.Fatal("no armInbox after a pass's worth of Arms while the driver was awake")
		}
		time.Sleep(10 * time.Millisecond)
		before := hourglass.DriverWakeups(tm)
		// The driver should have woken 5 ms ago.
		hourglass.Oversleep(tm, 0, hourglass.Now(tm)-uint64(5*time.Millisecond))
		// With the shard's lock held, the Arm can only go through the ring.
		unlock := hourglass.LockShard(tm, 0)
		if _, err := tm.Arm(2*time.Hour, noop); err != nil {
			t.Fatal(err)
		}
		unlock()
		synctest.Wait()
		if after := hourglass.DriverWakeups(tm); after == before {
			t.Error("an Arm through the ring left a driver that had overslept asleep")
		}
	})
}

// TestArmRing_SpareReused checks that a burst that follows another, with
// no garbage collection between, uses the armInbox the first dropped
// when nothing was pending, instead of making another of 128 KiB.
func TestArmRing_SpareReused(t *testing.T) {
	tm := hourglass.New(hourglass.WithShards(1), hourglass.WithExecutor(hourglass.Inline))
	defer tm.Stop()
	// burst makes the inbox through a callback that arms a pass's worth
	// due at once, and returns it; they all fire, and nothing is pending.
	burst := func() any {
		var inbox any
		done := make(chan struct{})
		if _, err := tm.Arm(0, func() {
			for range hourglass.BatchSize {
				if _, err := tm.Arm(0, noop); err != nil {
					t.Error(err)
				}
			}
			inbox = hourglass.ArmsInbox(tm, 0)
			close(done)
		}); err != nil {
			t.Fatal(err)
		}
		<-done
		for deadline := time.Now().Add(10 * time.Second); tm.Pending() > 0 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		return inbox
	}
	for try := 0; ; try++ {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		gcs := ms.NumGC
		first, second := burst(), burst()
		runtime.ReadMemStats(&ms)
		if first == nil || second == nil {
			t.Fatalf("no armInbox in a burst (%v, %v)", first, second)
		}
		if ms.NumGC != gcs {
			if try == 20 {
				t.Fatal("a garbage collection ran between the bursts 20 times")
			}
			continue // the collector may have taken the spare
		}
		if first != second {
			t.Error("the second burst made a new armInbox though the first's was dropped and no collection ran")
		}
		return
	}
}

// TestArmRing_DroppedRefuses checks that once its armInbox is dropped, a
// caller that loaded the inbox before the drop cannot queue in its ring:
// the drop gave the ids of the ring's cells back to the structure, so a
// push would hand out an id that a later timeout may be filed under too.
func TestArmRing_DroppedRefuses(t *testing.T) {
	tm := hourglass.New(hourglass.WithShards(1), hourglass.WithExecutor(hourglass.Inline))
	defer tm.Stop()
	release := awakeWithArms(t, tm)
	defer close(release)
	push := hourglass.DropArms(tm, 0)
	if made, _ := hourglass.Arms(tm, 0); made {
		t.Fatal("the armInbox is still there after the drop")
	}
	if id, ok := push(); ok {
		t.Fatalf("a push into the dropped ring was taken, with id %d, which the drop gave back", id)
	}
}

// TestArmRing_FullFiledOnce checks that when the ring is full and the
// wait for the driver's pass times out (the driver is held in a
// callback), the Arm that then takes the lock files the whole ring, so
// that the Arms after it queue in the ring without the lock again,
// rather than each taking it while the driver is behind.
func TestArmRing_FullFiledOnce(t *testing.T) {
	tm := hourglass.New(hourglass.WithShards(1), hourglass.WithExecutor(hourglass.Inline))
	defer tm.Stop()
	release := awakeWithArms(t, tm)
	defer close(release)
	// Fill the ring; the next Arm waits for a pass that does not come,
	// and takes the lock.
	for range hourglass.RingSize + 1 {
		if _, err := tm.Arm(time.Hour, noop); err != nil {
			t.Fatal(err)
		}
	}
	if _, waiting := hourglass.Arms(tm, 0); waiting != 0 {
		t.Fatalf("%d Arms wait in the ring after one found it full and took the lock; want 0 (it files them)", waiting)
	}
	const n = 100
	unlock := hourglass.LockShard(tm, 0)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range n {
			if _, err := tm.Arm(time.Hour, noop); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Error("Arm waited for the shard's lock after the ring was filed")
	}
	unlock()
	<-done
	if got, want := tm.Pending(), hourglass.BatchSize+hourglass.RingSize+1+n; got != want {
		t.Errorf("Pending = %d; want %d", got, want)
	}
}
