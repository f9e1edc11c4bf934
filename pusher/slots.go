package pusher

// Fair slots: a Pusher's Options.Concurrency push slots are shared
// between the push queues, and between the targets they push to (a
// target is a URL's scheme, host and port), so that an endpoint that
// accepts a connection and never answers holds only its share of them
// until its pushes time out, not every slot.
//
// With S slots and k queues with pushes under way, a queue may hold at
// most
//
//	share(k) = max(1, S / (k+1))
//
// pushes, k counting the queue itself (a queue with none under way
// would be one more), and a target the same over the targets. The +1
// keeps a share free for the next queue: a queue alone holds at most
// S/2, two at most S/3 each, and so on. With the default 128 slots: a
// queue whose endpoint hangs holds 64; a second queue, with a healthy
// endpoint, may start 42 pushes at once beside it, its share of three.
// A queue with more pushes than its share (the shares shrink as more
// queues push) starts no more until it is below its share again.
//
// The pusher takes tasks by ReserveQueues over the queues that may start
// pushes, for at most the room of the tightest of them, so no reserve
// hands a queue or a target more than its share. A queue is left out of
// a reserve until its room is at least a quarter of its share (batch),
// so that a busy queue refills by batches of reserves rather than one
// task at a time. A reserve waiting for the queues it polls is cut short
// once a queue it left out may start pushes again.

// slots counts a Pusher's push slots: free ones, and the pushes under
// way by queue and by target. It is a plain structure: Pusher.mu guards
// it. Its operations cost O(1) but plan and eligibleLeftOut, linear in
// the queues they are given.
type slots struct {
	size, free int
	// queues and targets count the pushes under way of each; a key with
	// none is deleted, so that len is the number of queues (targets)
	// pushing.
	queues, targets map[string]int
}

// newSlots returns n free slots.
func newSlots(n int) *slots {
	return &slots{size: n, free: n, queues: map[string]int{}, targets: map[string]int{}}
}

// share returns the most pushes a key of busy may hold: max(1,
// size/(k+1)), k the keys with pushes under way counting key.
func (s *slots) share(busy map[string]int, key string) int {
	k := len(busy)
	if busy[key] == 0 {
		k++
	}
	return max(1, s.size/(k+1))
}

// room returns how many more pushes queue q, pushing to target, may
// start now within its share and its target's, and whether that is
// enough for it to be reserved from (at least a quarter of the tighter
// share, and at least 1).
func (s *slots) room(q, target string) (int, bool) {
	qs, ts := s.share(s.queues, q), s.share(s.targets, target)
	room := min(qs-s.queues[q], ts-s.targets[target])
	return room, room >= max(1, min(qs, ts)/4)
}

// plan chooses a reserve: the queues of names (target gives each one's
// target) that may start pushes, and how many tasks it may take, at most
// the free slots and the room of each; it takes that many slots, which
// started and unused give back to the queues or return. It returns 0
// when no queue may start a push or no slot is free, and the queues it
// left out.
func (s *slots) plan(names []string, target func(string) string) (take []string, n int, left []string) {
	if s.free == 0 {
		return nil, 0, nil
	}
	n = s.free
	for _, q := range names {
		room, ok := s.room(q, target(q))
		if !ok {
			left = append(left, q)
			continue
		}
		take = append(take, q)
		n = min(n, room)
	}
	if len(take) == 0 {
		return nil, 0, left
	}
	s.free -= n
	return take, n, left
}

// started counts a push of queue q to target, on a slot plan took.
func (s *slots) started(q, target string) {
	s.queues[q]++
	s.targets[target]++
}

// unused returns n slots plan took that no push filled.
func (s *slots) unused(n int) { s.free += n }

// done ends a push of queue q to target and frees its slot.
func (s *slots) done(q, target string) {
	s.free++
	if s.queues[q]--; s.queues[q] <= 0 {
		delete(s.queues, q)
	}
	if s.targets[target]--; s.targets[target] <= 0 {
		delete(s.targets, target)
	}
}

// eligibleLeftOut reports whether one of left, queues a plan left out,
// may now be reserved from (with a slot free for it).
func (s *slots) eligibleLeftOut(left []string, target func(string) string) bool {
	if s.free == 0 {
		return false
	}
	for _, q := range left {
		if _, ok := s.room(q, target(q)); ok {
			return true
		}
	}
	return false
}
