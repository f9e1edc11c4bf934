package hourglass_test

// The Keyed suite. It reuses the conformance machinery of timer_test.go:
// every test runs over the four structures of the structures table, most
// over the three executors too, inside synctest bubbles whose virtual time
// makes "never early, at most one tick late" exact, and whose end proves
// that Stop leaves no goroutine behind. TestKeyed_Model checks a random
// walk against a model; the TestKeyed_Concurrent tests check the
// exactly-once accounting of each key's timeouts under concurrent use.

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"weak"

	"github.com/hourglass-go/hourglass"
)

// keyedSetups are the executors the Keyed tests run over. A Keyed has one
// driver and no shards, so there is one setup per executor.
var keyedSetups = []setup{
	{"Inline", options(hourglass.WithExecutor(hourglass.Inline))},
	{"Goroutines", options()},
	{"Pool", withPool},
}

// newKeyed returns a Keyed over s that calls expire, configured by opts.
// It is stopped when the test ends, in case the test fails before
// stopping it itself, and the test waits for its driver to exit (Done).
func newKeyed[K comparable](t *testing.T, s structure, expire func(K), opts ...hourglass.Option) *hourglass.Keyed[K] {
	t.Helper()
	k := hourglass.NewKeyed(expire, append([]hourglass.Option{s.opt}, opts...)...)
	t.Cleanup(func() {
		k.Stop()
		<-k.Done()
	})
	return k
}

// set calls k.Set and fails the test on an error. Call it from the test's
// goroutine only.
func set[K comparable](t *testing.T, k *hourglass.Keyed[K], key K, d time.Duration) {
	t.Helper()
	if err := k.Set(key, d); err != nil {
		t.Fatalf("Set(%v, %v): %v", key, d, err)
	}
}

// checkDeadline fails unless key's pending timeout is due at want, or,
// for a zero want, unless key has none.
func checkDeadline[K comparable](t *testing.T, k *hourglass.Keyed[K], key K, want time.Time) {
	t.Helper()
	got, ok := k.Deadline(key)
	switch {
	case want.IsZero() && ok:
		t.Errorf("Deadline(%v) = %v, true; want none", key, got)
	case !want.IsZero() && (!ok || !got.Equal(want)):
		t.Errorf("Deadline(%v) = %v, %v; want %v, true", key, got, ok, want)
	}
}

// checkLen fails unless k has want pending keys, by Len and by Stats.
func checkLen[K comparable](t *testing.T, k *hourglass.Keyed[K], want int) {
	t.Helper()
	if n, p := k.Len(), k.Stats().Pending; n != want || p != want {
		t.Errorf("Len() = %d, Stats().Pending = %d, want %d", n, p, want)
	}
}

// checkKeyedStopped fails unless k behaves as stopped: Set returns
// ErrStopped, nothing is pending or running, and Stop returns nil.
func checkKeyedStopped[K comparable](t *testing.T, k *hourglass.Keyed[K], key K) {
	t.Helper()
	if err := k.Set(key, ms); !errors.Is(err, hourglass.ErrStopped) {
		t.Errorf("Set after Stop = %v, want ErrStopped", err)
	}
	checkLen(t, k, 0)
	checkDeadline(t, k, key, time.Time{})
	if k.Remove(key) {
		t.Error("Remove after Stop = true, want false")
	}
	if d := k.Stats().Drivers; d != 0 {
		t.Errorf("Stats().Drivers = %d after Stop, want 0", d)
	}
	if out := k.Stop(); out != nil {
		t.Errorf("second Stop returned %v, want nil", out)
	}
}

// randDur returns a random duration in [0, d).
func randDur(rng *rand.Rand, d time.Duration) time.Duration {
	return time.Duration(rng.Int64N(int64(d)))
}

// sortedKeys returns the keys of m in increasing order.
func sortedKeys[V any](m map[int]V) []int {
	var out []int
	for key := range m {
		out = append(out, key)
	}
	slices.Sort(out)
	return out
}

// TestKeyed_FiresOnTime checks that each key expires once, never before
// its deadline and at most one tick after it (exactly for the heap and the
// list), whether the deadlines fall on the tick grid or not, and that
// Deadline and Len track the pending keys.
func TestKeyed_FiresOnTime(t *testing.T) {
	forEachSetup(t, keyedSetups, func(t *testing.T, s structure, opts []hourglass.Option) {
		for _, offset := range []time.Duration{0, 300*µs + 7} {
			r := newRecorder()
			k := newKeyed(t, s, r.record, opts...)
			advance(offset) // the tick grid starts with k
			var last time.Duration
			pending := 0
			for i, d := range deadlines {
				if d <= s.horizon {
					set(t, k, i, d)
					checkDeadline(t, k, i, time.Now().Add(d))
					last = d
					pending++
				}
			}
			checkLen(t, k, pending)
			advance(last + s.tolerance)
			for i, d := range deadlines {
				if d <= s.horizon {
					r.checkRanOnce(t, s, i, offset+d)
					checkDeadline(t, k, i, time.Time{})
				}
			}
			checkLen(t, k, 0)
			if out := k.Stop(); len(out) != 0 {
				t.Errorf("Stop returned %v after every key expired", out)
			}
		}
	})
}

// TestKeyed_SetBursts sets many more keys than Set holds back before
// applying them together (see setBatch in keyed.go), with nothing in
// between that reads the Keyed: each key is set, then half of them pushed
// later and a quarter pulled earlier, in bursts that end mid-batch. Every
// key must expire once, at its last deadline.
func TestKeyed_SetBursts(t *testing.T) {
	forEachStructure(t, func(t *testing.T, s structure) {
		r := newRecorder()
		k := newKeyed(t, s, r.record)
		const keys = 1000
		want := make(map[int]time.Duration)
		for i := range keys {
			want[i] = time.Duration(i%7+2) * ms
			set(t, k, i, want[i])
		}
		for i := 0; i < keys; i += 2 {
			want[i] += 5 * ms
			set(t, k, i, want[i])
		}
		for i := 1; i < keys; i += 4 {
			want[i] = ms
			set(t, k, i, want[i])
		}
		advance(ms) // the earliest deadline: the driver applies what waits
		advance(20*ms + s.tolerance)
		for i := range keys {
			r.checkRanOnce(t, s, i, want[i])
		}
		checkLen(t, k, 0)
	})
}

