package queue_test

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/queue"
)

// keyModel is the reference a KeyQueue is checked against: each queued
// key's deadline.
type keyModel map[uint64]uint64

// due takes out of m and returns, sorted, the keys whose deadline's tick
// has been reached at now.
func (m keyModel) due(now, tick uint64) []uint64 {
	var out []uint64
	for k, when := range m {
		if now == math.MaxUint64 || ceil(when, tick) <= now/tick {
			out = append(out, k)
			delete(m, k)
		}
	}
	slices.Sort(out)
	return out
}

// checkKeyQueue compares w with m key by key, then runs the invariant
// checker.
func checkKeyQueue(t *testing.T, step int, w *queue.KeyQueue[uint64], m keyModel, keys uint64) {
	t.Helper()
	if w.Len() != len(m) {
		t.Fatalf("step %d: Len = %d, want %d", step, w.Len(), len(m))
	}
	for k := range keys {
		when, ok := w.When(k)
		want, wantOK := m[k]
		if ok != wantOK || when != want {
			t.Fatalf("step %d: When(%d) = %d, %v, want %d, %v", step, k, when, ok, want, wantOK)
		}
	}
	if err := queue.Verify(w); err != nil {
		t.Fatalf("step %d: %v", step, err)
	}
}

// keyQueueRun drives a KeyQueue and its keyModel side by side, checking
// each operation's result against the model and then every key and the
// invariants.
type keyQueueRun struct {
	t    *testing.T
	w    *queue.KeyQueue[uint64]
	m    keyModel
	tick uint64
	now  uint64
	keys uint64 // keys are below this
	step int
}

func (r *keyQueueRun) set(k, when uint64) {
	r.t.Helper()
	_, had := r.m[k]
	if added := r.w.Set(k, when); added == had {
		r.t.Fatalf("step %d: Set(%d) added = %v with the key queued = %v", r.step, k, added, had)
	}
	r.m[k] = when
}

func (r *keyQueueRun) remove(k uint64) {
	r.t.Helper()
	_, had := r.m[k]
	if got := r.w.Remove(k); got != had {
		r.t.Fatalf("step %d: Remove(%d) = %v, want %v", r.step, k, got, had)
	}
	delete(r.m, k)
}

func (r *keyQueueRun) advance(by uint64) {
	r.t.Helper()
	r.now += by
	var fired []uint64
	r.w.Advance(r.now, func(k uint64) { fired = append(fired, k) })
	slices.Sort(fired)
	if want := r.m.due(r.now, r.tick); !slices.Equal(fired, want) {
		r.t.Fatalf("step %d: Advance(%d) fired %v, want %v", r.step, r.now, fired, want)
	}
}

func (r *keyQueueRun) check() {
	r.t.Helper()
	checkKeyQueue(r.t, r.step, r.w, r.m, r.keys)
	r.step++
}

// TestKeyQueue_Model runs random streams of Set (new keys, and existing
// ones moved earlier and later), Remove and Advance against keyModel,
// with tables small enough to grow and split all the time, and checks
// every key and the invariants after each step.
//
// It runs over the hierarchical wheel with two ticks, and over the other
// three structures with tables of 3 bits: the exact ones fire at the
// deadline itself, a tick of 1 ns.
func TestKeyQueue_Model(t *testing.T) {
	type config struct {
		name  string
		s     queue.Structure
		tick  time.Duration
		bits  []uint
		seeds uint64
	}
	configs := []config{
		{"HierarchicalWheel/tick=1ns", queue.HierarchicalWheel(time.Nanosecond), time.Nanosecond, []uint{3, 5, 16}, 4},
		{"HierarchicalWheel/tick=1ms", queue.HierarchicalWheel(time.Millisecond), time.Millisecond, []uint{3, 5, 16}, 4},
		{"HashedWheel/tick=1ms/slots=64", queue.HashedWheel(time.Millisecond, 64), time.Millisecond, []uint{3}, 1},
		{"Heap", queue.Heap(), time.Nanosecond, []uint{3}, 1},
		{"SortedList", queue.SortedList(), time.Nanosecond, []uint{3}, 1},
	}
	for _, c := range configs {
		for _, bits := range c.bits {
			for seed := range c.seeds {
				t.Run(fmt.Sprintf("%s/bits=%d/seed=%d", c.name, bits, seed), func(t *testing.T) {
					t.Parallel()
					runKeyQueueModel(t, queue.NewKeyQueueBits[uint64](c.s, bits), uint64(c.tick), rand.New(rand.NewPCG(seed, 11)), 3000)
				})
			}
		}
	}
}

