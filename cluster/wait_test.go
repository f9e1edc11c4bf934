package cluster

import "testing"

// TestQueueWait_WakeByCapacity: k tasks made ready wake waiters, oldest
// first, until those woken can take k between them; wake reports what
// they can take, which readied subtracts before telling other nodes.
func TestQueueWait_WakeByCapacity(t *testing.T) {
	q := &queueWait{}
	add := func(max int) *waiter {
		w := &waiter{ch: make(chan struct{}, 1), max: max}
		q.waiters = append(q.waiters, w)
		return w
	}
	big, one, two := add(100), add(1), add(1)
	if took := q.wake(30); took != 100 {
		t.Errorf("wake(30) with a waiter of max 100 first: took %d, want 100", took)
	}
	if len(big.ch) != 1 || len(one.ch) != 0 || len(two.ch) != 0 || len(q.waiters) != 2 {
		t.Errorf("wake(30) woke big=%d one=%d two=%d, %d left waiting; want only big", len(big.ch), len(one.ch), len(two.ch), len(q.waiters))
	}
	if took := q.wake(5); took != 2 {
		t.Errorf("wake(5) with two waiters of max 1: took %d, want 2", took)
	}
	if len(one.ch) != 1 || len(two.ch) != 1 || len(q.waiters) != 0 {
		t.Errorf("wake(5) left %d waiting", len(q.waiters))
	}
	if took := q.wake(5); took != 0 {
		t.Errorf("wake with no waiter: took %d", took)
	}
	a, b := add(100), add(100)
	q.wakeAll()
	if len(a.ch) != 1 || len(b.ch) != 1 || len(q.waiters) != 0 {
		t.Error("wakeAll did not wake every waiter")
	}
}