// TestKeyed_SetMany checks that SetMany sets every key it is given to one
// deadline d after the call, new keys and pending ones alike (a pending
// key moves, earlier or later, and its old deadline never fires), across
// the batches Set holds back (see setBatch in keyed.go), with a key listed
// twice and an empty list; and that after Stop it sets nothing.
func TestKeyed_SetMany(t *testing.T) {
	forEachSetup(t, keyedSetups, func(t *testing.T, s structure, opts []hourglass.Option) {
		r := newRecorder()
		k := newKeyed(t, s, r.record, opts...)
		setMany := func(keys []int, d time.Duration) {
			t.Helper()
			if n, err := k.SetMany(keys, d); n != len(keys) || err != nil {
				t.Fatalf("SetMany(%d keys, %v) = %d, %v; want %d, nil", len(keys), d, n, err, len(keys))
			}
			for _, key := range keys {
				checkDeadline(t, k, key, time.Now().Add(d))
			}
		}
		since := func() time.Duration { return time.Since(r.start) }

		// 1000 keys in one call, then every other one pushed later and
		// every fourth pulled earlier, as many small calls.
		const keys = 1000
		all := make([]int, keys)
		for i := range all {
			all[i] = i
		}
		setMany(all, 20*ms)
		checkLen(t, k, keys)
		want := make([]time.Duration, keys)
		for i := range want {
			want[i] = 20 * ms
		}
		advance(2 * ms)
		for lo := 0; lo < keys; lo += 30 {
			var later, earlier []int
			for i := lo; i < min(lo+30, keys); i++ {
				switch {
				case i%4 == 1:
					earlier = append(earlier, i)
					want[i] = 2*ms + 5*ms
				case i%2 == 0:
					later = append(later, i)
					want[i] = 2*ms + 40*ms
				}
			}
			setMany(later, 40*ms)
			setMany(earlier, 5*ms)
		}
		checkLen(t, k, keys)
		advance(40*ms + s.tolerance)
		for i := range keys {
			r.checkRanOnce(t, s, i, want[i])
		}
		checkLen(t, k, 0)

		// A key listed twice is set twice, to the same deadline; an empty
		// list sets nothing.
		now := since()
		setMany([]int{keys, keys, keys + 1}, 10*ms)
		checkLen(t, k, 2)
		setMany(nil, ms)
		checkLen(t, k, 2)
		advance(10*ms + s.tolerance)
		r.checkRanOnce(t, s, keys, now+10*ms)
		r.checkRanOnce(t, s, keys+1, now+10*ms)

		setMany([]int{keys + 2, keys + 3}, time.Hour)
		out := k.Stop()
		slices.Sort(out)
		if !slices.Equal(out, []int{keys + 2, keys + 3}) {
			t.Errorf("Stop returned %v, want [%d %d]", out, keys+2, keys+3)
		}
		if n, err := k.SetMany([]int{1, 2}, ms); n != 0 || !errors.Is(err, hourglass.ErrStopped) {
			t.Errorf("SetMany after Stop = %d, %v; want 0, ErrStopped", n, err)
		}
		checkKeyedStopped(t, k, 1)
	})
}

// TestKeyed_SetMoves checks that Set on a pending key moves its one
// timeout, later or earlier, including back and forth and to a time
// between the deadline it is filed at and the one it was pushed to; that
// the old deadlines never fire; and that Set after an expiry, also from
// expire itself, starts a new timeout.
func TestKeyed_SetMoves(t *testing.T) {
	forEachSetup(t, keyedSetups, func(t *testing.T, s structure, opts []hourglass.Option) {
		r := newRecorder()
		var k *hourglass.Keyed[int]
		var rearms atomic.Int32
		k = newKeyed(t, s, func(key int) {
			r.record(key)
			if key == 9 && rearms.Add(1) < 3 {
				k.Set(key, 10*ms) // a new timeout from expire
			}
		}, opts...)
		since := func() time.Duration { return time.Since(r.start) }

		// Later: 10 ms moved at 5 ms to 5+20 ms.
		set(t, k, 0, 10*ms)
		advance(5 * ms)
		set(t, k, 0, 20*ms)
		checkDeadline(t, k, 0, r.start.Add(25*ms))
		checkLen(t, k, 1)
		advance(15 * ms) // now 20 ms: past the old deadline and its tick
		r.checkNotRun(t, 0)
		advance(5*ms + s.tolerance)
		r.checkRanOnce(t, s, 0, 25*ms)

		// Pushed later, then pulled back: between the deadline the entry
		// is filed at and the latest, or before both.
		now := since()
		set(t, k, 1, 100*ms)
		set(t, k, 1, 300*ms)
		set(t, k, 1, 200*ms)
		set(t, k, 2, 100*ms)
		set(t, k, 2, 300*ms)
		set(t, k, 2, 50*ms)
		set(t, k, 3, 100*ms)
		set(t, k, 3, 300*ms)
		checkLen(t, k, 3)
		advance(300*ms + s.tolerance)
		r.checkRanOnce(t, s, 1, now+200*ms)
		r.checkRanOnce(t, s, 2, now+50*ms)
		r.checkRanOnce(t, s, 3, now+300*ms)

		// Earlier: a driver asleep until 1 h must wake for 1 ms.
		now = since()
		set(t, k, 4, time.Hour)
		advance(10 * ms)
		set(t, k, 4, ms)
		advance(ms + s.tolerance)
		r.checkRanOnce(t, s, 4, now+11*ms)

		// Back and forth many times: only the last deadline counts.
		now = since()
		for i := range 50 {
			set(t, k, 5, time.Duration(50-i)*ms)
			set(t, k, 5, time.Duration(i+1)*3*ms)
		}
		set(t, k, 5, 7*ms)
		advance(150 * ms)
		r.checkRanOnce(t, s, 5, now+7*ms)

		// Set after the expiry is a new timeout.
		now = since()
		set(t, k, 0, 10*ms)
		advance(10*ms + s.tolerance)
		if at := r.at(0); len(at) != 2 {
			t.Errorf("key 0 set again expired %d times in all, want 2", len(at))
		} else {
			s.checkOnTime(t, "key 0 set again", at[1], now+10*ms)
		}

		// Set from expire: key 9 re-arms itself twice.
		now = since()
		set(t, k, 9, 10*ms)
		advance(40 * ms)
		if at := r.at(9); len(at) != 3 {
			t.Errorf("key 9, re-armed from expire, expired %d times, want 3", len(at))
		} else {
			for i, prev := range append([]time.Duration{now}, at[:2]...) {
				s.checkOnTime(t, fmt.Sprintf("key 9, expiry %d", i), at[i], prev+10*ms)
			}
		}
		checkLen(t, k, 0)
		k.Stop()
	})
}

