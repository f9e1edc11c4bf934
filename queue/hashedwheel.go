package queue

import (
	"math"
	"math/bits"
)

// hashedWheel is Netty's HashedWheelTimer as a data structure: a ring of
// power-of-two many slots, each a list of nodes, and a cursor that moves
// one slot per tick. A node due at tick t (its deadline rounded up to a
// tick) hangs in slot t mod slots. When the cursor reaches a slot it fires
// the nodes whose tick has come and leaves the rest, which are one or more
// whole turns ("rounds") away. Netty stores the rounds; here they follow
// from the deadline, so a node needs no extra field.
//
// Worked example, with 8 slots of 1 s and the cursor at tick 0: a deadline
// 3 s away goes to slot 3 and fires when the cursor gets there; one 10 s
// away goes to slot 10 mod 8 = 2 and is skipped when the cursor passes slot
// 2 at tick 2, because it is one round away, and fires at tick 10.
//
// Costs, for n queued nodes and s slots: add, remove and move O(1). advance
// looks at each tick's slot, at most s of them however far time moves, and
// walks every node in an occupied one, due or not: O(ticks + n/s) per call
// with deadlines spread evenly. That walk over nodes that are rounds away
// is the cost the hierarchical wheel removes. next finds the next occupied
// slot in a bitmap of the slots, O(s/64); unlike Netty's worker, which
// wakes every tick, a driver can sleep until then. A slot whose nodes are
// all rounds away still costs a wake-up each turn.
//
// Nodes fire at the first tick boundary at or after their deadline: never
// early, and at most one tick late.
type hashedWheel[V any] struct {
	base[V] // lists: the slots, then due and firing
	tick    tickSize
	mask    uint64
	cur     uint64 // ticks done: every node due at a tick ≤ cur has fired
}

// newHashedWheel returns a wheel of the given tick and slots, a power of
// two.
func newHashedWheel[V any](t *table[V], tick uint64, slots int) *hashedWheel[V] {
	w := &hashedWheel[V]{tick: newTickSize(tick), mask: uint64(slots - 1)}
	w.init(t, slots)
	return w
}

func (w *hashedWheel[V]) add(i int32, n *node[V]) {
	w.len++
	t := w.tick.ceil(n.when)
	if t <= w.cur {
		w.link(w.dueList(), i, n)
		return
	}
	s := t & w.mask
	w.occ[s/64] |= 1 << (s % 64)
	w.link(int32(s), i, n)
}

func (w *hashedWheel[V]) remove(i int32, n *node[V]) {
	w.unlink(i, n)
	w.len--
}

func (w *hashedWheel[V]) move(i int32, n *node[V], when uint64) {
	w.remove(i, n)
	n.when = when
	w.add(i, n)
}

// next reports the start of the tick of the next occupied slot: the
// earliest deadline rounded up to a tick, or an earlier tick whose slot
// holds only nodes that are whole turns away. It is O(s/64).
func (w *hashedWheel[V]) next() (uint64, bool) {
	if w.pendingDue() {
		return w.now, true
	}
	if w.len == 0 {
		return 0, false
	}
	ahead := w.nextOccupied()
	if w.cur > math.MaxUint64/w.tick.n-ahead {
		return math.MaxUint64, true
	}
	return (w.cur + ahead) * w.tick.n, true
}

// nextOccupied returns how many ticks after cur the cursor first reaches
// an occupied slot, between 1 and the number of slots. The wheel must not
// be empty.
func (w *hashedWheel[V]) nextOccupied() uint64 {
	n := w.mask + 1
	width := min(n, 64) // slots per bitmap word
	start := (w.cur + 1) & w.mask
	for off := uint64(0); off < n; {
		i := (start + off) & w.mask
		if word := w.occ[i/64] >> (i % 64); word != 0 {
			if d := off + uint64(bits.TrailingZeros64(word)); d < n {
				return d + 1
			}
		}
		off += width - i%64
	}
	panic("queue: hashed wheel bitmap out of step with its count")
}

// advance moves the cursor to now, visiting at most one turn of slots,
// and fires every node whose tick has come, in slot order.
func (w *hashedWheel[V]) advance(now uint64, release func(i int32, n *node[V])) {
	w.begin(now)
	w.stageDue()
	target, _ := w.tick.div(w.now)
	limit := target * w.tick.n // nodes due at or before limit have their tick
	if w.now == math.MaxUint64 {
		target, limit = math.MaxUint64, math.MaxUint64
	}
	if target > w.cur && w.len > 0 {
		steps := min(target-w.cur, w.mask+1)
		for k := uint64(1); k <= steps; k++ {
			s := (w.cur + k) & w.mask
			if w.occ[s/64]&(1<<(s%64)) == 0 {
				continue
			}
			for c := w.lists[s].head; c != 0; {
				i := c - 1
				n := w.node(i)
				c = n.next
				if c < 0 {
					c = 0
				}
				if n.when <= limit {
					w.unlink(i, n)
					w.link(w.firingList(), i, n)
				}
			}
		}
	}
	w.cur = max(w.cur, target)
	w.fire(release)
}

func (w *hashedWheel[V]) drain(fn func(i int32, n *node[V])) {
	w.drainLists(fn)
}
