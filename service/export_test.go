package service

import "time"

// Signalled reports whether w holds a signal it has not taken yet.
func Signalled[T any](w *Waiter[T]) bool { return len(w.ch) > 0 }

// OccurrencesBefore is occurrencesBefore, for the runs' walk back.
var OccurrencesBefore = occurrencesBefore

// CancelsForTest is the hub of leases ended that New gives a Service.
type CancelsForTest = cancels

// NewCancelsForTest returns an empty hub.
var NewCancelsForTest = newCancels

// LeaseEnded, Ended and Watch are the hub's methods, with their clock.
func (c *cancels) LeaseEnded(lease string, now time.Time) { c.leaseEnded(lease, now) }
func (c *cancels) Ended(leases []string, now time.Time) []string {
	return c.ended(leases, now)
}
func (c *cancels) Watch(f func(string)) func() { return c.watch(f) }

// Remembered returns how many leases the hub holds, and the length of
// its order.
func (c *cancels) Remembered() (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.at), len(c.order) - c.head
}