// TestKeyed_Heartbeat checks the pattern Keyed is for: a key set every
// 500 ms with a 2 s timeout never expires while it beats, and expires 2 s
// after the last beat. Pushing a deadline later must not wake the driver:
// a sleeping driver wakes a few times per timeout period, not per beat.
func TestKeyed_Heartbeat(t *testing.T) {
	forEachSetup(t, keyedSetups, func(t *testing.T, s structure, opts []hourglass.Option) {
		r := newRecorder()
		k := newKeyed(t, s, r.record, opts...)
		const beat, timeout, beats = 500 * ms, 2 * time.Second, 100
		const phase = 250*ms + 7*µs // key 1 beats off the tick grid
		var last [2]time.Duration
		for range beats {
			set(t, k, 0, timeout)
			last[0] = time.Since(r.start)
			advance(phase)
			set(t, k, 1, timeout)
			last[1] = time.Since(r.start)
			advance(beat - phase)
		}
		if n := r.total(); n != 0 {
			t.Errorf("%d expiries while beating, want none", n)
		}
		if s.sleeps() {
			// A key's entry stays filed where it was until that deadline
			// comes, and is then re-filed at the latest beat + 2 s, at
			// least 1.5 s on: one wake-up per re-file and key, and on the
			// hierarchical wheel one more to cascade, plus one to start.
			refiles := uint64(2 * (beats*beat/(timeout-beat) + 1))
			cascade := uint64(0)
			if s.tolerance > 0 {
				cascade = 1
			}
			if got, limit := k.Stats().Wakeups, refiles*(1+cascade)+1; got > limit {
				t.Errorf("%d driver wake-ups for %d beats of 2 keys, want at most %d", got, beats, limit)
			}
		}
		checkLen(t, k, 2)
		advance(timeout + s.tolerance)
		r.checkRanOnce(t, s, 0, last[0]+timeout)
		r.checkRanOnce(t, s, 1, last[1]+timeout)
		checkLen(t, k, 0)
		k.Stop()
	})
}

// TestKeyed_PastDeadlines checks that Set with a zero or negative delay,
// on a new key or a pending one, expires the key promptly, waking a
// driver that sleeps until a later deadline.
func TestKeyed_PastDeadlines(t *testing.T) {
	forEachSetup(t, keyedSetups, func(t *testing.T, s structure, opts []hourglass.Option) {
		r := newRecorder()
		k := newKeyed(t, s, r.record, opts...)
		if s.sleeps() {
			set(t, k, 100, 2*time.Hour) // the driver sleeps until this
		}
		advance(time.Hour - 300*µs) // off the tick grid
		if !s.sleeps() {
			set(t, k, 100, 10*ms) // keep the driver ticking
		}
		set(t, k, 3, time.Minute)
		now := time.Since(r.start)
		for key, d := range []time.Duration{0, -time.Hour, math.MinInt64} {
			set(t, k, key, d)
			// The driver may have expired it already; if not, it is due now.
			if dl, ok := k.Deadline(key); ok && !dl.Equal(time.Now()) {
				t.Errorf("Deadline(%d) after Set(%v) = %v, want now, %v", key, d, dl, time.Now())
			}
		}
		set(t, k, 3, 0) // a pending key moved to now
		advance(s.tolerance)
		for key := range 4 {
			r.checkRanOnce(t, s, key, now)
		}
		checkLen(t, k, 1)
		k.Stop()
	})
}

// TestKeyed_FarDeadlines checks that the longest delays are held exactly
// and never fire, also for a key pushed there from a near deadline, and
// that a key pulled in from the far future fires.
func TestKeyed_FarDeadlines(t *testing.T) {
	forEachStructure(t, func(t *testing.T, s structure) {
		r := newRecorder()
		k := newKeyed(t, s, r.record)
		advance(time.Hour) // a clamp relative to the Keyed's start would show
		far := []time.Duration{math.MaxInt64, math.MaxInt64 - 1, math.MaxInt64 / 2}
		for key, d := range far {
			set(t, k, key, d)
			checkDeadline(t, k, key, time.Now().Add(d))
		}
		set(t, k, 3, ms)
		set(t, k, 3, forever)
		checkDeadline(t, k, 3, time.Now().Add(forever))
		now := time.Since(r.start)
		set(t, k, 4, forever)
		set(t, k, 4, 5*ms)

		advance(min(1000*time.Hour, s.horizon))
		r.checkRanOnce(t, s, 4, now+5*ms)
		for key := range 4 {
			r.checkNotRun(t, key)
		}
		checkLen(t, k, 4)
		checkDeadline(t, k, 3, r.start.Add(now).Add(forever))
		for key := range 4 {
			if !k.Remove(key) {
				t.Errorf("Remove(%d) of a far key = false, want true", key)
			}
		}
		checkLen(t, k, 0)
		k.Stop()
	})
}

