package hourglass_test

// Keyed's pending limit, panics in expire, and the errors of bad
// arguments and options.

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hourglass-go/hourglass"
)

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
