package queue

import "hash/maphash"

// KeyQueue is a set of deadlines by key: at most one per key, set, moved
// and removed by key, in the shape of connection idle timeouts and
// per-request deadlines. It runs the structure a [Structure] chooses over
// a hash table of keys (keytable.go) whose records are the structure's
// nodes, so an operation on an existing key touches one record: the key,
// its deadline and its links. With the hierarchical wheel, the default of
// hourglass's Keyed, a Set to a later deadline only records it, and the
// key is filed again when its old slot comes due (see wheel.go).
//
// Costs: Set, Remove and When O(1) expected (a hash, a probe of a few
// slots) plus the structure's cost (O(1) for the wheels, O(log n) for the
// heap, O(n) for the sorted list); Set that inserts O(1) amortized,
// rebuilding one table at most; Next and Advance as for [Queue].
//
// KeyQueue is not safe for concurrent use.
type KeyQueue[K comparable] struct {
	keyTable[K]
	lazy    bool       // s records a later deadline without relinking
	hashes  [64]uint64 // SetAll's, for a batch of keys
	touched uint64     // what SetAll reads ahead goes here, so that it is read
}

// NewKeyQueue returns an empty KeyQueue running the structure s chooses.
func NewKeyQueue[K comparable](s Structure) *KeyQueue[K] {
	return newKeyQueue[K](s, tableBits)
}

// newKeyQueue returns a KeyQueue whose tables have at most 2^bits slots.
// The tests use small tables to split often.
func newKeyQueue[K comparable](s Structure, bits uint) *KeyQueue[K] {
	w := &KeyQueue[K]{lazy: s.lazy()}
	w.t = newTable[keyEntry[K]](bits)
	w.s = newStructure(s, w.t)
	w.seed = maphash.MakeSeed()
	w.reset()
	return w
}

// Set queues key to fire at when, or moves its deadline there if it is
// queued, and reports whether key was added. Adding may rebuild one table
// (at most 2^16 slots).
func (w *KeyQueue[K]) Set(key K, when uint64) (added bool) {
	return w.set(key, maphash.Comparable(w.seed, key), when)
}

// set is Set for a key whose hash is h64.
func (w *KeyQueue[K]) set(key K, h64, when uint64) (added bool) {
	t, _, _, s, found := w.findHashed(key, h64)
	if found {
		w.move(t<<w.t.shift|int32(s), &w.t.nodes[t][s], when)
		return false
	}
	i, n := w.insert(key, h64)
	n.when = when
	w.s.add(i, n)
	return true
}

// move moves queued node i to when.
func (w *KeyQueue[K]) move(i int32, n *node[keyEntry[K]], when uint64) {
	if w.lazy && when >= n.when {
		n.when = when
		return
	}
	w.s.move(i, n, when)
}

// KeyDeadline is a key and a deadline, for [KeyQueue.SetAll].
type KeyDeadline[K comparable] struct {
	Key  K
	When uint64
}

// SetAll does what Set does for each of sets in turn. For keys spread over
// a large table it is faster than calling Set for each: it reads the
// record in each key's home slot before setting any, so that the
// processor fetches all of them from memory at once, and then sets the
// keys while they are in cache, a key found in its home slot without
// reading the control bytes.
func (w *KeyQueue[K]) SetAll(sets []KeyDeadline[K]) {
	for len(sets) > 0 {
		n := min(len(sets), len(w.hashes))
		for i := range sets[:n] {
			w.hashes[i] = maphash.Comparable(w.seed, sets[i].Key)
		}
		// A loop of little more than the loads, so that the processor
		// has as many of them in flight as it can.
		var sum uint64
		look, shift := w.look, 64-w.depth
		for _, h64 := range w.hashes[:n] {
			e := &look[h64>>shift]
			sum += e.tab[home(uint32(h64>>32), e.depth, len(e.tab))].when
		}
		w.touched = sum
		for i := range sets[:n] {
			// Most keys sit in their home slot: look there first,
			// without the control bytes. An empty slot's record is all
			// zero, so a record with the key's nonzero hash is in use.
			h64, key := w.hashes[i], sets[i].Key
			e := &look[h64>>shift]
			s := home(uint32(h64>>32), e.depth, len(e.tab))
			if r := &e.tab[s]; r.value.hash == uint32(h64>>32) && r.value.hash != 0 && r.value.key == key {
				w.move(e.t<<w.t.shift|int32(s), r, sets[i].When)
				continue
			}
			if w.set(key, h64, sets[i].When) {
				look, shift = w.look, 64-w.depth // set may have grown a table
			}
		}
		sets = sets[n:]
	}
}

// When reports key's deadline, the last one it was set to, and whether it
// is queued.
func (w *KeyQueue[K]) When(key K) (uint64, bool) {
	t, _, _, s, found := w.find(key)
	if !found {
		return 0, false
	}
	return w.t.nodes[t][s].when, true
}

// Remove takes key out and reports whether it was queued.
func (w *KeyQueue[K]) Remove(key K) bool {
	t, _, _, s, found := w.find(key)
	if !found {
		return false
	}
	i := t<<w.t.shift | int32(s)
	w.s.remove(i, &w.t.nodes[t][s])
	w.delete(i)
	return true
}

// Len reports the number of queued keys.
func (w *KeyQueue[K]) Len() int { return w.s.size() }

// Next reports the earliest time at which Advance has work to do, as
// [Queue.Next] does.
func (w *KeyQueue[K]) Next() (uint64, bool) { return w.s.next() }

// Advance moves time to now and hands every key that is due to fire,
// after taking it out, as [Queue.Advance] does. Keys whose deadline was
// moved later are filed again instead. fire may call Set, Remove and
// When: a key it sets already due fires on the next Advance. Advance to
// math.MaxUint64 fires everything.
func (w *KeyQueue[K]) Advance(now uint64, fire func(key K)) {
	w.s.advance(now, func(i int32, n *node[keyEntry[K]]) {
		key := n.value.key
		w.delete(i)
		fire(key)
	})
}

// Drain takes every key out and hands each to fn, in no particular
// order, and shrinks the table to its initial size. For the hierarchical
// wheel it is O(n + L·64). fn must not call back into the KeyQueue.
func (w *KeyQueue[K]) Drain(fn func(key K)) {
	w.s.drain(func(_ int32, n *node[keyEntry[K]]) { fn(n.value.key) })
	w.reset()
}