// TestKeyed_Remove checks that Remove prevents the expiry and reports it
// once, that Deadline and Len are right in every state of a key, and that
// an id a removed key freed serves another key without a trace of the
// first.
func TestKeyed_Remove(t *testing.T) {
	forEachStructure(t, func(t *testing.T, s structure) {
		r := newRecorder()
		k := newKeyed(t, s, r.record)
		checkLen(t, k, 0)
		checkDeadline(t, k, 0, time.Time{})
		if k.Remove(0) {
			t.Error("Remove of an unknown key = true, want false")
		}

		set(t, k, 0, 10*ms)
		checkDeadline(t, k, 0, r.start.Add(10*ms))
		checkLen(t, k, 1)
		if !k.Remove(0) {
			t.Error("Remove of a pending key = false, want true")
		}
		if k.Remove(0) {
			t.Error("second Remove = true, want false")
		}
		checkDeadline(t, k, 0, time.Time{})
		checkLen(t, k, 0)

		// Pushed later, so still filed at 10 ms, then removed; its id goes
		// to key 2.
		set(t, k, 1, 10*ms)
		set(t, k, 1, 50*ms)
		if !k.Remove(1) {
			t.Error("Remove of a key pushed later = false, want true")
		}
		set(t, k, 2, 30*ms)
		checkLen(t, k, 1)
		advance(60 * ms)
		r.checkNotRun(t, 0)
		r.checkNotRun(t, 1)
		r.checkRanOnce(t, s, 2, 30*ms)
		if k.Remove(2) {
			t.Error("Remove after the expiry = true, want false")
		}
		checkDeadline(t, k, 2, time.Time{})

		// A removed key set again is a new timeout.
		set(t, k, 1, 5*ms)
		checkDeadline(t, k, 1, r.start.Add(65*ms))
		advance(5*ms + s.tolerance)
		r.checkRanOnce(t, s, 1, 65*ms)
		checkLen(t, k, 0)
		k.Stop()
	})
}

// TestKeyed_Stop checks that Stop returns exactly the keys that have not
// expired, that nothing expires or wakes after it, and that the Keyed
// refuses new work.
func TestKeyed_Stop(t *testing.T) {
	forEachSetup(t, keyedSetups, func(t *testing.T, s structure, opts []hourglass.Option) {
		r := newRecorder()
		k := newKeyed(t, s, r.record, opts...)
		const n = 100
		for i := range n {
			set(t, k, i, time.Duration(i+1)*10*ms)
		}
		set(t, k, 1000, time.Second)
		k.Remove(1000)
		set(t, k, 2000, time.Hour)
		set(t, k, 2000, 700*ms) // filed at 1 h, moved earlier
		set(t, k, 3000, 20*ms)
		set(t, k, 3000, time.Hour) // filed at 20 ms, pushed later
		advance(505 * ms)          // keys 0-49 have expired

		out := k.Stop()
		slices.Sort(out)
		want := []int{2000, 3000}
		for i := n / 2; i < n; i++ {
			want = append(want, i)
		}
		slices.Sort(want)
		if !slices.Equal(out, want) {
			t.Errorf("Stop returned %v, want %v", out, want)
		}
		for i := range n / 2 {
			r.checkRanOnce(t, s, i, time.Duration(i+1)*10*ms)
		}
		checkKeyedStopped(t, k, 0)

		wakeups := k.Stats().Wakeups
		advance(1000 * time.Hour)
		if got := r.total(); got != n/2 {
			t.Errorf("%d expiries after Stop", got-n/2)
		}
		if got := k.Stats().Wakeups; got != wakeups {
			t.Errorf("%d driver wake-ups after Stop, want none", got-wakeups)
		}
	})
}

// TestKeyed_StopUnused checks Stop on a Keyed that never had a key: it
// started no driver, and is stopped like any other.
func TestKeyed_StopUnused(t *testing.T) {
	forEachStructure(t, func(t *testing.T, s structure) {
		k := newKeyed(t, s, func(string) {})
		if out := k.Stop(); out != nil {
			t.Errorf("Stop of an unused Keyed returned %v", out)
		}
		checkKeyedStopped(t, k, "a")
		if w := k.Stats().Wakeups; w != 0 {
			t.Errorf("%d wake-ups of an unused Keyed", w)
		}
	})
}

// TestKeyed_StopFromExpire checks that Stop called from expire neither
// deadlocks nor loses or repeats a key: every key either expires once or
// is returned, the later ones are returned, and with the Inline executor
// the rest of the caller's batch is returned unexpired.
func TestKeyed_StopFromExpire(t *testing.T) {
	setups := append(slices.Clone(keyedSetups), setup{"PoolCallerRuns", func(t *testing.T) []hourglass.Option {
		p := hourglass.NewPool(1, 0)
		t.Cleanup(p.Close)
		return []hourglass.Option{hourglass.WithExecutor(p)}
	}})
	forEachSetup(t, setups, func(t *testing.T, s structure, opts []hourglass.Option) {
		var (
			r     = newRecorder()
			first atomic.Bool
			mu    sync.Mutex
			out   []int
			k     *hourglass.Keyed[int]
		)
		k = newKeyed(t, s, func(key int) {
			r.record(key)
			if first.CompareAndSwap(false, true) {
				o := k.Stop()
				mu.Lock()
				out = o
				mu.Unlock()
			}
		}, opts...)
		const batch, later = 10, 5
		for i := range batch {
			set(t, k, i, 10*ms)
		}
		for i := range later {
			set(t, k, batch+i, 20*ms)
		}
		advance(1000 * time.Hour)
		checkKeyedStopped(t, k, 0)

		mu.Lock()
		defer mu.Unlock()
		returned := make(map[int]int)
		for _, key := range out {
			returned[key]++
		}
		ran := 0
		for key := range batch + later {
			runs := len(r.at(key))
			ran += runs
			if runs+returned[key] != 1 {
				t.Errorf("key %d expired %d times and was returned by Stop %d times, want one of them once", key, runs, returned[key])
			}
			if key >= batch && returned[key] != 1 {
				t.Errorf("key %d, due after Stop, was not returned by it", key)
			}
		}
		// With goroutines, Stop takes whatever part of the batch the driver
		// has not yet handed over, which depends on the scheduler.
		if strings.HasSuffix(t.Name(), "/Inline") && ran != 1 {
			t.Errorf("%d keys expired, want only the one whose expire called Stop", ran)
		}
	})
}

