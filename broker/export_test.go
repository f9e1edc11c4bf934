package broker

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
