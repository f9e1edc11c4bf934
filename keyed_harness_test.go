package hourglass_test

// The Keyed suite. It reuses the conformance machinery of harness_test.go:
// every test runs over the four structures of the structures table, most
// over the three executors too, inside synctest bubbles whose virtual time
// makes "never early, at most one tick late" exact, and whose end proves
// that Stop leaves no goroutine behind. This file holds the suite's
// helpers; the tests are in keyed_test.go (scheduling, firing, Remove,
// idleness), keyed_stop_test.go, keyed_errors_test.go (the pending limit,
// panics, errors), keyed_keys_test.go (key types) and keyed_model_test.go
// (TestKeyed_Model checks a random walk against a model; the
// TestKeyed_Concurrent tests check the exactly-once accounting of each
// key's timeouts under concurrent use).

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

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
