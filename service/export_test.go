package service

// Signalled reports whether w holds a signal it has not taken yet.
func Signalled[T any](w *Waiter[T]) bool { return len(w.ch) > 0 }

// OccurrencesBefore is occurrencesBefore, for the runs' walk back.
var OccurrencesBefore = occurrencesBefore
