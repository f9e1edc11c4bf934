package broker

import "fmt"

// SetTakenHook makes b call f in every reserve between picking its tasks
// and handing them out, with b's mutex released.
func SetTakenHook(b *Broker, f func()) { b.takenHook = f }

// Fire runs the delay wheel's callback for job now, as a wheel would if
// the wall clock had been stepped back since it was armed.
func Fire(b *Broker, job uint64) { b.fire(job) }

// QueueCounts returns how many queues b keeps in memory (those reservers
// wait on included) and how many count toward its limit.
func QueueCounts(b *Broker) (kept, real int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.byName), b.real
}

// MaxIdle is maxIdle.
const MaxIdle = maxIdle

// RestoreBucket is restoreBucket.
var RestoreBucket = restoreBucket

// KeyRates returns how many per-key rate buckets queue q of b keeps.
func KeyRates(b *Broker, q string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if qs := b.byName[q]; qs != nil {
		return len(qs.keyRates)
	}
	return 0
}

// CheckDueOrder returns an error unless b's due order (dueOrder) holds
// exactly its live tasks, each in its queue at its due time.
func CheckDueOrder(b *Broker) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, t := range b.tasks.order.queues {
		n += t.Len()
	}
	if n != b.tasks.len() {
		return fmt.Errorf("due order holds %d tasks, the slots %d", n, b.tasks.len())
	}
	var err error
	b.tasks.each(func(job uint64, s slot) bool {
		t := b.tasks.order.queues[s.queue()]
		if t == nil || !t.Has(dueKey{s.due, job}) {
			err = fmt.Errorf("job %d (queue %d, due %d) missing from the due order", job, s.queue(), s.due)
			return false
		}
		return true
	})
	return err
}
