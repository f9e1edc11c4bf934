package httpapi

import "time"

// SetWriteLimits sets l's write timeout and the wait after which, at the
// limit, a stalled write's connection may be closed (writeTimeout and
// writeStall otherwise).
func SetWriteLimits(l *LimitedListener, timeout, stall time.Duration) {
	l.writeTimeout, l.writeStall = timeout, stall
}
