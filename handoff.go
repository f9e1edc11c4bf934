package hourglass

// handOff is how a driver hands the calls f(a) it finds due to its
// runner's executor: one add per call, in deadline order, then one flush
// at the end of the batch. For every executor but [Goroutines], add hands
// the call over at once, and flush has nothing to do.
//
// With Goroutines each call still gets a goroutine of its own, but the
// driver does not start them itself. It gathers up to groupSize calls and
// starts one goroutine for the group, which then starts one for each
// call. A burst costs the driver one go statement per 64 calls instead of
// one per call, and the rest of the work spreads over the Ps: an idle P
// steals a group and starts its goroutines on its own run queue, as the
// runtime runs due timers (and starts time.AfterFunc's goroutines) on
// whichever P finds them. Started one per call from the driver, a burst's
// goroutines also lose their order: a P's local run queue holds 256, and
// beyond that the runtime moves half of it to the global queue, which a
// busy P looks at once in 61 schedules. The oldest callbacks then wait
// behind newer ones, and a burst of a million timeouts fired a median
// 0.3 s late, where time.AfterFunc's fired 26 ms late (issue 11; the
// burst scenario of hourglass bench measures both, see
// docs/BENCHMARKS.md).
//
// A handOff belongs to one driver and is used only on its goroutine:
// add and flush are not safe for concurrent use. add is O(1); flush is
// O(1) on the driver's side.
type handOff[A any] struct {
	r *runner
	f func(A)
	// group holds the calls gathered for Goroutines and not yet started.
	group []A
}

// groupSize is the most calls one group goroutine starts: a quarter of
// a P's local run queue (256 goroutines in the runtime), so that a group
// and its goroutines fit there with room for several groups, and a
// goroutine per call costs the driver 1/64 of a go statement.
const groupSize = 64

// directMax is the largest group that flush starts from the driver, one
// go statement per call: for so few calls a group goroutine would add
// more than it spreads. A timeout firing on its own, the common case
// when nothing is bursting, costs one goroutine, as it always has.
const directMax = 4

func newHandOff[A any](r *runner, f func(A)) handOff[A] {
	return handOff[A]{r: r, f: f}
}

// add hands the call f(a) to the executor, or with Goroutines adds it to
// the group, which starts when it is full or at flush.
func (h *handOff[A]) add(a A) {
	if !h.r.goes {
		runWith(h.r, h.f, a)
		return
	}
	if h.group == nil {
		h.group = make([]A, 0, groupSize)
	}
	h.group = append(h.group, a)
	if len(h.group) == groupSize {
		h.r.waiting.Add(groupSize)
		go startEach(h.r, h.f, h.group)
		h.group = nil
	}
}

// flush starts the calls add has gathered: the driver calls it once it has
// handed over its batch, so no call waits for a later one.
func (h *handOff[A]) flush() {
	n := len(h.group)
	switch {
	case n == 0:
		return
	case n <= directMax:
		var zero A
		h.r.waiting.Add(int64(n))
		for i, a := range h.group {
			go startWith(h.r, h.f, a)
			h.group[i] = zero // keep nothing alive
		}
		h.group = h.group[:0]
	default:
		h.r.waiting.Add(int64(n))
		go startEach(h.r, h.f, h.group)
		h.group = nil
	}
}

// startEach is a group goroutine: it starts a goroutine for each call, in
// order.
func startEach[A any](r *runner, f func(A), group []A) {
	for _, a := range group {
		go startWith(r, f, a)
	}
}
