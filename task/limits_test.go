package task_test

import (
	"testing"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// TestLimits_MatchAPI checks that the limits package api documents for
// the wire (it imports nothing of the server, for clients) are the ones
// the service applies.
func TestLimits_MatchAPI(t *testing.T) {
	for _, c := range []struct {
		name      string
		api, task int64
	}{
		{"MaxBatch", api.MaxBatch, task.MaxBatch},
		{"MaxReserve", api.MaxReserve, task.MaxReserve},
		{"MaxWait", int64(api.MaxWait), int64(task.MaxWait)},
		{"DefaultPriority", api.DefaultPriority, task.DefaultPriority},
		{"MaxListLimit", api.MaxListLimit, task.MaxList},
		{"MaxDueWindows", api.MaxDueWindows, task.MaxDueWindows},
		{"MaxReserveQueues", api.MaxReserveQueues, task.MaxReserveQueues},
		{"MaxAcks", api.MaxAcks, task.MaxAcks},
		{"MaxTTR", int64(api.MaxTTR), int64(service.MaxTTR)},
		{"MaxDedupe", int64(api.MaxDedupe), int64(task.MaxDedupe)},
	} {
		if c.api != c.task {
			t.Errorf("api.%s = %d, the service's = %d", c.name, c.api, c.task)
		}
	}
}