// TestKeyed_StopConcurrent checks Stop called from many goroutines at
// once: one returns every pending key, the others nil.
func TestKeyed_StopConcurrent(t *testing.T) {
	forEachSetup(t, keyedSetups, func(t *testing.T, s structure, opts []hourglass.Option) {
		k := newKeyed(t, s, func(int) {}, opts...)
		const n = 100
		for i := range n {
			set(t, k, i, time.Second)
		}
		advance(ms)
		var mu sync.Mutex
		var all []int
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				out := k.Stop()
				mu.Lock()
				all = append(all, out...)
				mu.Unlock()
			})
		}
		wg.Wait()
		slices.Sort(all)
		if len(all) != n || all[0] != 0 || all[n-1] != n-1 || len(slices.Compact(all)) != n {
			t.Errorf("concurrent Stops returned %d keys in all, want each of the %d pending once", len(all), n)
		}
		checkKeyedStopped(t, k, 0)
	})
}

// TestKeyed_MaxPending checks that the limit counts keys, not Sets: a new
// key over it is refused and leaves no trace, a pending key still moves,
// and places come back as keys expire or are removed.
func TestKeyed_MaxPending(t *testing.T) {
	forEachStructure(t, func(t *testing.T, s structure) {
		r := newRecorder()
		k := newKeyed(t, s, r.record, hourglass.WithMaxPending(3))
		tooMany := func(key int) {
			t.Helper()
			if err := k.Set(key, ms); !errors.Is(err, hourglass.ErrTooManyPending) {
				t.Errorf("Set(%d) of a new key at the limit = %v, want ErrTooManyPending", key, err)
			}
			checkDeadline(t, k, key, time.Time{})
			checkLen(t, k, 3)
		}
		set(t, k, 0, 50*ms)
		set(t, k, 1, 50*ms)
		set(t, k, 2, 50*ms)
		tooMany(3)
		set(t, k, 0, 5*ms) // pending keys move at the limit
		set(t, k, 1, 40*ms)
		checkLen(t, k, 3)

		k.Remove(2)
		set(t, k, 3, 50*ms)
		tooMany(4)
		advance(5*ms + s.tolerance) // key 0 expires
		r.checkRanOnce(t, s, 0, 5*ms)
		set(t, k, 4, 50*ms)
		tooMany(5)

		// SetMany stops at the first key it cannot set.
		if n, err := k.SetMany([]int{1, 3, 5, 4}, 60*ms); n != 2 || !errors.Is(err, hourglass.ErrTooManyPending) {
			t.Errorf("SetMany([1 3 5 4]) at the limit = %d, %v; want 2, ErrTooManyPending", n, err)
		}
		checkDeadline(t, k, 1, time.Now().Add(60*ms))
		checkDeadline(t, k, 3, time.Now().Add(60*ms))
		checkDeadline(t, k, 4, r.start.Add(5*ms+s.tolerance+50*ms))
		checkDeadline(t, k, 5, time.Time{})
		checkLen(t, k, 3)

		out := k.Stop()
		slices.Sort(out)
		if !slices.Equal(out, []int{1, 3, 4}) {
			t.Errorf("Stop returned %v, want [1 3 4]", out)
		}
		r.checkNotRun(t, 3)
		r.checkNotRun(t, 5)
	})
}

// TestKeyed_Panics checks that a panic in expire goes to the panic handler
// with its value, and that the Keyed carries on: the rest of the batch,
// later keys and the same keys set again all expire.
func TestKeyed_Panics(t *testing.T) {
	forEachSetup(t, keyedSetups, func(t *testing.T, s structure, opts []hourglass.Option) {
		var log panicLog
		r := newRecorder()
		k := newKeyed(t, s, func(key int) {
			switch key {
			case 0:
				panic("boom")
			case 1:
				panic(fmt.Errorf("wrapped: %w", errBoom))
			case 2:
				panic(nil)
			}
			r.record(key)
		}, append(opts, hourglass.WithPanicHandler(log.handle))...)
		for key := range 4 {
			set(t, k, key, ms) // 3 shares the batch of the panics
		}
		set(t, k, 4, 2*ms)
		advance(2*ms + s.tolerance)
		r.checkRanOnce(t, s, 3, ms)
		r.checkRanOnce(t, s, 4, 2*ms)
		set(t, k, 0, ms)
		set(t, k, 5, ms)
		advance(ms + s.tolerance)
		r.checkRanOnce(t, s, 5, 2*ms+s.tolerance+ms)
		checkLen(t, k, 0)
		k.Stop()

		panics, strs, sawNil, sawErr := log.sorted()
		if !slices.Equal(strs, []string{"boom", "boom"}) || !sawNil || !sawErr || len(panics) != 4 {
			t.Errorf("panic handler got %v, want \"boom\" twice, a *runtime.PanicNilError and errBoom", panics)
		}
	})
}

