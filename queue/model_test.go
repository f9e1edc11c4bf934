package queue_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// This file holds the reference model every structure is checked against,
// the operation streams that drive it (random here, decoded from fuzz input
// in fuzz_test.go), and the property test.

// fireAt returns the time by which a structure of the given tick must fire
// a deadline of when, and before which it must not: when itself for the
// exact structures (tick 0), when rounded up to a tick boundary for the
// wheels. A boundary past the end of time is math.MaxUint64, the now that
// drains every structure.
func fireAt(when, tick uint64) uint64 {
	if tick == 0 {
		return when
	}
	t := when / tick
	if when%tick != 0 {
		t++
	}
	if t > math.MaxUint64/tick {
		return math.MaxUint64
	}
	return t * tick
}

func satAdd(a, b uint64) uint64 {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxUint64
}

func satSub(a, b uint64) uint64 {
	if a >= b {
		return a - b
	}
	return 0
}

// checked wraps a Queue with the reference model, each entry's deadline and
// whether it is queued, and checks every call against it: an Advance to now
// must fire exactly the entries due by then (fireAt(when) <= now), no matter
// when they were added, each once. The order within an Advance is checked
// for the ordered structures: deadline order, with the entries that were
// already due when added counting as due at the previous now. After every
// call checked runs the structure's verify and compares Len, Next, and each
// entry's Queued and When. The model is indexed by the entries' Values,
// which must be small and distinct, as newEntries makes them: a map from
// entry to deadline would do, but a slice keeps fuzzing fast.
type checked struct {
	tb        testing.TB
	s         structure
	q         *Q
	now       uint64       // the greatest now passed to Advance
	model     []modelEntry // by Value
	queued    int          // number of queued entries in model
	inAdvance bool
	step      int // the operation being run, for messages
}

// modelEntry is the model of one entry.
type modelEntry struct {
	e      *Entry // nil if never added
	when   uint64
	queued bool
	firing bool // inside Advance: due, not yet fired
}

func newChecked(tb testing.TB, s structure) *checked {
	return &checked{tb: tb, s: s, q: s.new()}
}

func (c *checked) fatalf(format string, args ...any) {
	c.tb.Helper()
	c.tb.Fatalf("%s: step %d, now %d: %s", c.s.name, c.step, c.now, fmt.Sprintf(format, args...))
}

// lookup returns the model of e.
func (c *checked) lookup(e *Entry) *modelEntry {
	c.tb.Helper()
	v := e.Value
	if v >= len(c.model) {
		c.model = append(c.model, make([]modelEntry, v+1-len(c.model))...)
	}
	m := &c.model[v]
	if m.e == nil {
		m.e = e
	} else if m.e != e {
		c.fatalf("two entries with value %d", v)
	}
	return m
}

// Add adds e, which must not be queued, at when.
func (c *checked) Add(e *Entry, when uint64) {
	c.tb.Helper()
	m := c.lookup(e)
	c.q.Add(e, when)
	m.when, m.queued = when, true
	c.queued++
	c.check()
}

// Remove removes e and checks the result against the model.
func (c *checked) Remove(e *Entry) bool {
	c.tb.Helper()
	m := c.lookup(e)
	if got := c.q.Remove(e); got != m.queued {
		c.fatalf("Remove(entry %d) = %v, want %v", e.Value, got, m.queued)
	}
	was := m.queued
	if was {
		m.queued, m.firing = false, false
		c.queued--
	}
	c.check()
	return was
}

// Advance advances to now, checks what fires, and calls react (if not nil)
// with each fired entry from inside the fire callback. It returns the fired
// entries in order.
func (c *checked) Advance(now uint64, react func(*Entry)) []*Entry {
	c.tb.Helper()
	prev := c.now
	c.now = max(c.now, now)
	for i := range c.model {
		m := &c.model[i]
		m.firing = m.queued && fireAt(m.when, c.s.tick) <= c.now
	}
	var fired []*Entry
	var lastKey uint64
	c.inAdvance = true
	c.q.Advance(now, func(e *Entry) {
		m := c.lookup(e)
		if !m.firing {
			c.fatalf("fired entry %d, deadline %d, which is not due", e.Value, e.When())
		}
		m.queued, m.firing = false, false
		c.queued--
		key := max(fireAt(e.When(), c.s.tick), prev)
		if c.s.ordered && key < lastKey {
			c.fatalf("fired entry %d due at %d after one due at %d", e.Value, key, lastKey)
		}
		lastKey = key
		fired = append(fired, e)
		c.check()
		if react != nil {
			react(e)
		}
	})
	c.inAdvance = false
	for _, m := range c.model {
		if m.firing {
			c.fatalf("Advance(%d) did not fire entry %d, deadline %d", now, m.e.Value, m.when)
		}
	}
	c.check()
	return fired
}

