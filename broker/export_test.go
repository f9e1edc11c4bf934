package broker

// SetTakenHook makes b call f in every reserve between picking its tasks
// and handing them out, with b's mutex released.
func SetTakenHook(b *Broker, f func()) { b.takenHook = f }

// Fire runs the delay wheel's callback for job now, as a wheel would if
// the wall clock had been stepped back since it was armed.
func Fire(b *Broker, job uint64) { b.fire(job) }
