package queue

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"math/bits"
	"time"
)

// KeyWheel is a hierarchical timing wheel of keys: at most one deadline
// per key, set, moved and removed by key, in the shape of connection idle
// timeouts and per-request deadlines. It is an [IndexWheel] whose table
// is also the hash table that finds a key's entry, so an operation on an
// existing key touches one entry: the key, its deadline and its wheel
// links sit in one record: 16 bytes, 4 of the key's hash, and the key
// (32 bytes in all for an 8-byte key).
//
// The table is an extendible hash table of linear-probing tables, as Go's
// own maps are built: a directory indexed by a hash's top bits names the
// table, and within it a key's home slot comes from the hash's next bits.
// Beside the records, each table keeps a control byte per slot, empty or
// 7 more bits of the full slot's hash, so a probe compares eight slots at
// a time in one word and reads a record only where the bits match:
// usually just the key's own. A table is rebuilt 1.5 times larger when it
// passes 80% full, and split in two, by one more hash bit, when that would
// pass 2^16 slots, so no insertion moves more than 52,429 entries and
// occupancy stays between 53% and 80%: for an 8-byte key, 41 to 62 bytes
// per key, everything included. Removal shifts later entries of the probe
// run back rather than leaving tombstones. An entry moved in the table
// keeps its place in the wheel: only its list neighbours' links change.
//
// Worked example: with 2 tables the directory has depth 1; a key whose
// 64-bit hash starts with bit 1 lives in table 1. Bits 1 to 31 of the hash
// scaled to the table's 40,000 slots give its home, say slot 17,000; its
// control byte is the hash's low 7 bits, say 0x2a. Set reads the control
// bytes of slots 17,000 to 17,007, finds 0x2a at 17,001 and an empty byte
// at 17,003, compares the key in record 17,001, and moves its deadline.
//
// Set to a later deadline only records it, as [IndexWheel.Move] does; the
// entry is filed again when its old slot comes due.
//
// Costs: Set, Remove and When O(1) expected (a hash, a probe of a few
// slots); Set that inserts O(1) amortized, rebuilding one table at most;
// Next O(L), Advance O(L + k·L) for k entries handled, Drain O(n + L·64).
// Entries fire at the first tick boundary at or after their deadline:
// never early, and at most one tick late. For a K without pointers the
// table holds none, and the garbage collector does not scan it.
//
// KeyWheel is not safe for concurrent use.
type KeyWheel[K comparable] struct {
	idWheel[keyEntry[K]]
	seed maphash.Seed
	// dir names the table for each value of a hash's top depth bits;
	// several entries name a table whose local depth is below depth.
	dir   []int32
	depth uint
	// tables holds each table's count, local depth and control bytes;
	// its records are idWheel.nodes[t], and entry i is slot i&mask of
	// table i>>shift.
	tables []tableInfo
	// look holds, for each directory entry, what SetAll needs to find a
	// key at its home slot: its table's number, records and local depth,
	// one load away instead of three. grow and reset rebuild it.
	look []lookup[K]

	hashes  [64]uint64 // SetAll's, for a batch of keys
	touched uint64     // what SetAll reads ahead goes here, so that it is read
}

// lookup is an entry of KeyWheel.look.
type lookup[K comparable] struct {
	tab   []node[keyEntry[K]]
	depth uint
	t     int32
}

// relook rebuilds w.look from the directory and the tables. It is
// O(directory), run when a table is replaced.
func (w *KeyWheel[K]) relook() {
	w.look = w.look[:0]
	for _, t := range w.dir {
		w.look = append(w.look, lookup[K]{w.nodes[t], w.tables[t].depth, t})
	}
}

// keyEntry is what a KeyWheel's table holds for a key besides its
// deadline and links: the key, and the top 32 bits of its hash, from which
// a rebuild or a removal finds the key's home slot without hashing again.
type keyEntry[K comparable] struct {
	hash uint32
	key  K
}

type tableInfo struct {
	count int32
	depth uint // the hash bits all its keys share
	// ctrl holds a byte per slot, then a copy of the first group's, so
	// that a group read at any slot needs no wrap-around.
	ctrl []byte
}

const (
	tableBits = 16 // a table has at most 2^16 slots: 2 MiB for 8-byte keys
	minTable  = 8  // slots in a new KeyWheel's one table: one group

	group = 8    // control bytes read at once, in a uint64
	empty = 0x80 // the control byte of an empty slot; a full one is < 0x80

	lsb = 0x0101010101010101 // the low bit of each byte in a group
	msb = 0x8080808080808080 // the high bit of each byte in a group
)

// NewKeyWheel returns an empty KeyWheel with the given tick. It panics if
// tick is not positive.
func NewKeyWheel[K comparable](tick time.Duration) *KeyWheel[K] {
	if tick <= 0 {
		panic("queue: NewKeyWheel with non-positive tick")
	}
	return newKeyWheel[K](tick, tableBits)
}