// check compares the structure with the model.
func (c *checked) check() {
	c.tb.Helper()
	if err := verify(c.q); err != nil {
		c.fatalf("%v", err)
	}
	if got := c.q.Len(); got != c.queued {
		c.fatalf("Len = %d, want %d", got, c.queued)
	}
	earliest := uint64(math.MaxUint64)
	for _, m := range c.model {
		if m.e == nil {
			continue
		}
		if m.e.Queued() != m.queued {
			c.fatalf("entry %d: Queued = %v, want %v", m.e.Value, m.e.Queued(), m.queued)
		}
		if m.queued {
			if m.e.When() != m.when {
				c.fatalf("entry %d: When = %d, want %d", m.e.Value, m.e.When(), m.when)
			}
			earliest = min(earliest, fireAt(m.when, c.s.tick))
		}
	}
	if c.inAdvance {
		return // Next is only meaningful between Advances
	}
	at, ok := c.q.Next()
	if ok != (c.queued > 0) {
		c.fatalf("Next = %d, %v with %d entries queued", at, ok, c.queued)
	}
	// Next is the earliest deadline for the exact structures; a wheel may
	// report a tick or a cascade before it, but not a time already passed.
	want := max(c.now, earliest)
	if ok && (c.s.tick == 0 && at != want || at < c.now || at > want) {
		c.fatalf("Next = %d, earliest deadline due at %d", at, earliest)
	}
}

// opKind is one kind of operation on a queue.
type opKind uint8

const (
	opAdd         opKind = iota // add entry i at now+delta, removing it first if queued
	opAddPast                   // add entry i at now-delta
	opAddFar                    // add entry i at math.MaxUint64-delta
	opRemove                    // remove entry i
	opAdvance                   // advance to now+delta
	opAdvanceBack               // advance to now-delta, which the queue treats as now
	opAdvanceNext               // advance to Next(), if anything is queued
	numOpKinds
)

// reaction is what the fire callback does during an Advance.
type reaction uint8

const (
	reactNone   reaction = iota
	reactReAdd           // re-add the fired entry at now-1, now-1+1ms or now-1+2ms
	reactRemove          // remove the entry after the fired one
	numReactions
)

// op is one operation of a stream run by runOps.
type op struct {
	kind  opKind
	i     int    // entry for adds and removes
	delta uint64 // deadline offset for adds, time step for advances
	react reaction
}

// scales are the orders of magnitude of the deltas of random and fuzzed
// operations, from a nanosecond to a sixteenth of the uint64 range; a delta
// is a scale times 0 to 31, which cannot overflow.
var scales = [8]uint64{1, 1e3, 1e6, 1e8, 1e9, uint64(time.Hour), 365 * 24 * uint64(time.Hour), 1 << 58}

