package hourglass

import "github.com/hourglass-go/hourglass/queue"

// keyStore holds a Keyed's deadlines: at most one per key, set, moved and
// removed by key. [queue.KeyWheel], the default, is one; mapStore runs
// the other structures under a Go map.
type keyStore[K comparable] interface {
	// Set queues key at when or moves it there, and reports whether key
	// was added.
	Set(key K, when uint64) bool
	// SetAll sets each key in turn, as Set does.
	SetAll(sets []queue.KeyDeadline[K])
	Remove(key K) bool
	When(key K) (uint64, bool)
	Len() int
	Next() (uint64, bool)
	// Advance hands each due key to fire, after taking it out.
	Advance(now uint64, fire func(key K))
	// Drain takes every key out, handing each to fn.
	Drain(fn func(key K))
}

var _ keyStore[int] = (*queue.KeyWheel[int])(nil)

// newKeyStore makes the store for the structure c names.
func newKeyStore[K comparable](c *config) keyStore[K] {
	if c.kind == kindHierarchical {
		return queue.NewKeyWheel[K](c.tick)
	}
	return newMapStore(newKeyQueue[K](c))
}

// mapStore keeps a Keyed's deadlines in one of the id-based structures:
// a Go map takes each key to its id and its current deadline, which may
// be later than the one the id is filed at. Keeping the deadline in the
// map lets Set push it back with one map write and nothing else; the id
// is filed again when its old deadline comes (see fireID).
type mapStore[K comparable] struct {
	q     keyQueue[K]
	state map[K]keyState
	ids   ids
	fire  func(key K)           // Advance's, while it runs
	each  func(id int32, key K) // s.fireID, made once
}

type keyState struct {
	id   int32
	when uint64
}

func newMapStore[K comparable](q keyQueue[K]) *mapStore[K] {
	s := &mapStore[K]{q: q, state: make(map[K]keyState)}
	s.each = s.fireID
	return s
}

func (s *mapStore[K]) Set(key K, when uint64) bool {
	if st, ok := s.state[key]; ok {
		if when < st.when {
			s.q.Move(st.id, when) // earlier: the structure must know now
		}
		s.state[key] = keyState{st.id, when}
		return false
	}
	id := s.ids.alloc()
	s.state[key] = keyState{id, when}
	s.q.Add(id, when, key)
	return true
}

func (s *mapStore[K]) SetAll(sets []queue.KeyDeadline[K]) {
	for _, kd := range sets {
		s.Set(kd.Key, kd.When)
	}
}

func (s *mapStore[K]) Remove(key K) bool {
	st, ok := s.state[key]
	if !ok {
		return false
	}
	s.q.Remove(st.id)
	s.forget(key, st.id)
	return true
}

func (s *mapStore[K]) forget(key K, id int32) {
	delete(s.state, key)
	s.ids.release(id)
}

func (s *mapStore[K]) When(key K) (uint64, bool) {
	st, ok := s.state[key]
	return st.when, ok
}

func (s *mapStore[K]) Len() int             { return len(s.state) }
func (s *mapStore[K]) Next() (uint64, bool) { return s.q.Next() }

func (s *mapStore[K]) Advance(now uint64, fire func(key K)) {
	s.fire = fire
	s.q.Advance(now, s.each)
	s.fire = nil
}

// fireID is the structure's fire callback: the deadline id was filed at
// has come. If Set has since pushed the key's deadline back, the id is
// filed again at it (a deadline already reached fires on the next
// Advance); otherwise the key is due.
func (s *mapStore[K]) fireID(id int32, key K) {
	if st := s.state[key]; st.when > s.q.When(id) {
		s.q.Add(id, st.when, key)
		return
	}
	s.forget(key, id)
	s.fire(key)
}

func (s *mapStore[K]) Drain(fn func(key K)) {
	s.q.Drain(func(id int32, key K) {
		s.forget(key, id)
		fn(key)
	})
}
