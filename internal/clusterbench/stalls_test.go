package clusterbench

import (
	"strings"
	"testing"
	"time"
)

// TestStalls: windows of due time whose latest task came more than
// stallLate late are stalls, adjacent ones merged into one, each with its
// late tasks counted by the node that delivered them; a window whose
// tasks all came in time is none, however many there are.
func TestStalls(t *testing.T) {
	start := time.Date(2026, 12, 9, 10, 0, 0, 0, time.UTC)
	var samples []sample
	add := func(at, late time.Duration, node int) {
		samples = append(samples, sample{due: start.Add(at), late: late, node: node})
	}
	for ms := range 1000 { // a task a millisecond, 2 ms late
		add(time.Duration(ms)*time.Millisecond, 2*time.Millisecond, ms%3)
	}
	add(120*time.Millisecond, 80*time.Millisecond, 1)  // window 100-150
	add(160*time.Millisecond, 200*time.Millisecond, 1) // window 150-200: merged
	add(170*time.Millisecond, 60*time.Millisecond, 2)
	add(700*time.Millisecond, 51*time.Millisecond, 0) // a stall of its own
	add(900*time.Millisecond, stallLate, 0)           // not over stallLate
	ss := stalls(samples)
	if len(ss) != 2 {
		t.Fatalf("%d stalls, want 2: %+v", len(ss), ss)
	}
	if s := ss[0]; !s.from.Equal(start.Add(100*time.Millisecond)) || !s.to.Equal(start.Add(200*time.Millisecond)) ||
		s.worst != 200*time.Millisecond || s.late != 3 || s.byNode[1] != 2 || s.byNode[2] != 1 {
		t.Errorf("first stall %+v, want due 100-200 ms, worst 200 ms, 3 late: 2 by node 1, 1 by node 2", s)
	}
	if s := ss[1]; !s.from.Equal(start.Add(700*time.Millisecond)) || s.late != 1 || s.byNode[0] != 1 {
		t.Errorf("second stall %+v, want due 700-750 ms, 1 late by node 0", s)
	}
	timeline := []waitSample{
		{at: start.Add(90 * time.Millisecond), rows: []string{"before"}, machine: time.Second, ours: time.Second},
		{at: start.Add(150 * time.Millisecond), rows: []string{"during"}},
		{at: start.Add(190 * time.Millisecond), rows: []string{"end"}, machine: time.Second + 200*time.Millisecond,
			ours: time.Second + 50*time.Millisecond},
		{at: start.Add(600 * time.Millisecond), rows: []string{"between"}},
	}
	d := describeStalls(samples, timeline, start)
	for _, want := range []string{"2 stalls", "due +100ms to +200ms: 3 late, worst 200ms; delivered by bench-1: 2, bench-2: 1",
		"before", "during", "CPUs busy meanwhile: 2.00, the bench and its PostgreSQL 0.50, other work 1.50"} {
		if !strings.Contains(d, want) {
			t.Errorf("description lacks %q:\n%s", want, d)
		}
	}
	if strings.Contains(d, "between") {
		t.Errorf("description shows a sample outside every stall:\n%s", d)
	}
	if d := describeStalls(samples[:1000], timeline, start); d != "" {
		t.Errorf("stalls described where none: %s", d)
	}
}
