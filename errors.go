package hourglass

import "errors"

var (
	// ErrStopped is returned when scheduling on a Timer that has been
	// stopped.
	ErrStopped = errors.New("hourglass: timer stopped")

	// ErrTooManyPending is returned when scheduling would take a Timer past
	// the limit set with [WithMaxPending].
	ErrTooManyPending = errors.New("hourglass: too many pending timeouts")
)
