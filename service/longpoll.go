package service

import (
	"context"
	"sync"
	"time"

	"github.com/hourglass-go/hourglass/task"
)

// The reserve long-poll, written once for both engines.
//
// A reserve that finds nothing ready waits up to its wait for a task made
// ready in one of its queues. An engine does the looking (Poller.Look:
// the broker under its lock, a cluster node in one SQL statement); this
// file does the waiting: one Waiter per blocked reserve, on the WaitList
// of each queue it reserves from, and LongPoll's loop (look; if nothing,
// wait for a signal, the next retry or the end of wait; leave; look
// again). The rules it keeps:
//
//   - No lost wake-up: an engine registers the waiter on its lists before
//     it looks, or atomically with finding nothing (under the lock that
//     makes tasks ready), so a task made ready after the look signals it.
//   - Waking by capacity: k tasks made ready wake the oldest waiters until
//     those woken can take k between them (WaitList.Wake), so 64 tasks
//     wake one reserver of max 100, which takes them in one look, rather
//     than 64 reservers racing for them.
//   - No lost signal: a waiter signalled while it gives up (its wait ran
//     out, its caller went away) passes the signal on to the lists that
//     signalled it, as many tasks as it stood for (Waiter.Leave).
//   - Nothing kept for a name: a waiter leaves its lists in O(its lists)
//     (Waiter.Leave), and the engine is told (Poller.Left), so that the
//     state a name has because a reserver waited on it goes with the
//     wait: a client naming queues at will makes no lasting state.
//   - Hand-over: a waiter on one queue that has looked and found nothing
//     may be handed tasks already reserved for it (WaitList.HandOver; the
//     cluster's flush reserves the tasks it makes ready for the node's
//     waiters in the same statement). Tasks handed to a waiter whose
//     caller has gone are given back (Poller.GiveBack), not lost until
//     their leases run out.
//
// A worked example: reservers A (max 10) and B (max 1) wait on "emails",
// A first. A put of 3 tasks calls Wake(3): A is signalled and taken off
// the list (it takes up to 10 ≥ 3), B stays. If A's wait runs out before
// it looks again, leave finds A signalled and off the list and calls
// Wake(10) on "emails": B is signalled, looks and takes one; the other
// two wait for the next reserve.

// Waiter is one reservation blocked in LongPoll: signalled (a buffered
// channel of one) when tasks may have become ready in one of its queues,
// or handed tasks of type T (an engine's reserved rows) by
// WaitList.HandOver. Its fields are guarded by the engine's lock (the
// sync.Locker given to LongPoll).
type Waiter[T any] struct {
	ch chan struct{}
	// max is how many tasks it takes at most; single: it waits on one
	// queue, so it may be handed tasks; waiting: it has looked and found
	// nothing (set by the engine with MarkWaiting), so handing it tasks
	// cannot race its own look.
	max     int
	single  bool
	waiting bool
	// lists are the WaitLists it was added to.
	lists []*WaitList[T]
	// off[i]: w was taken off lists[i] by a signal (Wake, WakeAll,
	// HandOver); left: w has left its lists (Leave), and the entries
	// still on them are stale.
	off  []bool
	left bool
	// handed are the tasks handed to it, set together with the signal
	// and its removal from its list.
	handed []T
}

// waitEntry is a waiter's place on one WaitList: the waiter, and the
// index of the list in its lists.
type waitEntry[T any] struct {
	w *Waiter[T]
	i int
}

// NewWaiter returns a waiter for a reserve of up to max tasks over
// queues queues.
func NewWaiter[T any](max, queues int) *Waiter[T] {
	return &Waiter[T]{ch: make(chan struct{}, 1), max: max, single: queues == 1}
}

// MarkWaiting records that w has looked and found nothing: from now on
// it may be handed tasks. The engine's lock is held.
func (w *Waiter[T]) MarkWaiting() { w.waiting = true }

