package hourglass_test

// Keyed's scheduling, firing, Remove and idleness; the suite's helpers are
// in keyed_harness_test.go.

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass"
)

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
// applying them together (see batchSize in driver.go), with nothing in
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
// the batches Set holds back (see batchSize in driver.go), with a key listed
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
