package service_test

import (
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// TestListAttempts is ListAttempts' worked example: at most
// task.MaxAttemptsListed, the newest, the running attempt last and
// counted among them, with nothing of an end.
func TestListAttempts(t *testing.T) {
	at := time.Unix(100, 0)
	ended := make([]task.Attempt, task.MaxAttemptsListed)
	for i := range ended {
		ended[i] = task.Attempt{N: i + 1, Attempt: i + 1, Queue: "q", Started: at, Ended: at, Outcome: task.AttemptNacked, Node: "a"}
	}
	running := &task.Attempt{N: len(ended) + 1, Attempt: len(ended) + 1, Queue: "q", Started: at,
		Ended: at, Outcome: "junk", Error: "junk", Status: 500, Node: "b"}
	got := service.ListAttempts(ended, running)
	if len(got) != task.MaxAttemptsListed || got[0].N != 2 || got[len(got)-2].N != task.MaxAttemptsListed {
		t.Fatalf("with a running attempt: %d attempts, %d to %d; want %d, 2 to %d and the running one",
			len(got), got[0].N, got[len(got)-2].N, task.MaxAttemptsListed, task.MaxAttemptsListed)
	}
	if r := got[len(got)-1]; r != (task.Attempt{N: len(ended) + 1, Attempt: len(ended) + 1, Queue: "q", Started: at}) {
		t.Errorf("running attempt listed as %+v; want its number, queue and start only", r)
	}
	if got := service.ListAttempts(ended, nil); len(got) != task.MaxAttemptsListed || got[0].N != 1 {
		t.Errorf("without a running attempt: %d attempts from %d; want %d from 1", len(got), got[0].N, task.MaxAttemptsListed)
	}
	if got := service.ListAttempts(nil, nil); got == nil || len(got) != 0 {
		t.Errorf("no attempts: %#v; want an empty, non-nil list", got)
	}
	if service.AttemptsToRead(true) != task.MaxAttemptsListed-1 || service.AttemptsToRead(false) != task.MaxAttemptsListed {
		t.Errorf("AttemptsToRead = %d, %d", service.AttemptsToRead(true), service.AttemptsToRead(false))
	}
}