// newKeyWheel returns a KeyWheel whose tables have at most 2^bits slots.
// The tests use small tables to split often.
func newKeyWheel[K comparable](tick time.Duration, bits uint) *KeyWheel[K] {
	w := &KeyWheel[K]{idWheel: newIDWheel[keyEntry[K]](uint64(tick), bits), seed: maphash.MakeSeed()}
	w.reset()
	return w
}

// reset empties the table: one table of minTable slots.
func (w *KeyWheel[K]) reset() {
	w.nodes = [][]node[keyEntry[K]]{make([]node[keyEntry[K]], minTable)}
	w.tables = []tableInfo{{ctrl: newCtrl(minTable)}}
	w.dir, w.depth = []int32{0}, 0
	w.relook()
}

// newCtrl returns the control bytes of an empty table of c slots.
func newCtrl(c int) []byte {
	ctrl := make([]byte, c+group)
	for i := range ctrl {
		ctrl[i] = empty
	}
	return ctrl
}

// setCtrl sets the control byte of slot s, and its copy.
func (t *tableInfo) setCtrl(s int, b byte) {
	t.ctrl[s] = b
	if s < group {
		t.ctrl[len(t.ctrl)-group+s] = b
	}
}

// home returns the slot a key of hash h starts its probe at, in a table
// of c slots whose keys share their top d hash bits: the rest of the bits,
// scaled to c (Lemire's multiply-shift, so c need not be a power of two).
func home(h uint32, d uint, c int) int {
	return int(uint64(h<<d) * uint64(c) >> 32)
}

// match returns a group with the high bit set in each byte of g equal to
// tag, and perhaps in a byte above one that is: the candidates, to be
// confirmed by comparing keys. An empty byte never matches.
func match(g uint64, tag byte) uint64 {
	x := g ^ lsb*uint64(tag)
	return (x - lsb) &^ x & msb
}

// find returns key's table, its hash (the top 32 bits of the 64-bit one),
// its control byte, and its slot: the one holding it if found, else the
// empty slot that ends its probe.
func (w *KeyWheel[K]) find(key K) (t int32, h uint32, tag byte, s int, found bool) {
	return w.findHashed(key, maphash.Comparable(w.seed, key))
}

// findHashed is find for a key whose hash is h64.
func (w *KeyWheel[K]) findHashed(key K, h64 uint64) (t int32, h uint32, tag byte, s int, found bool) {
	t = w.dir[h64>>(64-w.depth)]
	h, tag = uint32(h64>>32), byte(h64&0x7f)
	tab, info := w.nodes[t], &w.tables[t]
	c := len(tab)
	s = home(h, info.depth, c)
	for {
		g := binary.LittleEndian.Uint64(info.ctrl[s:])
		for m := match(g, tag); m != 0; m &= m - 1 {
			j := s + bits.TrailingZeros64(m)>>3
			if j >= c {
				j -= c
			}
			if tab[j].value.key == key {
				return t, h, tag, j, true
			}
		}
		if e := g & msb; e != 0 {
			j := s + bits.TrailingZeros64(e)>>3
			if j >= c {
				j -= c
			}
			return t, h, tag, j, false
		}
		if s += group; s >= c {
			s -= c
		}
	}
}

// Set queues key to fire at when, or moves its deadline there if it is
// queued, and reports whether key was added. A later deadline is recorded
// in place; an earlier one relinks the entry at once. Adding may rebuild
// one table (at most 2^16 slots).
func (w *KeyWheel[K]) Set(key K, when uint64) (added bool) {
	return w.set(key, maphash.Comparable(w.seed, key), when)
}

// set is Set for a key whose hash is h64.
func (w *KeyWheel[K]) set(key K, h64, when uint64) (added bool) {
	t, h, tag, s, found := w.findHashed(key, h64)
	if found {
		w.move(t<<w.shift|int32(s), &w.nodes[t][s], when)
		return false
	}
	for (int(w.tables[t].count)+1)*5 > len(w.nodes[t])*4 {
		w.grow(t)
		t, h, tag, s, _ = w.find(key)
	}
	n := &w.nodes[t][s]
	n.when, n.value = when, keyEntry[K]{h, key}
	w.tables[t].setCtrl(s, tag)
	w.tables[t].count++
	w.len++
	w.file(t<<w.shift|int32(s), n)
	return true
}

