package hourglass

import "math"

// ids hands out small int32 ids, the names by which a structure of package
// queue knows a Timer's timeouts or a Keyed's keys. Released ids are reused
// first, so the ids in use stay dense and the structures' tables small. It
// is not safe for concurrent use.
type ids struct {
	free []int32 // released ids
	top  int32   // ids below top have been handed out
}

// alloc returns a free id.
func (t *ids) alloc() int32 {
	if n := len(t.free); n > 0 {
		id := t.free[n-1]
		t.free = t.free[:n-1]
		return id
	}
	if t.top == math.MaxInt32 {
		panic("hourglass: more than 2^31-1 pending timeouts in one shard")
	}
	t.top++
	return t.top - 1
}

// release makes id free for reuse.
func (t *ids) release(id int32) { t.free = append(t.free, id) }
