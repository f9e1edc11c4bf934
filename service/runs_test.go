package service_test

import (
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/service"
)

// TestOccurrencesBefore: the runs' walk back lists the newest
// occurrences before a time, newest first, the same as walking forward
// (across New York's spring change, where 02:30 has none), stops at the
// floor, and finds a rare line's occurrences far back.
func TestOccurrencesBefore(t *testing.T) {
	loc := newYork(t)
	sched := mustCron(t, "30 2 * * *")
	before := time.Date(2026, 3, 11, 0, 0, 0, 0, loc)
	got := service.OccurrencesBefore(sched, loc, before.Add(-365*24*time.Hour), before, 4)
	want := []time.Time{
		time.Date(2026, 3, 10, 2, 30, 0, 0, loc), time.Date(2026, 3, 9, 2, 30, 0, 0, loc),
		time.Date(2026, 3, 7, 2, 30, 0, 0, loc), time.Date(2026, 3, 6, 2, 30, 0, 0, loc),
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if !got[i].Equal(want[i]) {
			t.Errorf("occurrence %d = %v, want %v", i, got[i].In(loc), want[i])
		}
	}
	// The floor ends the walk.
	if got := service.OccurrencesBefore(sched, loc, time.Date(2026, 3, 9, 12, 0, 0, 0, loc), before, 4); len(got) != 1 || !got[0].Equal(want[0]) {
		t.Errorf("with a floor on the 9th at noon: %v, want only %v", got, want[0])
	}
	// A yearly line: the one occurrence within a year back.
	yearly := mustCron(t, "0 0 1 1 *")
	if got := service.OccurrencesBefore(yearly, time.UTC, before.Add(-366*24*time.Hour), before, 3); len(got) != 1 || !got[0].Equal(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("yearly: %v", got)
	}
	// An every-second line: exactly n, the newest.
	every := mustCron(t, "@every 1s")
	got = service.OccurrencesBefore(every, time.UTC, before.Add(-time.Hour), before, 100)
	if len(got) != 100 || !got[0].Equal(before.Add(-time.Second)) || !got[99].Equal(before.Add(-100*time.Second)) {
		t.Errorf("every second: %d, from %v to %v", len(got), got[0], got[len(got)-1])
	}
}