// TestKeyed_Errors checks that a nil expire func and invalid options are
// reported by every Set as an error starting "hourglass: ", and that such
// a Keyed holds nothing and stops cleanly.
func TestKeyed_Errors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		check := func(name string, k *hourglass.Keyed[int], mention string) {
			t.Helper()
			for range 2 {
				err := k.Set(1, ms)
				if err == nil || !strings.HasPrefix(err.Error(), "hourglass: ") || !strings.Contains(err.Error(), mention) {
					t.Errorf("%s: Set = %v, want an error starting \"hourglass: \" that mentions %s", name, err, mention)
				}
				if errors.Is(err, hourglass.ErrStopped) || errors.Is(err, hourglass.ErrTooManyPending) {
					t.Errorf("%s: Set = %v, want the configuration error", name, err)
				}
				if n, err2 := k.SetMany([]int{1, 2}, ms); n != 0 || err2 == nil || err2.Error() != err.Error() {
					t.Errorf("%s: SetMany = %d, %v; want 0 and Set's error %v", name, n, err2, err)
				}
			}
			checkLen(t, k, 0)
			checkDeadline(t, k, 1, time.Time{})
			if k.Remove(1) {
				t.Errorf("%s: Remove = true", name)
			}
			if out := k.Stop(); out != nil {
				t.Errorf("%s: Stop = %v, want nil", name, out)
			}
			if st := k.Stats(); st.Drivers != 0 || st.Wakeups != 0 {
				t.Errorf("%s: Stats() = %+v, want no driver", name, st)
			}
		}
		check("NewKeyed(nil)", hourglass.NewKeyed[int](nil), "nil expire")

		expire := func(int) {}
		for _, c := range []struct {
			name    string
			opt     hourglass.Option
			mention string
		}{
			{"WithHierarchicalWheel(1ns)", hourglass.WithHierarchicalWheel(time.Nanosecond), "WithHierarchicalWheel"},
			{"WithHierarchicalWheel(0)", hourglass.WithHierarchicalWheel(0), "WithHierarchicalWheel"},
			{"WithHashedWheel(1ms, 0)", hourglass.WithHashedWheel(ms, 0), "WithHashedWheel"},
			{"WithHashedWheel(0, 8)", hourglass.WithHashedWheel(0, 8), "WithHashedWheel"},
			{"WithMaxPending(-1)", hourglass.WithMaxPending(-1), "WithMaxPending"},
			{"WithExecutor(nil)", hourglass.WithExecutor(nil), "WithExecutor"},
			{"WithPanicHandler(nil)", hourglass.WithPanicHandler(nil), "WithPanicHandler"},
			{"WithShards(0)", hourglass.WithShards(0), "WithShards"},
			// A Keyed is not sharded: WithShards is rejected, not ignored.
			{"WithShards(1)", hourglass.WithShards(1), "WithShards"},
			{"WithShards(4)", hourglass.WithShards(4), "WithShards"},
		} {
			// The invalid option first and last, so a later valid one does
			// not hide it; with a nil expire too, the option's error wins.
			check(c.name+" first", hourglass.NewKeyed(expire, c.opt, hourglass.WithHeap()), c.mention)
			check(c.name+" last", hourglass.NewKeyed(expire, hourglass.WithHeap(), c.opt), c.mention)
			check(c.name+" and nil expire", hourglass.NewKeyed[int](nil, c.opt), c.mention)
		}
	})
}

// TestKeyed_Idle checks that a Keyed with nothing pending costs nothing:
// no driver before the first key, no wake-up once every key has expired
// or been removed, and, for the structures that sleep until the next
// deadline, a handful of wake-ups for a key an hour away.
func TestKeyed_Idle(t *testing.T) {
	forEachStructure(t, func(t *testing.T, s structure) {
		r := newRecorder()
		k := newKeyed(t, s, r.record)
		advance(1000 * time.Hour)
		if st := k.Stats(); st.Wakeups != 0 || st.Drivers != 0 || st.Shards != 1 || st.Structure == "" {
			t.Errorf("empty Keyed: Stats() = %+v, want no wake-ups, no driver, one shard and a structure", st)
		}

		base := time.Since(r.start)
		if s.sleeps() {
			// One key an hour away: the driver wakes to start, at the
			// deadline and after handing it over, and the hierarchical
			// wheel at most three times more to cascade (as for a Timer).
			cascades := uint64(0)
			if s.tolerance > 0 {
				cascades = 3
			}
			set(t, k, 0, time.Hour)
			if d := k.Stats().Drivers; d != 1 {
				t.Errorf("Stats().Drivers = %d with a key pending, want 1", d)
			}
			advance(time.Hour + s.tolerance)
			r.checkRanOnce(t, s, 0, base+time.Hour)
			if got, limit := k.Stats().Wakeups, 3+cascades; got > limit {
				t.Errorf("%d wake-ups for one key an hour away, want at most %d", got, limit)
			}
		} else {
			// The hashed wheel wakes once per turn of its 8 slots.
			set(t, k, 0, 100*ms)
			advance(100*ms + s.tolerance)
			r.checkRanOnce(t, s, 0, base+100*ms)
			if got, limit := k.Stats().Wakeups, uint64(100/8+1+2); got > limit {
				t.Errorf("%d wake-ups for a key 100 ticks away, want at most %d", got, limit)
			}
		}
		before := k.Stats().Wakeups
		advance(1000 * time.Hour)
		if n := k.Stats().Wakeups - before; n != 0 {
			t.Errorf("%d wake-ups in 1000 h after the key expired, want none", n)
		}

		// Removed keys cost at most the wake-up that setting the first
		// took and the one the driver had planned for them.
		before = k.Stats().Wakeups
		for key := range 10 {
			set(t, k, key, time.Hour)
		}
		for key := range 10 {
			k.Remove(key)
		}
		advance(1000 * time.Hour)
		if n := k.Stats().Wakeups - before; n > 2 {
			t.Errorf("%d wake-ups for keys removed at once, want at most 2", n)
		}
		before = k.Stats().Wakeups
		advance(1000 * time.Hour)
		if n := k.Stats().Wakeups - before; n != 0 {
			t.Errorf("%d wake-ups in 1000 h with every key removed, want none", n)
		}
		k.Stop()
	})
}

// keyLog counts the expiries of each key. It is safe for concurrent use.
type keyLog[K comparable] struct {
	mu sync.Mutex
	n  map[K]int
}

func newKeyLog[K comparable]() *keyLog[K] { return &keyLog[K]{n: make(map[K]int)} }

func (l *keyLog[K]) expire(key K) {
	l.mu.Lock()
	l.n[key]++
	l.mu.Unlock()
}

func (l *keyLog[K]) count(key K) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n[key]
}

// endpoint is a key without pointers; session is one with a string in it.
type (
	endpoint struct {
		ip   [4]byte
		port uint16
	}
	session struct {
		user string
		id   int
	}
)

