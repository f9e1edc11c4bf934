package broker

import (
	"time"

	"github.com/hourglass-go/hourglass/task"
)

// armAhead is how far ahead the delay wheel holds tasks. A delayed task
// due later than that is only its 16-byte slot (slots.go) until a sweep of
// the slots arms it; sweeps run every armAhead/2, each arming what falls
// due before armAhead from then, so every task is in the wheel at least
// armAhead/2 before it is due.
//
// The slots are the wheel's overflow level, as in Kafka's purgatory, where
// a timer beyond the wheel's span waits in an overflow wheel: a key in the
// wheel costs about 45 bytes, a slot 16, and a queue of tasks due in hours
// or days keeps only the next minute's in the wheel. A restart arms only
// those, too. A sweep visits every slot, a page at a time with the lock
// released in between: O(slots) every 30 s.
//
// Example, with armAhead = 60 s and a sweep at 12:00:00: armedUntil
// becomes 12:01:00 and the sweep arms the tasks due from the old
// armedUntil (12:00:30) to 12:01:00; a put at 12:00:10 due at 12:00:50 is
// armed at once (before armedUntil), one due at 12:05 waits in its slot
// until the sweep at 12:04:30 or earlier.
const armAhead = time.Minute

// sweepLoop runs sweep every armAhead/2 until the broker shuts down.
func (b *Broker) sweepLoop() {
	defer close(b.sweepDone)
	t := time.NewTimer(armAhead / 2)
	defer t.Stop()
	for {
		select {
		case <-b.quit:
			return
		case <-t.C:
		}
		b.sweep()
		t.Reset(armAhead / 2)
	}
}

// sweep moves armedUntil to armAhead from now and arms every delayed task
// due between the old and the new armedUntil (making ready any already
// due, after a stall). It holds b.mu one page of slots at a time; a task
// placed meanwhile is armed by place, which reads the new armedUntil.
func (b *Broker) sweep() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	from := b.armedUntil
	b.armedUntil = time.Now().Add(armAhead).UnixNano()
	until := b.armedUntil
	arm := func(job uint64, s slot) {
		if s.state() == task.Delayed && s.due >= from && s.due < until {
			b.armTaskLocked(job, s, time.Now().UnixNano())
		}
	}
	for next := uint64(0); ; {
		if next = b.tasks.eachPaged(next, arm); next == 0 {
			break
		}
		b.mu.Unlock()
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			return
		}
	}
	b.tasks.eachSparse(arm)
	b.mu.Unlock()
}

// armTaskLocked puts the delayed task job in the delay wheel, or on its
// queue's ready heap if it is due already. b.mu must be held.
func (b *Broker) armTaskLocked(job uint64, s slot, now int64) {
	if s.due > now {
		b.delays.Set(job, time.Duration(s.due-now))
		return
	}
	b.fallDueLocked(job, s)
}
