package service_test

import (
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/service"
)

// TestDueWindow: a due histogram's window holds the tasks due in
// [now+i·width, now+(i+1)·width): a task due before now (about to be
// made ready) is in none, not in window 0, as a cluster node's statement
// counts it; past the last window, none either.
func TestDueWindow(t *testing.T) {
	const now, width, n = int64(1_000_000), 10 * time.Nanosecond, 3
	for _, c := range []struct {
		due  int64
		i    int
		in   bool
		what string
	}{
		{now - 11, 0, false, "a window's width before now"},
		{now - 1, 0, false, "just before now"},
		{now, 0, true, "now"},
		{now + 9, 0, true, "the end of the first window"},
		{now + 10, 1, true, "the start of the second"},
		{now + 29, 2, true, "the end of the last"},
		{now + 30, 0, false, "past the last"},
	} {
		i, in := service.DueWindow(c.due, now, width, n)
		if in != c.in || in && i != c.i {
			t.Errorf("%s (due now%+d): window %d, %v; want %d, %v", c.what, c.due-now, i, in, c.i, c.in)
		}
	}
}
