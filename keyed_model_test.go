package hourglass_test

// Keyed against a model (a random walk) and under concurrent use (churn).

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hourglass-go/hourglass"
)

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
