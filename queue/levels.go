package queue

import (
	"math"
	"math/bits"
)

const (
	levelBits = 6              // each level resolves 6 bits of the tick count
	levelSize = 1 << levelBits // 64 slots: one occupancy bit each in a uint64
	levelMask = levelSize - 1
)

// levels is the geometry of a hierarchical wheel, shared by
// [HierarchicalWheel] and [IndexWheel], which differ only in how a slot
// holds its entries: the tick, the current tick, and for each level the
// bitmap of occupied slots. The algorithm is explained on
// [HierarchicalWheel].
type levels struct {
	tick     uint64
	maxTick  uint64   // the tick of the latest representable deadline
	elapsed  uint64   // the current tick: every entry due at or before it has fired
	occupied []uint64 // per level, bit s set when slot s holds entries
}

// newLevels returns the geometry for tick, with as many levels as it
// takes to cover every uint64 deadline.
func newLevels(tick uint64) levels {
	maxTick := ceilTicks(math.MaxUint64, tick)
	n := (bits.Len64(maxTick) + levelBits - 1) / levelBits
	return levels{tick: tick, maxTick: maxTick, occupied: make([]uint64, n)}
}

// place returns the level and slot for an entry due at tick t, which must
// be after elapsed: the level of the highest 6-bit digit in which t and
// elapsed differ, and t's digit there.
func (v *levels) place(t uint64) (level int, slot uint64) {
	l := (bits.Len64((v.elapsed^t)|levelMask) - 1) / levelBits
	return l, (t >> (l * levelBits)) & levelMask
}

func (v *levels) occupy(l int, s uint64) { v.occupied[l] |= 1 << s }
func (v *levels) vacate(l int, s uint64) { v.occupied[l] &^= 1 << s }

// next finds the slot to visit next: its level, its index and the tick at
// which it starts. ok is false if no slot is occupied. Everything on a
// lower level is due before anything on a higher one, and every occupied
// slot of a level comes after the level's current slot, so the answer is
// the first occupied slot after the current one on the lowest non-empty
// level. It is O(levels).
func (v *levels) next() (lvl int, slot, start uint64, ok bool) {
	for l, occ := range v.occupied {
		if occ == 0 {
			continue
		}
		shift := uint(l * levelBits)
		cur := (v.elapsed >> shift) & levelMask
		after := occ &^ (uint64(2)<<cur - 1)
		s := uint64(bits.TrailingZeros64(after))
		// The start of slot s in the block of 64^(l+1) ticks that holds
		// elapsed. A shift of 64 or more yields 0 in Go, which clears the
		// whole tick count at the top level, as it should.
		block := v.elapsed &^ (uint64(1)<<(shift+levelBits) - 1)
		return l, s, block + s<<shift, true
	}
	return 0, 0, 0, false
}

// target returns the tick that Advance to now reaches; now ==
// math.MaxUint64 reaches the end of time, so everything fires.
func (v *levels) target(now uint64) uint64 {
	if now == math.MaxUint64 {
		return v.maxTick
	}
	return now / v.tick
}

// time returns the start of tick t on the caller's clock, saturating.
func (v *levels) time(t uint64) uint64 {
	if t > math.MaxUint64/v.tick {
		return math.MaxUint64
	}
	return t * v.tick
}

// filedAfterCurrent reports whether slot s of level l comes after the
// level's current slot, as every occupied slot must.
func (v *levels) filedAfterCurrent(l int, s uint64) bool {
	return s > (v.elapsed>>(l*levelBits))&levelMask
}
