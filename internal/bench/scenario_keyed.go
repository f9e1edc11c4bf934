package bench

import (
	"math/rand/v2"
	"runtime"
	"time"

	"github.com/hourglass-go/hourglass"
)

// keyedScenario measures the operation behind connection idle timeouts
// and heartbeats: every event on a key pushes that key's one pending
// timeout back. hourglass's Keyed does it with a Set; with Go's runtime
// timers it takes a map[K]*time.Timer and a Reset. Keyed runs over the
// hierarchical wheel, its default and the structure it is built around
// (a queue.KeyQueue, see hourglass.Keyed); the other hourglass
// structures get no job here.
var keyedScenario = Scenario{
	Name: "keyed",
	Doc:  "with n keys, each with one pending timeout 30 s away, one goroutine moves a random key's timeout 30 s ahead in a loop: hourglass Keyed[uint64].Set (hierarchical only) against a map[uint64]*time.Timer and Reset (no lock around the map); cost per move, then per key moving batches of 64 random keys (one Keyed.SetMany; for the runtime, which has no batch form, a Reset each), and heap per pending key, map included (HeapAlloc after setting n keys minus before, over n, each after a GC)",
	jobs: func(c *Config, sts []Structure) []Job {
		var keyed []Structure
		for _, s := range sts {
			if s.Name == "hierarchical" || s.option == nil {
				keyed = append(keyed, s)
			}
		}
		return perSize("keyed", keyed, c.Sizes, func(Structure, int) string { return "" }, func(s Structure, n int) Result {
			return keyedMoves(s, n, c.Budget)
		})
	},
}

// keyedTimeout is where each key's timeout is set and moved to.
const keyedTimeout = 30 * time.Second

// keyedTimers is one timeout per uint64 key: a Keyed, or the runtime's
// timers in a map.
type keyedTimers interface {
	// set schedules key's timeout d from now, or moves the pending one.
	set(key uint64, d time.Duration) error
	// setMany does what set does for each of keys.
	setMany(keys []uint64, d time.Duration) error
	stop()
}

// newKeyedTimers makes s's keyed timers, configured for about n keys.
func (s Structure) newKeyedTimers(n int) keyedTimers {
	if s.option == nil {
		return runtimeKeyed{}
	}
	return hourglassKeyed{hourglass.NewKeyed(func(uint64) {}, s.option(n), hourglass.WithExecutor(hourglass.Inline))}
}

type hourglassKeyed struct{ k *hourglass.Keyed[uint64] }

func (h hourglassKeyed) set(key uint64, d time.Duration) error { return h.k.Set(key, d) }
func (h hourglassKeyed) stop()                                 { h.k.Stop() }

func (h hourglassKeyed) setMany(keys []uint64, d time.Duration) error {
	_, err := h.k.SetMany(keys, d)
	return err
}

// runtimeKeyed is the usual way with runtime timers. The callback would
// delete its key under a lock in a real program; here no timeout lives to
// fire, so neither the callback nor the lock is needed.
type runtimeKeyed map[uint64]*time.Timer

func (m runtimeKeyed) set(key uint64, d time.Duration) error {
	if t, ok := m[key]; ok {
		t.Reset(d)
		return nil
	}
	m[key] = time.AfterFunc(d, noop)
	return nil
}

func (m runtimeKeyed) setMany(keys []uint64, d time.Duration) error {
	for _, key := range keys {
		m.set(key, d)
	}
	return nil
}

func (m runtimeKeyed) stop() {
	for _, t := range m {
		t.Stop()
	}
}

// keyedBatch is how many keys a batch move moves.
const keyedBatch = 64

// keyedMoves sets n keys on s, reads the heap they take, then measures
// moves of random keys for budget, one at a time and then in batches of
// keyedBatch.
func keyedMoves(s Structure, n int, budget time.Duration) Result {
	// Drawn before anything is measured: 2^22, so that the moves reach
	// keys all over the storage (a short list read in a cycle would move
	// the same few keys, whose entries stay in cache).
	picks := make([]uint64, 1<<22)
	for i := range picks {
		picks[i] = uint64(rand.IntN(n))
	}
	var m0, m1 runtime.MemStats
	quiesce()
	runtime.ReadMemStats(&m0)
	t := s.newKeyedTimers(n)
	defer t.stop()
	for key := range uint64(n) {
		if err := t.set(key, keyedTimeout); err != nil {
			return failed(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)

	var err error
	i := 0
	st := measureOps(budget, func() {
		if e := t.set(picks[i&(len(picks)-1)], keyedTimeout); e != nil {
			err = e
		}
		i++
	})
	if err != nil {
		return failed(err)
	}
	i = 0
	sb := measureOps(budget, func() {
		j := i * keyedBatch & (len(picks) - 1) // len(picks) is a multiple of keyedBatch
		if e := t.setMany(picks[j:j+keyedBatch], keyedTimeout); e != nil {
			err = e
		}
		i++
	})
	if err != nil {
		return failed(err)
	}
	var r Result
	r.add("ns/op", unitNs, st.ns)
	r.add("allocs/op", unitAllocs, st.allocs)
	r.add("batch-64 ns/key", unitNs, sb.ns/keyedBatch)
	r.add("B/key", unitBytes, (float64(m1.HeapAlloc)-float64(m0.HeapAlloc))/float64(n))
	r.add("ops", unitCount, float64(st.ops))
	return r
}
