package hourglass

import "math"

// idTable hands out small int32 ids and keeps a value for each: the ids by
// which a structure of package queue knows a Timer's timeouts or a Keyed's
// keys. Values live in pages of idPage, so the table grows without copying
// and, for a pointer-free V, without anything for the garbage collector to
// scan. Ids are reused once released. It is not safe for concurrent use.
type idTable[V any] struct {
	pages [][]V
	free  []int32 // released ids, reused first
	top   int32   // ids below top have been handed out
}

const idPage = 1 << 12

// alloc returns a free id holding v.
func (t *idTable[V]) alloc(v V) int32 {
	var id int32
	if n := len(t.free); n > 0 {
		id = t.free[n-1]
		t.free = t.free[:n-1]
	} else {
		if t.top == math.MaxInt32 {
			panic("hourglass: more than 2^31-1 pending timeouts in one shard")
		}
		id = t.top
		t.top++
		if int(id/idPage) == len(t.pages) {
			t.pages = append(t.pages, make([]V, idPage))
		}
	}
	t.pages[id/idPage][id%idPage] = v
	return id
}

// get returns id's value.
func (t *idTable[V]) get(id int32) V { return t.pages[id/idPage][id%idPage] }

// release frees id, dropping its value so that what it refers to can be
// collected.
func (t *idTable[V]) release(id int32) {
	var zero V
	t.pages[id/idPage][id%idPage] = zero
	t.free = append(t.free, id)
}
