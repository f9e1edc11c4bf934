package hiccup

import (
	"testing"
	"time"
)

// TestOver: events recorded by the watch are counted over the interval
// they began in, and only there.
func TestOver(t *testing.T) {
	w := Start()
	defer w.Stop()
	base := time.Now().Round(0)
	w.mu.Lock()
	w.events = append(w.events,
		Event{At: base.Add(time.Second), Stall: 4 * time.Second},
		Event{At: base.Add(2 * time.Second), Step: 300 * time.Millisecond},
		Event{At: base.Add(3 * time.Second), Step: -time.Second},
		Event{At: base.Add(10 * time.Second), Stall: time.Second})
	w.mu.Unlock()
	for _, c := range []struct {
		from, to time.Duration
		lost     time.Duration
		n        int
	}{
		{0, 5 * time.Second, 4300 * time.Millisecond, 3},
		{1500 * time.Millisecond, 5 * time.Second, 300 * time.Millisecond, 2},
		{4 * time.Second, 9 * time.Second, 0, 0},
		{9 * time.Second, 11 * time.Second, time.Second, 1},
	} {
		lost, in := w.Over(base.Add(c.from), base.Add(c.to))
		if lost != c.lost || len(in) != c.n {
			t.Errorf("Over(%v, %v) = %v over %d events; want %v over %d", c.from, c.to, lost, len(in), c.lost, c.n)
		}
	}
}