func runKeyQueueModel(t *testing.T, w *queue.KeyQueue[uint64], tick uint64, rng *rand.Rand, steps int) {
	r := &keyQueueRun{t: t, w: w, m: keyModel{}, tick: tick, keys: 400}
	span := func() uint64 {
		return uint64(rng.Int64N(int64([]time.Duration{time.Millisecond, time.Second, time.Hour}[rng.IntN(3)])))
	}
	for range steps {
		k := rng.Uint64N(r.keys)
		switch op := rng.IntN(11); {
		case op == 10:
			// A batch, with repeated keys, as Set would do them in turn.
			var sets []queue.KeyDeadline[uint64]
			for range rng.IntN(150) {
				kd := queue.KeyDeadline[uint64]{Key: rng.Uint64N(r.keys), When: r.now + span()}
				sets = append(sets, kd)
				r.m[kd.Key] = kd.When
			}
			w.SetAll(sets)
		case op < 6:
			r.set(k, r.now+span())
		case op < 8:
			r.remove(k)
		default:
			r.advance(span() / 4)
		}
		r.check()
	}
	var drained []uint64
	w.Drain(func(k uint64) { drained = append(drained, k) })
	slices.Sort(drained)
	if want := slices.Sorted(maps.Keys(r.m)); !slices.Equal(drained, want) {
		t.Fatalf("Drain gave %d keys, want %d", len(drained), len(want))
	}
	r.m = keyModel{}
	r.check()
	if _, ok := w.Next(); ok {
		t.Fatal("Next reports work after Drain")
	}
}

// TestKeyQueue_FireReenters sets (with Set and with SetAll) and removes
// keys from inside fire, enough of them to grow and split tables while
// entries wait in the firing list, which a rebuild must relink.
func TestKeyQueue_FireReenters(t *testing.T) {
	w := queue.NewKeyQueueBits[uint64](queue.HierarchicalWheel(time.Millisecond), 4)
	m := keyModel{}
	for k := range uint64(50) {
		w.Set(k, uint64(time.Millisecond))
		m[k] = uint64(time.Millisecond)
	}
	next := uint64(1000)
	var fired []uint64
	w.Advance(uint64(time.Millisecond), func(k uint64) {
		fired = append(fired, k)
		// New keys due later (tables grow and split), then the fired key
		// again: one by one, or, for every other key, in one SetAll.
		var sets []queue.KeyDeadline[uint64]
		for range 5 {
			sets = append(sets, queue.KeyDeadline[uint64]{Key: next, When: uint64(time.Hour)})
			m[next] = uint64(time.Hour)
			next++
		}
		if k%2 == 0 && k+1 < 50 { // a key still in the firing list
			if !w.Remove(k + 1) {
				t.Fatalf("Remove(%d) from fire found nothing", k+1)
			}
			delete(m, k+1)
		}
		sets = append(sets, queue.KeyDeadline[uint64]{Key: k, When: 2 * uint64(time.Millisecond)})
		m[k] = 2 * uint64(time.Millisecond)
		if k%4 == 0 {
			w.SetAll(sets)
		} else {
			for _, kd := range sets {
				w.Set(kd.Key, kd.When)
			}
		}
	})
	if len(fired) != 25 {
		t.Fatalf("fired %d keys, want the 25 not removed", len(fired))
	}
	if tables, depth := w.Tables(); tables < 8 || depth < 3 {
		t.Fatalf("%d tables at depth %d: the test meant to split", tables, depth)
	}
	checkKeyQueue(t, 0, w, m, next)
	var again []uint64
	w.Advance(2*uint64(time.Millisecond), func(k uint64) { again = append(again, k) })
	slices.Sort(again)
	if !slices.Equal(again, fired) {
		t.Fatalf("second Advance fired %v, want %v", again, fired)
	}
}

// TestKeyQueue_Later checks the lazy later move: a key pushed back fires
// at its new deadline, not its first, however often it was pushed.
func TestKeyQueue_Later(t *testing.T) {
	w := queue.NewKeyQueue[string](queue.HierarchicalWheel(time.Millisecond))
	ms := uint64(time.Millisecond)
	w.Set("conn", 10*ms)
	for i := range uint64(100) {
		w.Set("conn", 10*ms+i*ms)
	}
	var fired []string
	w.Advance(100*ms, func(k string) { fired = append(fired, k) })
	if len(fired) != 0 {
		t.Fatalf("fired %v before the last deadline", fired)
	}
	if when, ok := w.When("conn"); !ok || when != 109*ms {
		t.Fatalf("When = %d, %v, want %d", when, ok, 109*ms)
	}
	w.Advance(109*ms, func(k string) { fired = append(fired, k) })
	if !slices.Equal(fired, []string{"conn"}) {
		t.Fatalf("fired %v at the last deadline", fired)
	}
}

