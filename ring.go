package hourglass

// This file is the ring: the lock-free part of a Timer shard's inbox,
// through which new timeouts reach an awake driver without the shard's
// lock (see driver.offer).

import (
	"runtime"
	"sync/atomic"
)

// ringSize is how many items a ring holds: as many as the inboxes that
// may wait for an awake driver (fullMax of batchSize, see driver.put), so
// that the ring bounds what callers queue ahead of the driver as they
// did. A power of two, for the index's mask.
const ringSize = fullMax * batchSize

// ring is a bounded queue of many producers and one consumer, without a
// lock: a producer claims a position with one CompareAndSwap of tail,
// writes its item to that position's cell, and publishes it by setting
// the cell's seq; the consumer takes the published items in order and
// advances head once for all it took. A cell is free for position p once
// head has passed p-ringSize. push is O(1) and never waits (it reports a
// full ring instead); drain waits only for a producer between its claim
// and its publication, a few instructions. The consumer's calls must be
// serialized (the driver's lock does it). A ring of *Timeout is 64 KiB.
type ring[T any] struct {
	// tail is the next position to claim. Written by producers.
	tail atomic.Uint64
	_    [56]byte
	// head is the next position to take. Written by the consumer only.
	head atomic.Uint64
	_    [56]byte
	cell [ringSize]ringCell[T]
}

// ringCell holds position seq-1's item once seq is set; the producer
// writes v before seq, and the consumer reads and clears v after it.
type ringCell[T any] struct {
	seq atomic.Uint64
	v   T
}

// push queues v at position pos, reporting false if the ring is full.
// It is safe for concurrent use. v has been taken (drain) once head has
// passed pos.
func (r *ring[T]) push(v T) (pos uint64, ok bool) {
	for {
		t := r.tail.Load()
		if t-r.head.Load() >= ringSize {
			return 0, false
		}
		if r.tail.CompareAndSwap(t, t+1) {
			c := &r.cell[t%ringSize]
			c.v = v
			c.seq.Store(t + 1)
			return t, true
		}
	}
}

// drain hands every item claimed before the call to take, in order of
// position, in slices of buf's capacity, waiting for any claimed and not
// yet published. It returns buf, cleared, for reuse. Consumer only.
func (r *ring[T]) drain(buf []T, take func([]T)) []T {
	var zero T
	h, t := r.head.Load(), r.tail.Load()
	for h < t {
		c := &r.cell[h%ringSize]
		if c.seq.Load() != h+1 {
			// Claimed, not yet published: the producer is between its
			// CompareAndSwap and its store, unless it was preempted there.
			runtime.Gosched()
			continue
		}
		buf = append(buf, c.v)
		c.v = zero
		h++
		if len(buf) == cap(buf) {
			r.head.Store(h)
			take(buf)
			clear(buf)
			buf = buf[:0]
		}
	}
	r.head.Store(h)
	if len(buf) > 0 {
		take(buf)
		clear(buf)
		buf = buf[:0]
	}
	return buf
}

// full reports whether push would find the ring full.
func (r *ring[T]) full() bool { return r.tail.Load()-r.head.Load() >= ringSize }

// empty reports whether every item claimed so far has been taken.
func (r *ring[T]) empty() bool { return r.head.Load() == r.tail.Load() }
