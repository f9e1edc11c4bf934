package queue

import (
	"encoding/binary"
	"hash/maphash"
	"math/bits"
)

// keyTable is the hash table of a [KeyQueue]: it finds a key's node, and
// its tables are the pages of the node table the structure links, so a
// key, its deadline and its links sit in one record: 16 bytes, 4 of the
// key's hash, and the key (32 bytes in all for an 8-byte key).
//
// It is an extendible hash table of linear-probing tables, as Go's own
// maps are built: a directory indexed by a hash's top bits names the
// table, and within it a key's home slot comes from the hash's next bits.
// Beside the records, each table keeps a control byte per slot, empty or
// 7 more bits of the full slot's hash, so a probe compares eight slots at
// a time in one word and reads a record only where the bits match:
// usually just the key's own. A table is rebuilt 1.5 times larger when it
// passes 80% full, and split in two, by one more hash bit, when that would
// pass 2^16 slots, so no insertion moves more than 52,429 entries and
// occupancy stays between 53% and 80%: for an 8-byte key, 41 to 62 bytes
// per key, everything included. Removal shifts later entries of the probe
// run back rather than leaving tombstones. A record moved in the table
// keeps its place in the structure, which is told of the move
// (structure.relocate, structure.rehome).
//
// Worked example: with 2 tables the directory has depth 1; a key whose
// 64-bit hash starts with bit 1 lives in table 1. Bits 1 to 31 of the hash
// scaled to the table's 40,000 slots give its home, say slot 17,000; its
// control byte is the hash's low 7 bits, say 0x2a. A lookup reads the
// control bytes of slots 17,000 to 17,007, finds 0x2a at 17,001 and an
// empty byte at 17,003, and compares the key in record 17,001.
//
// Costs: a lookup, an insertion and a removal O(1) expected (a hash, a
// probe of a few slots); an insertion rebuilds one table at most, O(1)
// amortized. For a K without pointers the tables hold none, and the
// garbage collector does not scan them.
type keyTable[K comparable] struct {
	t    *table[keyEntry[K]] // t.nodes[j] is table j's records
	s    structure[keyEntry[K]]
	seed maphash.Seed
	// dir names the table for each value of a hash's top depth bits;
	// several entries name a table whose local depth is below depth.
	dir   []int32
	depth uint
	// tables holds each table's count, local depth and control bytes;
	// node i is slot i&mask of table i>>shift.
	tables []tableInfo
	// look holds, for each directory entry, what SetAll needs to find a
	// key at its home slot: its table's number, records and local depth,
	// one load away instead of three. grow and reset rebuild it.
	look []lookup[K]
}

// lookup is an entry of keyTable.look.
type lookup[K comparable] struct {
	tab   []node[keyEntry[K]]
	depth uint
	t     int32
}

// keyEntry is what a KeyQueue's node holds besides its deadline and links:
// the key, and the top 32 bits of its hash, from which a rebuild or a
// removal finds the key's home slot without hashing again.
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
	minTable  = 8  // slots in a new KeyQueue's one table: one group

	group = 8    // control bytes read at once, in a uint64
	empty = 0x80 // the control byte of an empty slot; a full one is < 0x80

	lsb = 0x0101010101010101 // the low bit of each byte in a group
	msb = 0x8080808080808080 // the high bit of each byte in a group
)

// relook rebuilds k.look from the directory and the tables. It is
// O(directory), run when a table is replaced.
func (k *keyTable[K]) relook() {
	k.look = k.look[:0]
	for _, t := range k.dir {
		k.look = append(k.look, lookup[K]{k.t.nodes[t], k.tables[t].depth, t})
	}
}

