package broker

// slotsPerPage is the number of consecutive job ids a page of slots covers:
// 1024 slots of 16 bytes = 16 KiB a page.
const slotsPerPage = 1 << slotsPageBits

const slotsPageBits = 10

// slotsSparseBelow is the number of live slots under which a page is
// emptied into the sparse map and freed: a quarter of a page, so that a
// page costs at most 64 bytes a live task (16 KiB / 256), while a map
// entry costs about 52 (measured in docs/BENCHMARKS.md, serve).
const slotsSparseBelow = slotsPerPage / 4

// slots holds the slot of every live task, indexed by job id. Job ids are
// given in increasing order and most tasks live in the pages of recent
// ids, so slots keeps dense pages of consecutive ids: 16 bytes a task, and
// a lookup is two indexings, against about 52 bytes and a hash probe for a
// map. A page whose tasks have mostly gone (fewer than slotsSparseBelow)
// is emptied into a map and freed, and ids behind the newest page whose
// page is gone stay in that map: a few long-lived tasks among many
// finished ones never hold whole pages.
//
// Example, with 4-slot pages and pages freed under 2 live: ids 1-9 put,
// pages [0-3] [4-7] [8-11]; 0-2 and 4-6 finish: page [0-3] keeps 3 (one
// live), below 2 → 3 moves to the map and the page is freed; base moves
// to 4. A later put of id 12 opens page [12-15]; a requeue of 3 updates
// the map entry.
//
// get takes O(1); set and del take O(1) (amortised: a freed page empties
// into the map once) and, when a task comes, goes, or changes its due
// time or queue, O(log n) more for its queue's due order (dueOrder); each
// visits all live tasks in O(pages + map). slots is not
// safe for concurrent use: the broker's mutex guards it.
type slots struct {
	// pages[i] covers ids base+i*slotsPerPage ...; nil when freed or
	// never opened.
	pages []*slotPage
	// base is the first id of pages[0], a multiple of slotsPerPage.
	base uint64
	// sparse holds live slots whose ids have no page.
	sparse map[uint64]slot
	// n is the number of live tasks.
	n int
	// order is every live task in its queue's due order, kept by set and
	// del.
	order dueOrder
}

// slotPage is slotsPerPage consecutive slots; a zero slot (state 0) is
// free.
type slotPage struct {
	live int
	s    [slotsPerPage]slot
}

// get returns job's slot and whether job is live.
func (ss *slots) get(job uint64) (slot, bool) {
	if p, i := ss.page(job); p != nil {
		s := p.s[i]
		return s, s.state() != 0
	}
	s, ok := ss.sparse[job]
	return s, ok
}

// at returns job's slot, zero when job is not live.
func (ss *slots) at(job uint64) slot {
	s, _ := ss.get(job)
	return s
}

// page returns the page covering job, if it has one, and job's index in it.
func (ss *slots) page(job uint64) (*slotPage, int) {
	if job < ss.base {
		return nil, 0
	}
	k := (job - ss.base) >> slotsPageBits
	if k >= uint64(len(ss.pages)) {
		return nil, 0
	}
	return ss.pages[k], int(job & (slotsPerPage - 1))
}

// set stores s (whose state must not be 0) as job's slot.
func (ss *slots) set(job uint64, s slot) {
	if s.state() == 0 {
		panic("hourglass: broker: slot without a state")
	}
	if old, ok := ss.get(job); !ok {
		ss.order.add(s.queue(), s.due, job)
	} else if old.due != s.due || old.queue() != s.queue() {
		ss.order.remove(old.queue(), old.due, job)
		ss.order.add(s.queue(), s.due, job)
	}
	p, i := ss.page(job)
	if p == nil {
		if _, ok := ss.sparse[job]; ok || !ss.opens(job) {
			if !ok {
				ss.n++
			}
			if ss.sparse == nil {
				ss.sparse = make(map[uint64]slot)
			}
			ss.sparse[job] = s
			return
		}
		p, i = ss.open(job)
	}
	if p.s[i].state() == 0 {
		p.live++
		ss.n++
	}
	p.s[i] = s
}

// opens reports whether a slot for job, which has no page, opens one: only
// past the newest page (or in the first), so that ids behind it whose page
// was freed stay sparse.
func (ss *slots) opens(job uint64) bool {
	return len(ss.pages) == 0 || job >= ss.base+uint64(len(ss.pages))<<slotsPageBits
}

