package cluster

import (
	"strconv"
	"testing"

	"github.com/hourglass-go/hourglass/task"
)

// TestAttemptsInRow: an ack records in its history row the attempts
// that migration 008's bound never removes, and no later one.
func TestAttemptsInRow(t *testing.T) {
	if want := strconv.Itoa(task.AttemptsKeptFirst + task.AttemptsKeptLast); attemptsInRow != want {
		t.Fatalf("attemptsInRow = %s, want %s", attemptsInRow, want)
	}
}