// signal signals w if it is not signalled yet and reports whether it was.
func (w *Waiter[T]) signal() bool {
	select {
	case w.ch <- struct{}{}:
		return true
	default:
		return false
	}
}

// Leave takes w off its lists and returns what it was handed. A waiter
// signalled for nothing it took (it gives up, or has looked and found
// tasks, as the signal came) passes the signal on to the lists that
// signalled it, as many tasks as it stood for. w is not used again. The
// engine's lock is held. O(its lists), amortised: an entry of w still on
// a list is left there, stale, and skipped or compacted away later, so
// that a waiter on many queues leaving does not scan each queue's
// waiters.
func (w *Waiter[T]) Leave() []T {
	handed := w.handed
	w.handed, w.waiting, w.left = nil, false, true
	signalled := len(w.ch) > 0 && handed == nil
	for i, l := range w.lists {
		l.joined--
		switch {
		case !w.off[i]:
			l.stale++
			l.compact()
		case signalled:
			l.Wake(max(w.max, 1))
		}
	}
	w.lists, w.off = nil, nil
	return handed
}

// WaitList is one queue's blocked reservers, oldest first. It is not
// safe for concurrent use: the engine's lock guards it.
type WaitList[T any] struct {
	ws []waitEntry[T]
	// stale counts the entries of ws whose waiter has left.
	stale int
	// joined counts the waiters added and not yet left (Waiter.Leave),
	// those signalled and taken off ws included.
	joined int
}

// Add puts w at the end of l. O(1) amortised.
func (l *WaitList[T]) Add(w *Waiter[T]) {
	l.ws = append(l.ws, waitEntry[T]{w, len(w.lists)})
	l.joined++
	w.lists = append(w.lists, l)
	w.off = append(w.off, false)
}

// Len returns how many reservers wait on l.
func (l *WaitList[T]) Len() int { return len(l.ws) - l.stale }

// compact drops the stale entries once they are most of l. O(1)
// amortised over the waiters that left.
func (l *WaitList[T]) compact() {
	if l.stale < 16 || 2*l.stale < len(l.ws) {
		return
	}
	kept := l.ws[:0]
	for _, e := range l.ws {
		if !e.w.left {
			kept = append(kept, e)
		}
	}
	clear(l.ws[len(kept):])
	l.ws, l.stale = kept, 0
}

// take takes l's first entry off l; ok is false when its waiter has
// left (a stale entry). O(1).
func (l *WaitList[T]) take() (w *Waiter[T], ok bool) {
	e := l.ws[0]
	l.ws[0] = waitEntry[T]{}
	l.ws = l.ws[1:]
	if e.w.left {
		l.stale--
		return nil, false
	}
	e.w.off[e.i] = true
	return e.w, true
}

// Unused reports whether every waiter added to l has left it
// (Waiter.Leave), signalled or not: l may then be dropped, as no waiter
// will pass a signal on to it. O(1).
func (l *WaitList[T]) Unused() bool { return l.joined == 0 }

// Wake signals waiters, oldest first, taking them off l, until those
// signalled can take k tasks between them, and returns how many they can
// take. A waiter already signalled through another of its lists counts
// for nothing. O(waiters woken).
func (l *WaitList[T]) Wake(k int) (took int) {
	for took < k && len(l.ws) > 0 {
		if w, ok := l.take(); ok && w.signal() {
			took += max(w.max, 1)
		}
	}
	if len(l.ws) == 0 {
		l.ws = nil // let a long list's array go
	}
	return took
}

// WakeAll signals every waiter of l and empties it. O(waiters).
func (l *WaitList[T]) WakeAll() {
	for len(l.ws) > 0 {
		if w, ok := l.take(); ok {
			w.signal()
		}
	}
	l.ws = nil
}

// Waiting returns how many of l's waiters have looked and found nothing
// (MarkWaiting). O(waiters).
func (l *WaitList[T]) Waiting() (k int) {
	for _, e := range l.ws {
		if e.w.waiting { // false once it left
			k++
		}
	}
	return k
}

