package hourglass

import "github.com/hourglass-go/hourglass/queue"

// keyQueue is the deadline structure behind a Keyed: deadlines by int32
// id. [queue.IndexWheel] is one; entryQueue adapts the other structures.
type keyQueue interface {
	Add(id int32, when uint64)
	Move(id int32, when uint64)
	Remove(id int32) bool
	When(id int32) uint64
	Advance(now uint64, fire func(id int32))
	Next() (uint64, bool)
	Len() int
}

var _ keyQueue = (*queue.IndexWheel)(nil)

// entryQueue runs a Keyed over one of the entry-based structures (hashed
// wheel, heap, sorted list), keeping their entries in pages by id. Unlike
// an IndexWheel it holds pointers, which the garbage collector scans, and
// a Move relinks.
type entryQueue struct {
	q     queue.Queue[int32]
	pages [][]queue.Entry[int32]
	fire  func(id int32)              // Advance's, while it runs
	each  func(e *queue.Entry[int32]) // e.fireEntry, made once
}

const entryPage = 1 << 12

func newEntryQueue(q queue.Queue[int32]) *entryQueue {
	a := &entryQueue{q: q}
	a.each = a.fireEntry
	return a
}

// entry returns id's entry, growing the pages to hold it.
func (a *entryQueue) entry(id int32) *queue.Entry[int32] {
	p := int(id / entryPage)
	for p >= len(a.pages) {
		base := int32(len(a.pages) * entryPage)
		page := make([]queue.Entry[int32], entryPage)
		for i := range page {
			page[i].Value = base + int32(i)
		}
		a.pages = append(a.pages, page)
	}
	return &a.pages[p][id%entryPage]
}

func (a *entryQueue) Add(id int32, when uint64) { a.q.Add(a.entry(id), when) }
func (a *entryQueue) Remove(id int32) bool      { return a.q.Remove(a.entry(id)) }
func (a *entryQueue) When(id int32) uint64      { return a.entry(id).When() }
func (a *entryQueue) Next() (uint64, bool)      { return a.q.Next() }
func (a *entryQueue) Len() int                  { return a.q.Len() }

func (a *entryQueue) Move(id int32, when uint64) {
	e := a.entry(id)
	a.q.Remove(e)
	a.q.Add(e, when)
}

func (a *entryQueue) Advance(now uint64, fire func(id int32)) {
	a.fire = fire
	a.q.Advance(now, a.each)
	a.fire = nil
}

func (a *entryQueue) fireEntry(e *queue.Entry[int32]) { a.fire(e.Value) }
