package broker

// SetTakenHook makes b call f in every reserve between picking its tasks
// and handing them out, with b's mutex released.
func SetTakenHook(b *Broker, f func()) { b.takenHook = f }
