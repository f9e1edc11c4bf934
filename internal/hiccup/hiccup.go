// Package hiccup watches, for tests that bound how late something may
// come, the machine they run on: the times it did not run the watching
// goroutine at all (a stall: the machine overloaded or the virtual
// machine paused) and the steps of its wall clock against the monotonic
// clock. A bound on lateness measured in wall-clock time is then the
// bound plus what the machine itself lost over the interval, and a
// failure can say what the machine did.
//
// A worked example: a test puts a task due in 1 s and allows 2 s of
// lateness. The machine stops for 4 s just after the put; the task comes
// 3.7 s late. Over(put, received) is 4 s (the stall, less the sampling
// interval), so the test allows 6 s and logs why. Had the server itself
// been slow, the watch would have seen nothing and the test would fail.
package hiccup

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// Interval is how often a Watch samples the clocks.
const Interval = 10 * time.Millisecond

// stallAtLeast and stepAtLeast are the smallest stall and wall-clock
// step a Watch records: below them, scheduling noise.
const (
	stallAtLeast = 100 * time.Millisecond
	stepAtLeast  = 5 * time.Millisecond
)

// maxEvents bounds what a Watch keeps; the oldest are forgotten first.
const maxEvents = 4096

// Event is one hiccup: from At (wall clock) the machine ran nothing of
// the watch for Stall beyond the sampling interval, or its wall clock
// moved Step more than the monotonic clock did (negative: back).
type Event struct {
	At    time.Time
	Stall time.Duration
	Step  time.Duration
}

// String describes e.
func (e Event) String() string {
	var parts []string
	if e.Stall > 0 {
		parts = append(parts, fmt.Sprintf("stalled %v", e.Stall.Round(time.Millisecond)))
	}
	if e.Step != 0 {
		parts = append(parts, fmt.Sprintf("wall clock stepped %v", e.Step.Round(time.Millisecond)))
	}
	return e.At.Format("15:04:05.000") + " " + strings.Join(parts, ", ")
}

// Watch samples the clocks every Interval from Start until Stop. It is
// safe for concurrent use.
type Watch struct {
	stop chan struct{}
	done chan struct{}

	mu     sync.Mutex
	events []Event
}

// Start starts a Watch.
func Start() *Watch {
	w := &Watch{stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w
}

// Stop stops w and waits for its goroutine to end.
func (w *Watch) Stop() {
	close(w.stop)
	<-w.done
}

func (w *Watch) run() {
	defer close(w.done)
	t := time.NewTicker(Interval)
	defer t.Stop()
	prev := time.Now()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
		now := time.Now()
		mono := now.Sub(prev)
		wall := now.Round(0).Sub(prev.Round(0))
		e := Event{At: prev.Round(0)}
		if s := mono - Interval; s >= stallAtLeast {
			e.Stall = s
		}
		if s := wall - mono; s >= stepAtLeast || s <= -stepAtLeast {
			e.Step = s
		}
		if e.Stall != 0 || e.Step != 0 {
			w.mu.Lock()
			if len(w.events) == maxEvents {
				w.events = append(w.events[:0], w.events[1:]...)
			}
			w.events = append(w.events, e)
			w.mu.Unlock()
		}
		prev = now
	}
}

// Over returns what the machine lost between from and to (wall clock):
// the stalls and the forward steps of the wall clock that began in that
// interval, and the events themselves.
func (w *Watch) Over(from, to time.Time) (time.Duration, []Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var lost time.Duration
	var in []Event
	for _, e := range w.events {
		if e.At.Before(from.Add(-Interval)) || e.At.After(to) {
			continue
		}
		in = append(in, e)
		lost += e.Stall + max(e.Step, 0)
	}
	return lost, in
}