// checkKeyType runs many keys of one type through a Keyed: more than a
// page of the Keyed's tables (4096 ids), some removed, some moved, some
// pending at Stop, with ids freed and reused, and checks that each key
// ends the way it should, with its own identity.
func checkKeyType[K comparable](t *testing.T, s structure, key func(i int) K) {
	const n = 6000
	l := newKeyLog[K]()
	k := newKeyed(t, s, l.expire)
	for i := range n {
		set(t, k, key(i), time.Duration(i%50+1)*ms)
	}
	for i := 0; i < n; i += 3 {
		if !k.Remove(key(i)) {
			t.Fatalf("Remove(%v) = false", key(i))
		}
	}
	for i := 1; i < n; i += 3 {
		set(t, k, key(i), time.Hour) // pending at Stop
	}
	for i := n; i < n+n/3; i++ {
		set(t, k, key(i), 100*ms) // reuses the removed keys' ids
	}
	checkLen(t, k, n-(n+2)/3+n/3)
	checkDeadline(t, k, key(4), time.Now().Add(time.Hour))
	advance(100*ms + s.tolerance)

	stopped := make(map[K]int)
	for _, kk := range k.Stop() {
		stopped[kk]++
	}
	for i := range n + n/3 {
		var wantExpired, wantStopped int
		switch {
		case i >= n || i%3 == 2:
			wantExpired = 1
		case i%3 == 1:
			wantStopped = 1
		}
		if got, st := l.count(key(i)), stopped[key(i)]; got != wantExpired || st != wantStopped {
			t.Fatalf("key %v expired %d times and was returned by Stop %d times, want %d and %d", key(i), got, st, wantExpired, wantStopped)
		}
	}
	if len(stopped) != (n+1)/3 {
		t.Errorf("Stop returned %d keys, want %d", len(stopped), (n+1)/3)
	}
}

// TestKeyed_KeyTypes checks keys of several types: strings, which hold
// pointers, built at run time; a struct without pointers; a struct with a
// string.
func TestKeyed_KeyTypes(t *testing.T) {
	forEachStructure(t, func(t *testing.T, s structure) {
		checkKeyType(t, s, func(i int) string { return "conn-" + strconv.Itoa(i) })
		checkKeyType(t, s, func(i int) endpoint {
			return endpoint{ip: [4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}, port: uint16(i % 7)}
		})
		checkKeyType(t, s, func(i int) session { return session{user: "user" + strconv.Itoa(i%97), id: i} })
	})
}

// TestKeyed_ReleasesKeys checks that a Keyed keeps no reference to a key
// whose timeout has ended, removed, expired or returned by Stop, so that
// whatever the key points to can be collected.
func TestKeyed_ReleasesKeys(t *testing.T) {
	forEachStructure(t, func(t *testing.T, s structure) {
		k := newKeyed(t, s, func(*session) {}, hourglass.WithExecutor(hourglass.Inline))
		ws := setPointerKeys(t, k)
		advance(10 * ms) // the second key expires
		k.Stop()         // returns the third, which the test drops
		runtime.GC()
		for i, w := range ws {
			if w.Value() != nil {
				t.Errorf("key %d is still reachable after its timeout ended", i)
			}
		}
	})
}

// setPointerKeys sets three fresh pointer keys on k, removes the first
// and returns weak pointers to them, keeping no strong ones.
// The keys point to sessions, which hold a pointer and so are not tiny
// allocations, whose block another object could keep alive.
func setPointerKeys(t *testing.T, k *hourglass.Keyed[*session]) []weak.Pointer[session] {
	t.Helper()
	var ws []weak.Pointer[session]
	for i, d := range []time.Duration{time.Hour, ms, time.Hour} {
		p := &session{user: strconv.Itoa(i), id: i}
		ws = append(ws, weak.Make(p))
		set(t, k, p, d)
		if i == 0 && !k.Remove(p) {
			t.Error("Remove of a pointer key = false")
		}
	}
	return ws
}

// TestKeyed_Model drives a Keyed with a random walk of Sets, Removes and
// waits over a few keys, with the Inline executor, and checks each step
// against a model of every key's deadline: each expiry comes from a
// pending key, never early and at most a tick late; no key is overdue;
// Len, Deadline and Remove agree with the model; and Stop returns what the
// model still holds.
func TestKeyed_Model(t *testing.T) {
	forEachStructure(t, func(t *testing.T, s structure) {
		seed := rand.Uint64()
		rng := rand.New(rand.NewPCG(seed, 0))
		step := 0
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("seed %d, step %d: %s", seed, step, fmt.Sprintf(format, args...))
		}
		type expiry struct {
			key int
			at  time.Time
		}
		var mu sync.Mutex
		var expired []expiry
		k := newKeyed(t, s, func(key int) {
			mu.Lock()
			expired = append(expired, expiry{key, time.Now()})
			mu.Unlock()
		}, hourglass.WithExecutor(hourglass.Inline))

		// A hashed wheel's driver wakes every turn while it holds keys:
		// keep its walk short in virtual time.
		longWait := 2 * time.Second
		if !s.sleeps() {
			longWait = 50 * ms
		}
		delay := func() time.Duration {
			switch p := rng.IntN(20); {
			case p == 0:
				return -randDur(rng, time.Second)
			case p == 1:
				return 0
			case p == 2:
				return forever
			case p < 12:
				return randDur(rng, 20*ms)
			default:
				return randDur(rng, 3*time.Second)
			}
		}
		model := make(map[int]time.Time)
		settle := func() {
			synctest.Wait()
			mu.Lock()
			got := expired
			expired = nil
			mu.Unlock()
			for _, e := range got {
				want, ok := model[e.key]
				switch {
				case !ok:
					fail("key %d expired with no timeout pending", e.key)
				case e.at.Before(want) || e.at.After(want.Add(s.tolerance)):
					fail("key %d due at %v expired at %v", e.key, want, e.at)
				}
				delete(model, e.key)
			}
			now := time.Now()
			for key, want := range model {
				if !now.Before(want.Add(s.tolerance)) {
					fail("key %d due at %v has not expired at %v", key, want, now)
				}
			}
		}

		const keys, steps = 40, 3000
		for step = range steps {
			key := rng.IntN(keys)
			switch op := rng.IntN(10); {
			case op < 4:
				d := delay()
				if err := k.Set(key, d); err != nil {
					fail("Set(%d, %v): %v", key, d, err)
				}
				model[key] = time.Now().Add(max(d, 0))
			case op < 6:
				many := make([]int, rng.IntN(5))
				for i := range many {
					many[i] = rng.IntN(keys)
				}
				d := delay()
				if n, err := k.SetMany(many, d); n != len(many) || err != nil {
					fail("SetMany(%v, %v) = %d, %v", many, d, n, err)
				}
				for _, key := range many {
					model[key] = time.Now().Add(max(d, 0))
				}
			case op < 7:
				_, want := model[key]
				if got := k.Remove(key); got != want {
					fail("Remove(%d) = %v, want %v", key, got, want)
				}
				delete(model, key)
			case op < 9:
				time.Sleep(randDur(rng, 30*ms))
			default:
				time.Sleep(randDur(rng, longWait))
			}
			settle()
			if n := k.Len(); n != len(model) {
				fail("Len() = %d, want %d", n, len(model))
			}
			probe := rng.IntN(keys)
			got, ok := k.Deadline(probe)
			if want, wok := model[probe]; ok != wok || !got.Equal(want) {
				fail("Deadline(%d) = %v, %v; want %v, %v", probe, got, ok, want, wok)
			}
		}
		out := k.Stop()
		slices.Sort(out)
		if want := sortedKeys(model); !slices.Equal(out, want) {
			fail("Stop returned %v, want %v", out, want)
		}
	})
}

