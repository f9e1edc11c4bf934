package bench

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"time"

	"github.com/hourglass-go/hourglass"
	"github.com/hourglass-go/hourglass/queue"
)

// Structure is one thing the scenarios measure: a Timer over one of
// hourglass's structures, or Go's runtime timers.
type Structure struct {
	Name string
	Doc  string

	// option configures a Timer for about n pending timeouts; nil for the
	// runtime's timers.
	option func(n int) hourglass.Option
	// queue chooses the bare structure for about n entries; nil for the
	// runtime's timers, which have no structure of their own to call.
	queue func(n int) queue.Structure
}

// tick is the wheels' tick throughout: the Timer's default.
const tick = time.Millisecond

// Structures returns every structure, in the order results list them.
func Structures() []Structure {
	return []Structure{
		{
			Name:   "hierarchical",
			Doc:    "hourglass, hierarchical wheel, 1 ms tick",
			option: func(int) hourglass.Option { return hourglass.WithHierarchicalWheel(tick) },
			queue:  func(int) queue.Structure { return queue.HierarchicalWheel(tick) },
		},
		{
			Name:   "hashed",
			Doc:    "hourglass, hashed wheel, 1 ms tick, slots = next power of two ≥ n/64 (at least 512)",
			option: func(n int) hourglass.Option { return hourglass.WithHashedWheel(tick, hashedSlots(n)) },
			queue:  func(n int) queue.Structure { return queue.HashedWheel(tick, hashedSlots(n)) },
		},
		{
			Name:   "heap",
			Doc:    "hourglass, 4-ary heap",
			option: func(int) hourglass.Option { return hourglass.WithHeap() },
			queue:  func(int) queue.Structure { return queue.Heap() },
		},
		{
			Name:   "list",
			Doc:    "hourglass, sorted list (O(n) schedule: small sizes only)",
			option: func(int) hourglass.Option { return hourglass.WithSortedList() },
			queue:  func(int) queue.Structure { return queue.SortedList() },
		},
		{
			Name: "runtime",
			Doc:  "Go's time.AfterFunc and (*time.Timer).Stop",
		},
	}
}

// StructureNames returns the names of [Structures].
func StructureNames() []string {
	var out []string
	for _, s := range Structures() {
		out = append(out, s.Name)
	}
	return out
}

// hashedSlots sizes a hashed wheel for n pending timeouts: the next power
// of two at or above n/64, so a slot holds about 64 of them, and at least
// Netty's default of 512.
func hashedSlots(n int) int {
	want := max(n/64, 512)
	return 1 << bits.Len(uint(want-1))
}

// timers is what the Timer-level scenarios schedule on: an hourglass
// Timer with the Inline executor, or the runtime's timers. The indirection
// costs both the same.
type timers interface {
	afterFunc(d time.Duration, f func()) (handle, error)
	// stop ends the run: it stops an hourglass Timer, or cancels the
	// runtime timers in pending, the handles the scenario still holds.
	stop(pending []handle)
}

// handle is a scheduled timeout: *hourglass.Timeout, or *runtimeTimer.
type handle interface {
	Cancel() bool
}

// newTimers makes s's timers, configured for about n pending.
func (s Structure) newTimers(n int) timers {
	if s.option == nil {
		return runtimeTimers{}
	}
	return hourglassTimers{hourglass.New(s.option(n), hourglass.WithExecutor(hourglass.Inline))}
}

type hourglassTimers struct{ t *hourglass.Timer }

func (h hourglassTimers) afterFunc(d time.Duration, f func()) (handle, error) {
	to, err := h.t.AfterFunc(d, f)
	if err != nil {
		return nil, err
	}
	return to, nil
}

func (h hourglassTimers) stop([]handle) { h.t.Stop() }

// wakeupCounter is implemented by the timers whose drivers count their
// wake-ups: hourglass's, not the runtime's.
type wakeupCounter interface {
	// wakeups returns the drivers' wake-ups since the Timer was made.
	wakeups() uint64
}

func (h hourglassTimers) wakeups() uint64 { return h.t.Stats().Wakeups }

type runtimeTimers struct{}

// runtimeTimer is a *time.Timer with the method set of a handle; the
// conversion costs nothing.
type runtimeTimer time.Timer

func (t *runtimeTimer) Cancel() bool { return (*time.Timer)(t).Stop() }

func (runtimeTimers) afterFunc(d time.Duration, f func()) (handle, error) {
	return (*runtimeTimer)(time.AfterFunc(d, f)), nil
}

func (runtimeTimers) stop(pending []handle) {
	for _, h := range pending {
		if h != nil {
			h.Cancel()
		}
	}
}

// noop is the callback of timeouts that are never meant to fire. Being a
// static function, it costs no allocation.
func noop() {}

// farDelay returns a random delay between 1 h and 2 h: a deadline that no
// scenario lives to see.
func farDelay() time.Duration {
	return time.Hour + rand.N(time.Hour)
}

// fill schedules n timeouts at random far delays and returns their
// handles.
func fill(t timers, n int) ([]handle, error) {
	hs := make([]handle, n)
	for i := range hs {
		h, err := t.afterFunc(farDelay(), noop)
		if err != nil {
			return nil, fmt.Errorf("filling %d pending: %w", n, err)
		}
		hs[i] = h
	}
	return hs, nil
}
