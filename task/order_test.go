package task_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/task"
)

// ExampleDeliveredBefore sorts four ready tasks into delivery order: the
// worked example of the rule.
func ExampleDeliveredBefore() {
	type ready struct {
		name string
		prio uint32
		due  time.Duration
		job  uint64
	}
	ts := []ready{{"a", 1024, 10 * time.Second, 7}, {"b", 0, 20 * time.Second, 9}, {"c", 1024, 10 * time.Second, 3}, {"d", 1024, 5 * time.Second, 8}}
	slices.SortFunc(ts, func(x, y ready) int {
		if task.DeliveredBefore(x.prio, int64(x.due), x.job, y.prio, int64(y.due), y.job) {
			return -1
		}
		return 1
	})
	for _, t := range ts {
		fmt.Print(t.name, " ")
	}
	// Output: b d c a
}

// TestCompareDue: due time first, then job id; a task equals itself;
// and due order is delivery order at equal priorities.
func TestCompareDue(t *testing.T) {
	for _, c := range []struct {
		aDue int64
		aJob uint64
		bDue int64
		bJob uint64
		want int
	}{
		{1, 9, 2, 1, -1},
		{2, 1, 1, 9, 1},
		{5, 3, 5, 4, -1},
		{5, 4, 5, 3, 1},
		{5, 4, 5, 4, 0},
	} {
		if got := task.CompareDue(c.aDue, c.aJob, c.bDue, c.bJob); got != c.want {
			t.Errorf("CompareDue(%d, %d, %d, %d) = %d, want %d", c.aDue, c.aJob, c.bDue, c.bJob, got, c.want)
		}
		if got := task.DeliveredBefore(7, c.aDue, c.aJob, 7, c.bDue, c.bJob); got != (c.want < 0) {
			t.Errorf("DeliveredBefore at equal priorities disagrees with CompareDue for %+v", c)
		}
	}
}