// reset empties the table: one table of minTable slots.
func (k *keyTable[K]) reset() {
	k.t.nodes = [][]node[keyEntry[K]]{make([]node[keyEntry[K]], minTable)}
	k.tables = []tableInfo{{ctrl: newCtrl(minTable)}}
	k.dir, k.depth = []int32{0}, 0
	k.relook()
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
func (k *keyTable[K]) find(key K) (t int32, h uint32, tag byte, s int, found bool) {
	return k.findHashed(key, maphash.Comparable(k.seed, key))
}

// findHashed is find for a key whose hash is h64.
func (k *keyTable[K]) findHashed(key K, h64 uint64) (t int32, h uint32, tag byte, s int, found bool) {
	t = k.dir[h64>>(64-k.depth)]
	h, tag = uint32(h64>>32), byte(h64&0x7f)
	tab, info := k.t.nodes[t], &k.tables[t]
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

// insert claims a slot for key, which is not in the table and whose hash
// is h64, and returns its index and node: the table may first be grown.
func (k *keyTable[K]) insert(key K, h64 uint64) (int32, *node[keyEntry[K]]) {
	t, h, tag, s, _ := k.findHashed(key, h64)
	for (int(k.tables[t].count)+1)*5 > len(k.t.nodes[t])*4 {
		k.grow(t)
		t, h, tag, s, _ = k.findHashed(key, h64)
	}
	n := &k.t.nodes[t][s]
	n.value = keyEntry[K]{h, key}
	k.tables[t].setCtrl(s, tag)
	k.tables[t].count++
	return t<<k.t.shift | int32(s), n
}

// delete empties slot i, whose node is out of the structure, and moves
// later entries of its probe run back into the gap, each that may move
// (whose home is not between the gap and it), so that every key stays
// reachable from its home without tombstones.
func (k *keyTable[K]) delete(i int32) {
	t, gap := i>>k.t.shift, int(i&k.t.mask)
	tab, info := k.t.nodes[t], &k.tables[t]
	tab[gap] = node[keyEntry[K]]{}
	for j := gap; ; {
		if j++; j == len(tab) {
			j = 0
		}
		if info.ctrl[j] == empty {
			break
		}
		n := &tab[j]
		h := home(n.value.hash, info.depth, len(tab))
		if gap <= j && (h <= gap || h > j) || gap > j && h <= gap && h > j {
			tab[gap] = *n
			info.setCtrl(gap, info.ctrl[j])
			k.s.relocate(t<<k.t.shift|int32(gap), &tab[gap])
			*n = node[keyEntry[K]]{}
			gap = j
		}
	}
	info.setCtrl(gap, empty)
	info.count--
}

// grow makes room in table t: a table of 1.5 times its slots, or, at the
// largest size, two tables split by the next hash bit.
func (k *keyTable[K]) grow(t int32) {
	old, info := k.t.nodes[t], k.tables[t]
	defer k.relook()
	if len(old) < k.maxTable() {
		k.rebuild(t, old, info.ctrl, info.depth, min(len(old)*3/2, k.maxTable()), -1, 0)
		return
	}
	// Table indices and the directory's depth are bounded so that every
	// index+1 fits an int32.
	if len(k.tables) >= 1<<(31-k.t.shift)-1 {
		panic("queue: KeyQueue full")
	}
	d := info.depth
	if d == k.depth {
		if k.depth == 31-k.t.shift {
			panic("queue: KeyQueue full")
		}
		dir := make([]int32, 2*len(k.dir))
		for j := range dir {
			dir[j] = k.dir[j>>1]
		}
		k.dir, k.depth = dir, k.depth+1
	}
	// The keys whose bit d (from the top) is 1 go to a new table u, sized
	// for 60% occupancy.
	u := int32(len(k.tables))
	ones := 0
	for j := range old {
		if info.ctrl[j] != empty && old[j].value.hash>>(31-d)&1 == 1 {
			ones++
		}
	}
	zeros := int(info.count) - ones
	k.t.nodes = append(k.t.nodes, nil)
	k.tables = append(k.tables, tableInfo{})
	for j := range k.dir {
		if k.dir[j] == t && j>>(k.depth-1-d)&1 == 1 {
			k.dir[j] = u
		}
	}
	k.rebuild(t, old, info.ctrl, d+1, k.sized(zeros), u, k.sized(ones))
}

// sized returns the slots for a table of n keys at 60% occupancy.
func (k *keyTable[K]) sized(n int) int { return min(max(n*5/3+1, minTable), k.maxTable()) }

// maxTable returns the most slots a table may have.
func (k *keyTable[K]) maxTable() int { return 1 << k.t.shift }

// rebuild moves the entries of old, which was table t with control bytes
// ctrl, into a new table t of c slots, or, if u >= 0, into new tables t
// and u of c and cu slots by hash bit depth-1, both of local depth depth.
// The structure is then told where each moved node went, and which of
// its neighbours moved with it (structure.rehome).
func (k *keyTable[K]) rebuild(t int32, old []node[keyEntry[K]], ctrl []byte, depth uint, c int, u int32, cu int) {
	k.t.nodes[t] = make([]node[keyEntry[K]], c)
	k.tables[t] = tableInfo{depth: depth, ctrl: newCtrl(c)}
	if u >= 0 {
		k.t.nodes[u] = make([]node[keyEntry[K]], cu)
		k.tables[u] = tableInfo{depth: depth, ctrl: newCtrl(cu)}
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
		tab, info := k.t.nodes[dst], &k.tables[dst]
		s := home(n.value.hash, depth, len(tab))
		for info.ctrl[s] != empty {
			if s++; s == len(tab) {
				s = 0
			}
		}
		tab[s] = *n
		info.setCtrl(s, ctrl[j])
		info.count++
		to[j] = dst<<k.t.shift | int32(s)
	}
	moved := func(link int32) (int32, bool) {
		if (link-1)>>k.t.shift == t {
			return to[(link-1)&k.t.mask] + 1, true
		}
		return 0, false
	}
	for j := range old {
		if ctrl[j] != empty {
			k.s.rehome(to[j], k.t.node(to[j]), moved)
		}
	}
}