// open adds the page covering job past the newest one.
func (ss *slots) open(job uint64) (*slotPage, int) {
	first := job &^ (slotsPerPage - 1)
	if n := len(ss.pages); n > 0 && ss.pages[n-1] != nil && ss.pages[n-1].live < slotsSparseBelow {
		ss.free(ss.base + uint64(n-1)<<slotsPageBits) // no longer the newest
	}
	if len(ss.pages) == 0 {
		ss.base = first
	}
	k := int((first - ss.base) >> slotsPageBits)
	for len(ss.pages) < k {
		ss.pages = append(ss.pages, nil)
	}
	p := new(slotPage)
	ss.pages = append(ss.pages, p)
	return p, int(job & (slotsPerPage - 1))
}

// del forgets job's slot, if any.
func (ss *slots) del(job uint64) {
	if old, ok := ss.get(job); ok {
		ss.order.remove(old.queue(), old.due, job)
	}
	p, i := ss.page(job)
	if p == nil {
		if _, ok := ss.sparse[job]; ok {
			delete(ss.sparse, job)
			ss.n--
		}
		return
	}
	if p.s[i].state() == 0 {
		return
	}
	p.s[i] = slot{}
	p.live--
	ss.n--
	if p.live < slotsSparseBelow && !ss.newest(p) {
		ss.free(job)
	}
}

// newest reports whether p is the newest page, which new ids still fill
// and which is never freed.
func (ss *slots) newest(p *slotPage) bool { return ss.pages[len(ss.pages)-1] == p }

// free empties the page covering job into the sparse map and drops it,
// then drops the leading pages that are gone.
func (ss *slots) free(job uint64) {
	k := (job - ss.base) >> slotsPageBits
	p := ss.pages[k]
	first := ss.base + k<<slotsPageBits
	for i, s := range p.s {
		if s.state() != 0 {
			if ss.sparse == nil {
				ss.sparse = make(map[uint64]slot)
			}
			ss.sparse[first+uint64(i)] = s
		}
	}
	ss.pages[k] = nil
	for len(ss.pages) > 1 && ss.pages[0] == nil {
		ss.pages = ss.pages[1:]
		ss.base += slotsPerPage
	}
}

// compact frees every page but the newest that holds fewer than
// slotsSparseBelow live slots (recovery opens pages for whatever ids it
// finds, however few are left in them).
func (ss *slots) compact() {
	var firsts []uint64
	for k, p := range ss.pages[:max(len(ss.pages)-1, 0)] {
		if p != nil && p.live < slotsSparseBelow {
			firsts = append(firsts, ss.base+uint64(k)<<slotsPageBits)
		}
	}
	for _, first := range firsts {
		ss.free(first) // free finds the page from base, which it may move
	}
}

// eachPaged calls f with every live job in the page covering first (a
// multiple of slotsPerPage), if there is one, and returns the first id of
// the next page, or 0 past the newest page. A caller that visits the pages
// one at a time, releasing its lock in between, calls it with 0 first and
// then with what it returned; pages freed meanwhile move their slots into
// the sparse map, which it visits last (eachSparse).
func (ss *slots) eachPaged(first uint64, f func(job uint64, s slot)) uint64 {
	end := ss.base + uint64(len(ss.pages))<<slotsPageBits
	if first < ss.base {
		first = ss.base
	}
	if first >= end {
		return 0
	}
	if p, _ := ss.page(first); p != nil {
		for i, s := range p.s {
			if s.state() != 0 {
				f(first+uint64(i), s)
			}
		}
	}
	return first + slotsPerPage
}

// eachSparse calls f with every live job of the sparse map.
func (ss *slots) eachSparse(f func(job uint64, s slot)) {
	for j, s := range ss.sparse {
		f(j, s)
	}
}

// len returns the number of live tasks.
func (ss *slots) len() int { return ss.n }

// each calls f with every live job and its slot, pages in id order first,
// then the sparse map in no order, until f returns false.
func (ss *slots) each(f func(job uint64, s slot) bool) {
	for k, p := range ss.pages {
		if p == nil {
			continue
		}
		first := ss.base + uint64(k)<<slotsPageBits
		for i, s := range p.s {
			if s.state() != 0 && !f(first+uint64(i), s) {
				return
			}
		}
	}
	for j, s := range ss.sparse {
		if !f(j, s) {
			return
		}
	}
}
