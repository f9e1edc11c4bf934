package queue

// sortedList is a doubly linked list of nodes kept in deadline order: the
// textbook baseline every timer structure is measured against.
//
// Costs, for n queued nodes: add O(n), remove O(1), next O(1), and advance
// O(k) for k nodes due. add searches from the latest deadline backwards,
// so deadlines that arrive in increasing order (one fixed delay for every
// timeout, say) are O(1); random deadlines are O(n), which is why the list
// is only usable for small n. Nodes with equal deadlines fire in the order
// they were added. Deadlines are exact.
type sortedList[V any] struct {
	base[V] // lists: the list (0), then due and firing
}

func newSortedList[V any](t *table[V]) *sortedList[V] {
	s := &sortedList[V]{}
	s.init(t, 1)
	return s
}

func (s *sortedList[V]) add(i int32, n *node[V]) {
	s.len++
	if n.when <= s.now {
		s.link(s.dueList(), i, n)
		return
	}
	at := s.lists[0].tail - 1
	for at >= 0 {
		a := s.node(at)
		if a.when <= n.when {
			break
		}
		at = a.prev - 1 // -1 past the head, whose prev names the list
		if at < 0 {
			at = -1
		}
	}
	s.linkAfter(0, at, i, n)
}

func (s *sortedList[V]) remove(i int32, n *node[V]) {
	s.unlink(i, n)
	s.len--
}

func (s *sortedList[V]) move(i int32, n *node[V], when uint64) {
	s.remove(i, n)
	n.when = when
	s.add(i, n)
}

// next reports the earliest deadline. It is O(1).
func (s *sortedList[V]) next() (uint64, bool) {
	if s.pendingDue() {
		return s.now, true
	}
	if h := s.lists[0].head; h != 0 {
		return s.node(h - 1).when, true
	}
	return 0, false
}

// advance fires every node whose deadline is at or before now, in
// deadline order after those added already due.
func (s *sortedList[V]) advance(now uint64, release func(i int32, n *node[V])) {
	s.begin(now)
	s.stageDue()
	for h := s.lists[0].head; h != 0; h = s.lists[0].head {
		i := h - 1
		n := s.node(i)
		if n.when > s.now {
			break
		}
		s.unlink(i, n)
		s.link(s.firingList(), i, n)
	}
	s.fire(release)
}

func (s *sortedList[V]) drain(fn func(i int32, n *node[V])) { s.drainLists(fn) }