// Slots returns how many tasks l's waiters can be handed: the sum of
// what its waiters on this queue alone, having looked, take at most.
// O(waiters).
func (l *WaitList[T]) Slots() (k int) {
	for _, e := range l.ws {
		if e.w.single && e.w.waiting {
			k += e.w.max
		}
	}
	return k
}

// HandOver gives items, reserved for l's waiters and in delivery order,
// to its waiters on this queue alone that have looked, oldest first,
// each as many as it takes, signalling them and taking them off l, and
// returns the items no waiter was left to take (waiters that left while
// the items were being reserved). O(waiters).
func (l *WaitList[T]) HandOver(items []T) (left []T) {
	kept := l.ws[:0]
	for _, e := range l.ws {
		w := e.w
		if w.left {
			l.stale--
			continue
		}
		if len(items) == 0 || !w.single || !w.waiting || len(w.ch) > 0 {
			kept = append(kept, e)
			continue
		}
		k := min(w.max, len(items))
		w.handed, items = items[:k:k], items[k:]
		w.off[e.i] = true
		w.ch <- struct{}{}
	}
	clear(l.ws[len(kept):])
	l.ws = kept
	return items
}

// Poller is an engine's side of LongPoll.
type Poller[T any] interface {
	// Look takes up to max ready tasks of queues in delivery order, each
	// under a new lease. When w is not nil and it takes none and returns
	// no error, it must leave w on the WaitList of each of queues (Add),
	// added before it looked or under the lock that makes tasks ready,
	// and marked waiting (MarkWaiting) if tasks may be handed to it;
	// otherwise w must be on no list when it returns (Leave). retry is
	// how long until it should look again though nothing signals (a
	// pause ending, a rate limit's next token), 0 for never.
	Look(ctx context.Context, queues []string, max int, w *Waiter[T]) (tasks []task.Task, retry time.Duration, err error)
	// Deliver turns items handed to a waiter into the tasks a reserve
	// returns.
	Deliver(items []T) []task.Task
	// GiveBack makes items handed to a waiter whose caller has gone ready
	// again.
	GiveBack(items []T)
	// Left is called with the engine's lock held once a waiter on queues
	// has left their lists (Waiter.Leave): the engine drops what it kept
	// for a queue only so that reservers could wait on it, so that a
	// name a client waited on leaves nothing behind once the wait ends.
	Left(queues []string)
}

// LongPoll is a reserve of up to max tasks of queues, waiting up to wait
// for the first: it looks (p.Look), and while it finds nothing waits for
// a signal, p.Look's retry, the end of wait or of ctx, then leaves the
// queues' lists (telling p: Poller.Left) and looks again. mu is the engine's lock, which guards its WaitLists and waiters. It
// returns no tasks and no error when wait runs out or ctx ends with none
// taken. Safe for concurrent use as p and mu are.
func LongPoll[T any](ctx context.Context, mu sync.Locker, p Poller[T], queues []string, max int, wait time.Duration) ([]task.Task, error) {
	var timer *time.Timer
	for {
		var w *Waiter[T]
		if wait > 0 {
			w = NewWaiter[T](max, len(queues))
		}
		tasks, retry, err := p.Look(ctx, queues, max, w)
		if err != nil || len(tasks) > 0 || wait == 0 {
			return tasks, err
		}
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		}
		var again <-chan time.Time
		var rt *time.Timer
		if retry > 0 {
			rt = time.NewTimer(retry + time.Millisecond)
			again = rt.C
		}
		woken := false
		select {
		case <-w.ch:
			woken = true
		case <-again:
			woken = true
		case <-ctx.Done():
		case <-timer.C:
		}
		if rt != nil {
			rt.Stop()
		}
		mu.Lock()
		handed := w.Leave()
		p.Left(queues)
		mu.Unlock()
		if len(handed) > 0 {
			if ctx.Err() != nil {
				p.GiveBack(handed)
				return nil, nil
			}
			return p.Deliver(handed), nil
		}
		if !woken {
			return nil, nil
		}
	}
}
