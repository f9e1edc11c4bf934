package hourglass

import _ "unsafe" // for go:linkname

// procPin pins the calling goroutine to its P and returns the P's id;
// procUnpin releases it. The runtime keeps these two for packages that
// shard per P (sync.Pool does the same internally), and has promised not
// to change them.
//
// A Timer uses the id to pick a shard: goroutines on different cores then
// use different shard locks, as the runtime's own timers use per-P heaps.
// Picking at random made two goroutines slower than one, as both fought
// over every lock (the parallel scenario of hourglass bench).
//
//go:linkname procPin runtime.procPin
func procPin() int

//go:linkname procUnpin runtime.procUnpin
func procUnpin()

// procID returns the id of the P the calling goroutine runs on. The
// goroutine may move right after; that only costs locality.
func procID() int {
	id := procPin()
	procUnpin()
	return id
}