// KeyDeadline is a key and a deadline, for [KeyWheel.SetAll].
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
func (w *KeyWheel[K]) SetAll(sets []KeyDeadline[K]) {
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
				w.move(e.t<<w.shift|int32(s), r, sets[i].When)
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
func (w *KeyWheel[K]) When(key K) (uint64, bool) {
	t, _, _, s, found := w.find(key)
	if !found {
		return 0, false
	}
	return w.nodes[t][s].when, true
}

// Remove takes key out of the wheel and reports whether it was queued.
func (w *KeyWheel[K]) Remove(key K) bool {
	t, _, _, s, found := w.find(key)
	if !found {
		return false
	}
	i := t<<w.shift | int32(s)
	w.unlink(i, &w.nodes[t][s])
	w.len--
	w.delete(i)
	return true
}

// delete empties slot i, whose entry is out of the wheel's lists, and
// moves later entries of its probe run back into the gap, each that may
// move (whose home is not between the gap and it), so that every key
// stays reachable from its home without tombstones.
func (w *KeyWheel[K]) delete(i int32) {
	t, gap := i>>w.shift, int(i&w.mask)
	tab, info := w.nodes[t], &w.tables[t]
	tab[gap] = node[keyEntry[K]]{}
	for j := gap; ; {
		if j++; j == len(tab) {
			j = 0
		}
		if info.ctrl[j] == empty {
			break
		}
		n := &tab[j]
		k := home(n.value.hash, info.depth, len(tab))
		if gap <= j && (k <= gap || k > j) || gap > j && k <= gap && k > j {
			tab[gap] = *n
			info.setCtrl(gap, info.ctrl[j])
			w.relink(t<<w.shift|int32(gap), &tab[gap])
			*n = node[keyEntry[K]]{}
			gap = j
		}
	}
	info.setCtrl(gap, empty)
	info.count--
}

// grow makes room in table t: a table of 1.5 times its slots, or, at the
// largest size, two tables split by the next hash bit.
func (w *KeyWheel[K]) grow(t int32) {
	old, info := w.nodes[t], w.tables[t]
	defer w.relook()
	if len(old) < w.maxTable() {
		w.rebuild(t, old, info.ctrl, info.depth, min(len(old)*3/2, w.maxTable()), -1, 0)
		return
	}
	// Table indices and the directory's depth are bounded so that every
	// index+1 fits an int32.
	if len(w.tables) >= 1<<(31-w.shift)-1 {
		panic("queue: KeyWheel full")
	}
	d := info.depth
	if d == w.depth {
		if w.depth == 31-w.shift {
			panic("queue: KeyWheel full")
		}
		dir := make([]int32, 2*len(w.dir))
		for j := range dir {
			dir[j] = w.dir[j>>1]
		}
		w.dir, w.depth = dir, w.depth+1
	}
	// The keys whose bit d (from the top) is 1 go to a new table u, sized
	// for 60% occupancy.
	u := int32(len(w.tables))
	ones := 0
	for j := range old {
		if info.ctrl[j] != empty && old[j].value.hash>>(31-d)&1 == 1 {
			ones++
		}
	}
	zeros := int(info.count) - ones
	w.nodes = append(w.nodes, nil)
	w.tables = append(w.tables, tableInfo{})
	for j := range w.dir {
		if w.dir[j] == t && j>>(w.depth-1-d)&1 == 1 {
			w.dir[j] = u
		}
	}
	w.rebuild(t, old, info.ctrl, d+1, w.sized(zeros), u, w.sized(ones))
}

// sized returns the slots for a table of n keys at 60% occupancy.
func (w *KeyWheel[K]) sized(n int) int { return min(max(n*5/3+1, minTable), w.maxTable()) }

// maxTable returns the most slots a table may have.
func (w *KeyWheel[K]) maxTable() int { return 1 << w.shift }

// rebuild moves the entries of old, which was table t with control bytes
// ctrl, into a new table t of c slots, or, if u >= 0, into new tables t
// and u of c and cu slots by hash bit depth-1, both of local depth depth.
// Each moved entry's list neighbours are pointed at its new index: through
// the map of old slots to new indices if the neighbour moved too, directly
// if it is in another table.
func (w *KeyWheel[K]) rebuild(t int32, old []node[keyEntry[K]], ctrl []byte, depth uint, c int, u int32, cu int) {
	w.nodes[t] = make([]node[keyEntry[K]], c)
	w.tables[t] = tableInfo{depth: depth, ctrl: newCtrl(c)}
	if u >= 0 {
		w.nodes[u] = make([]node[keyEntry[K]], cu)
		w.tables[u] = tableInfo{depth: depth, ctrl: newCtrl(cu)}
	}
	to := make([]int32, len(old))
	for j := range old {
		if ctrl[j] == empty {
			continue
		}
		n := &old[j]
		dst := t
		if u >= 0 && n.value.hash>>(32-depth)&1 == 1 {
			dst = u
		}
		tab, info := w.nodes[dst], &w.tables[dst]
		s := home(n.value.hash, depth, len(tab))
		for info.ctrl[s] != empty {
			if s++; s == len(tab) {
				s = 0
			}
		}
		tab[s] = *n
		info.setCtrl(s, ctrl[j])
		info.count++
		to[j] = dst<<w.shift | int32(s)
	}
	moved := func(link int32) (int32, bool) {
		if (link-1)>>w.shift == t {
			return to[(link-1)&w.mask] + 1, true
		}
		return 0, false
	}
	for j := range old {
		if ctrl[j] == empty {
			continue
		}
		i := to[j]
		n := w.node(i)
		if n.prev < 0 {
			w.lists[-n.prev-1].head = i + 1
		} else if p, ok := moved(n.prev); ok {
			n.prev = p
		} else {
			w.node(n.prev - 1).next = i + 1
		}
		if n.next < 0 {
			w.lists[-n.next-1].tail = i + 1
		} else if p, ok := moved(n.next); ok {
			n.next = p
		} else {
			w.node(n.next - 1).prev = i + 1
		}
	}
}

// Advance moves time to now and hands the key of every entry whose
// deadline's tick has been reached to fire, after taking it out of the
// wheel: first those set already due, then the rest in deadline order up
// to a tick. Keys whose deadline was moved later are filed again instead.
// fire may call Set, Remove and When: a key it sets already due fires on
// the next Advance. Advance to math.MaxUint64 fires everything.
func (w *KeyWheel[K]) Advance(now uint64, fire func(key K)) {
	w.advance(now, func(i int32, n *node[keyEntry[K]]) {
		key := n.value.key
		w.delete(i)
		fire(key)
	})
}

// Drain takes every key out of the wheel and hands each to fn, in no
// particular order, and shrinks the table to its initial size. It is
// O(n + L·64). fn must not call back into the wheel.
func (w *KeyWheel[K]) Drain(fn func(key K)) {
	w.drain(func(_ int32, n *node[keyEntry[K]]) { fn(n.value.key) })
	w.reset()
}

// verify checks the wheel's lists (see idWheel.verify) and its hash
// table: the directory, each table's count, and that every key is found
// where it is, from its home slot.
func (w *KeyWheel[K]) verify() error {
	if err := w.idWheel.verify(); err != nil {
		return err
	}
	if len(w.dir) != 1<<w.depth {
		return fmt.Errorf("key wheel: directory of %d entries at depth %d", len(w.dir), w.depth)
	}
	for j, t := range w.dir {
		d := w.tables[t].depth
		if d > w.depth {
			return fmt.Errorf("key wheel: table %d of depth %d under a directory of depth %d", t, d, w.depth)
		}
		// Every directory entry sharing j's top d bits names the same table.
		if first := j >> (w.depth - d) << (w.depth - d); w.dir[first] != t {
			return fmt.Errorf("key wheel: directory entries %d and %d differ within table %d's depth", first, j, t)
		}
		if j >= len(w.look) || w.look[j].t != t || w.look[j].depth != d || len(w.look[j].tab) != len(w.nodes[t]) ||
			len(w.nodes[t]) > 0 && &w.look[j].tab[0] != &w.nodes[t][0] {
			return fmt.Errorf("key wheel: look entry %d does not match table %d", j, t)
		}
	}
	if len(w.look) != len(w.dir) {
		return fmt.Errorf("key wheel: %d look entries for a directory of %d", len(w.look), len(w.dir))
	}
	total := 0
	for t, tab := range w.nodes {
		count := 0
		ctrl := w.tables[t].ctrl
		if len(ctrl) != len(tab)+group || string(ctrl[len(tab):]) != string(ctrl[:group]) {
			return fmt.Errorf("key wheel: table %d of %d slots has %d control bytes, or a bad copy", t, len(tab), len(ctrl))
		}
		for s := range tab {
			n := &tab[s]
			if (n.next == 0) != (ctrl[s] == empty) {
				return fmt.Errorf("key wheel: table %d slot %d: next %d, control byte %#x", t, s, n.next, ctrl[s])
			}
			if n.next == 0 {
				continue
			}
			count++
			ft, _, tag, fs, found := w.find(n.value.key)
			if ctrl[s] != tag {
				return fmt.Errorf("key wheel: key %v has control byte %#x, want %#x", n.value.key, ctrl[s], tag)
			}
			if !found || int(ft) != t || fs != s {
				return fmt.Errorf("key wheel: key %v in table %d slot %d is found at %d/%d (%v)", n.value.key, t, s, ft, fs, found)
			}
		}
		if count != int(w.tables[t].count) {
			return fmt.Errorf("key wheel: table %d holds %d keys, count says %d", t, count, w.tables[t].count)
		}
		if count*5 > len(tab)*4 {
			return fmt.Errorf("key wheel: table %d holds %d keys in %d slots", t, count, len(tab))
		}
		total += count
	}
	if total != w.len {
		return fmt.Errorf("key wheel: tables hold %d keys, the wheel %d", total, w.len)
	}
	return nil
}