// TestKeyQueue_Large fills the default tables past several splits and
// empties them again by expiry.
func TestKeyQueue_Large(t *testing.T) {
	n := 300_000
	if testing.Short() {
		n = 100_000
	}
	w := queue.NewKeyQueue[uint64](queue.HierarchicalWheel(time.Millisecond))
	for k := range uint64(n) {
		w.Set(k, k*uint64(time.Microsecond))
	}
	if tables, _ := w.Tables(); tables < n/100_000+1 {
		t.Fatalf("%d keys in %d tables", n, tables)
	}
	if err := queue.Verify(w); err != nil {
		t.Fatal(err)
	}
	var last uint64
	count := 0
	for now := uint64(0); w.Len() > 0; now += 10 * uint64(time.Millisecond) {
		w.Advance(now, func(k uint64) {
			if k*uint64(time.Microsecond) > now {
				t.Fatalf("key %d fired early at %d", k, now)
			}
			last = max(last, k)
			count++
		})
	}
	if count != n || last != uint64(n-1) {
		t.Fatalf("fired %d keys, last %d", count, last)
	}
	if err := queue.Verify(w); err != nil {
		t.Fatal(err)
	}
}

// FuzzKeyQueue drives a KeyQueue with small tables from the fuzzer's
// bytes, two per operation, against keyModel.
func FuzzKeyQueue(f *testing.F) {
	f.Add([]byte{0, 1, 0, 2, 9, 200, 3, 1, 9, 255})
	f.Add([]byte("set keys, move them, remove some, advance time"))
	f.Fuzz(func(t *testing.T, ops []byte) {
		const tick = 10
		r := &keyQueueRun{t: t, w: queue.NewKeyQueueBits[uint64](queue.HierarchicalWheel(tick), 3), m: keyModel{}, tick: tick, keys: 64}
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i], uint64(ops[i+1])
			switch op % 4 {
			case 0, 1:
				r.set(arg%r.keys, r.now+uint64(op)*arg)
			case 2:
				r.remove(arg % r.keys)
			default:
				r.advance(arg * uint64(op))
			}
			r.check()
		}
	})
}

// filledKeyQueue returns a 1 ms KeyQueue holding keys 0 to n-1 due 1-2 h
// away and 2^22 random keys to operate on, drawn before timing: more than
// there are keys, so that a run reaches all of the table, not the few
// entries a short list read in a cycle would keep in cache.
func filledKeyQueue(n int) (*queue.KeyQueue[uint64], []uint64) {
	w := queue.NewKeyQueue[uint64](queue.HierarchicalWheel(time.Millisecond))
	rng := rand.New(rand.NewPCG(1, 2))
	for k := range uint64(n) {
		w.Set(k, uint64(time.Hour)+rng.Uint64N(uint64(time.Hour)))
	}
	keys := make([]uint64, 1<<22)
	for i := range keys {
		keys[i] = rng.Uint64N(uint64(n))
	}
	return w, keys
}

// BenchmarkKeyQueue_Set_Later pushes the deadline of one of n keys back,
// one Set at a time: a hash probe and a write.
func BenchmarkKeyQueue_Set_Later(b *testing.B) {
	for _, n := range []int{1_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			w, keys := filledKeyQueue(n)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				w.Set(keys[i&(len(keys)-1)], uint64(3*time.Hour+time.Duration(i)))
				i++
			}
		})
	}
}

// BenchmarkKeyQueue_SetAll_Later is Set_Later in batches of 256, as Keyed
// applies them; an op is one key.
func BenchmarkKeyQueue_SetAll_Later(b *testing.B) {
	for _, n := range []int{1_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			w, keys := filledKeyQueue(n)
			batch := make([]queue.KeyDeadline[uint64], 256)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				batch[i&255] = queue.KeyDeadline[uint64]{Key: keys[i&(len(keys)-1)], When: uint64(3*time.Hour + time.Duration(i))}
				if i&255 == 255 {
					w.SetAll(batch)
				}
				i++
			}
		})
	}
}
