package hourglass

import "runtime"

// goid returns the calling goroutine's id, parsed from the first line of
// its stack trace ("goroutine 42 [running]:"). Go offers no cheaper way,
// and Stop needs it only to tell whether it runs on one of the Timer's own
// driver goroutines, which it must not wait for. It costs about a
// microsecond and is called once per driver start and once per Stop.
func goid() uint64 {
	var buf [32]byte
	n := runtime.Stack(buf[:], false)
	var id uint64
	for _, c := range buf[len("goroutine "):n] {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
	}
	return id
}