// runOps runs ops against a fresh queue of structure s, with n entries, and
// the model, then drains the queue with Advance(math.MaxUint64).
func runOps(tb testing.TB, s structure, n int, ops []op) {
	tb.Helper()
	c := newChecked(tb, s)
	es := newEntries(n)
	reactions := [numReactions]func(*Entry){
		reactReAdd: func(e *Entry) {
			c.Add(e, satAdd(satSub(c.now, 1), uint64(e.Value%3)*ms))
		},
		reactRemove: func(e *Entry) {
			c.Remove(&es[(e.Value+1)%n])
		},
	}
	for k, o := range ops {
		c.step = k
		e := &es[o.i%n]
		react := reactions[o.react%numReactions]
		switch o.kind {
		case opAdd, opAddPast, opAddFar:
			if e.Queued() {
				c.Remove(e)
			}
			when := satAdd(c.now, o.delta)
			if o.kind == opAddPast {
				when = satSub(c.now, o.delta)
			} else if o.kind == opAddFar {
				when = math.MaxUint64 - o.delta
			}
			c.Add(e, when)
		case opRemove:
			c.Remove(e)
		case opAdvance:
			c.Advance(satAdd(c.now, o.delta), react)
		case opAdvanceBack:
			c.Advance(satSub(c.now, o.delta), react)
		case opAdvanceNext:
			at, ok := c.q.Next()
			if !ok {
				continue
			}
			// Advance(Next()) makes progress: it fires something, or
			// it cascades and Next moves later.
			if fired := c.Advance(at, react); len(fired) == 0 {
				if next, ok := c.q.Next(); ok && next <= at {
					c.fatalf("Advance(Next() = %d) fired nothing and Next stays %d", at, next)
				}
			}
		}
	}
	c.step = len(ops)
	c.Advance(math.MaxUint64, nil)
	if c.q.Len() != 0 {
		c.fatalf("Len = %d after Advance(MaxUint64)", c.q.Len())
	}
}

// modelStructures returns every structure in several configurations: the
// hashed wheel with one slot (every entry is in the one slot, most of them
// rounds away), two and 64, and the hierarchical wheel with ticks that
// give it from 11 levels down to 7.
func modelStructures() []structure {
	return append(structures(),
		hashedWheel(time.Millisecond, 1),
		hashedWheel(time.Millisecond, 2),
		hashedWheel(time.Millisecond, 64),
		hashedWheel(time.Nanosecond, 64),
		hierarchicalWheel(time.Nanosecond),
		hierarchicalWheel(time.Microsecond),
		hierarchicalWheel(100*time.Millisecond),
	)
}

// randomOps returns n random operations on entries numbered below entries.
// Deadlines mostly fall within seconds, with some hours, years and ones near
// math.MaxUint64 away; time mostly moves by up to a few seconds, and rarely
// by hours, years or more, so that a stream seldom reaches the end of time
// before its last operations.
func randomOps(rng *rand.Rand, n, entries int) []op {
	// Weights per thousand of each of the scales.
	var (
		addScales     = [8]int{100, 150, 250, 200, 150, 100, 50, 0}
		farScales     = [8]int{200, 200, 200, 200, 100, 50, 30, 20}
		advanceScales = [8]int{100, 150, 350, 260, 125, 10, 4, 1}
	)
	delta := func(weights [8]int) uint64 {
		r := rng.IntN(1000)
		s := 0
		for s < len(weights)-1 && r >= weights[s] {
			r -= weights[s]
			s++
		}
		return rng.Uint64N(32) * scales[s]
	}
	ops := make([]op, n)
	for k := range ops {
		o := op{i: rng.IntN(entries), react: reaction(rng.IntN(int(numReactions)))}
		switch r := rng.IntN(100); {
		case r < 35:
			o.kind, o.delta = opAdd, delta(addScales)
		case r < 40:
			o.kind, o.delta = opAddPast, delta(addScales)
		case r < 43:
			o.kind, o.delta = opAddFar, delta(farScales)
		case r < 58:
			o.kind = opRemove
		case r < 88:
			o.kind, o.delta = opAdvance, delta(advanceScales)
		case r < 91:
			o.kind, o.delta = opAdvanceBack, delta(advanceScales)
		default:
			o.kind = opAdvanceNext
		}
		ops[k] = o
	}
	return ops
}

// TestModel runs random operation streams against every structure and the
// reference model.
func TestModel(t *testing.T) {
	seeds := []uint64{1, 2, 3, 4, 5, 6, 7, 8}
	n := 3000
	if testing.Short() {
		seeds, n = seeds[:2], 1000
	}
	for _, seed := range seeds {
		ops := randomOps(rand.New(rand.NewPCG(seed, 0)), n, 100)
		for _, s := range modelStructures() {
			t.Run(fmt.Sprintf("seed=%d/%s", seed, s.name), func(t *testing.T) {
				t.Parallel()
				runOps(t, s, 100, ops)
			})
		}
	}
}