// churn has workers goroutines Set and Remove random keys of a small key
// space on the Keyed that newK makes, one of them calling Stop half way,
// and checks that each timeout of each key ended exactly one way: it
// expired once, one Remove returned true, or Stop returned it.
//
// That takes knowing which Sets started a timeout ("armed" it) and which
// moved a pending one. Set does not say, so the workers find out first,
// holding the key's lock so that no other worker touches the key: if
// Deadline reports no timeout, the Set arms one (nothing but a Set adds
// one); if it reports one due more than margin from now, it cannot expire
// before the Set, which moves it. A timeout due sooner may be expiring at
// that very moment, so the worker removes it first (counting the removal
// if it succeeds) and the Set arms. Inside a synctest bubble margin is 0:
// virtual time cannot pass while the worker runs. On the real clock it is
// half an hour, so only far timeouts are ever moved.
//
// pause is called between operations, outside the key's lock, to let time
// pass.
func churn(t *testing.T, newK func(expire func(int)) *hourglass.Keyed[int], margin time.Duration, pause func(rng *rand.Rand)) {
	const workers, ops, keys = 8, 1000, 16
	var (
		expired [keys]atomic.Int64
		runs    = newRunCounter()
		locks   [keys]sync.Mutex
		armed   [keys]int64 // guarded by locks
		removed [keys]int64 // guarded by locks
		out     []int
		done    atomic.Int64
		stopper = make(chan struct{}) // closed once Stop has returned
	)
	k := newK(func(key int) {
		expired[key].Add(1)
		runs.ran()
	})
	delay := func(rng *rand.Rand) time.Duration {
		switch p := rng.IntN(20); {
		case p < 2:
			return -randDur(rng, ms)
		case p < 14:
			return randDur(rng, 3*ms)
		case p < 17:
			return randDur(rng, 30*ms)
		default:
			return time.Hour + randDur(rng, time.Hour)
		}
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), rand.Uint64()))
			for range ops {
				if done.Add(1) == workers*ops/2 {
					go func() { // Stop half way, racing the workers
						defer close(stopper)
						out = k.Stop()
					}()
				}
				key := rng.IntN(keys)
				locks[key].Lock()
				switch op := rng.IntN(10); {
				case op < 6:
					arms := true
					if dl, ok := k.Deadline(key); ok {
						if dl.After(time.Now().Add(margin)) {
							arms = false
						} else if k.Remove(key) {
							removed[key]++
						}
					}
					set := func() error { return k.Set(key, delay(rng)) }
					if op < 2 { // the same through SetMany, a key at a time
						set = func() error {
							_, err := k.SetMany([]int{key}, delay(rng))
							return err
						}
					}
					switch err := set(); {
					case err == nil:
						if arms {
							armed[key]++
						}
					case !errors.Is(err, hourglass.ErrStopped):
						t.Errorf("Set: %v", err)
					}
				case op < 9:
					if k.Remove(key) {
						removed[key]++
					}
				default:
					k.Deadline(key)
					k.Len()
					k.Stats()
				}
				locks[key].Unlock()
				pause(rng)
			}
		})
	}
	wg.Wait()
	<-stopper
	checkKeyedStopped(t, k, 0)

	stopped := make(map[int]int64)
	var wantRuns int64
	for _, key := range out {
		stopped[key]++
	}
	for key := range keys {
		wantRuns += armed[key] - removed[key] - stopped[key]
	}
	runs.waitFor(t, wantRuns) // expire calls handed over before Stop
	var total [3]int64
	for key := range keys {
		got := expired[key].Load() + removed[key] + stopped[key]
		if got != armed[key] {
			t.Errorf("key %d armed %d times: expired %d times, removed %d times, returned by Stop %d times",
				key, armed[key], expired[key].Load(), removed[key], stopped[key])
		}
		total[0] += expired[key].Load()
		total[1] += removed[key]
		total[2] += stopped[key]
	}
	if !t.Failed() {
		t.Logf("%d expiries, %d removals, %d returned by Stop", total[0], total[1], total[2])
	}
}

// TestKeyed_ConcurrentVirtual runs churn in a synctest bubble over every
// structure and executor: goroutines that truly run in parallel, for the
// race detector, in virtual time, which lets a Set on any pending key not
// yet due count as a move.
func TestKeyed_ConcurrentVirtual(t *testing.T) {
	forEachSetup(t, keyedSetups, func(t *testing.T, s structure, opts []hourglass.Option) {
		churn(t, func(expire func(int)) *hourglass.Keyed[int] {
			return newKeyed(t, s, expire, opts...)
		}, 0, func(rng *rand.Rand) {
			if rng.IntN(5) == 0 {
				time.Sleep(randDur(rng, 2*ms))
			}
		})
	})
}

// TestKeyed_ConcurrentRealClock runs churn on the real clock, outside any
// bubble, over every structure and executor.
func TestKeyed_ConcurrentRealClock(t *testing.T) {
	forEachConcurrent(t, func(t *testing.T, s structure, opts []hourglass.Option, closeAfterStop func()) {
		defer closeAfterStop()
		churn(t, func(expire func(int)) *hourglass.Keyed[int] {
			return hourglass.NewKeyed(expire, append([]hourglass.Option{s.opt}, opts...)...)
		}, 30*time.Minute, func(rng *rand.Rand) {
			switch rng.IntN(50) {
			case 0:
				time.Sleep(100 * µs)
			case 1:
				runtime.Gosched()
			}
		})
	})
}
