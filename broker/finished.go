package broker

import (
	"time"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/store"
	"github.com/hourglass-go/hourglass/task"
)

// lastFinished is FinishedTasks of f.ID: the newest record of that task
// id that left queue, if f.Outcome matches it, while the history keeps
// it. It reads one index entry of the store; b.mu is not held.
func (b *Broker) lastFinished(queue string, f service.FinishedFilter) ([]task.Finished, uint64, error) {
	r, err := b.st.LastFinished(queue, f.ID)
	if err == store.ErrNotFound {
		return []task.Finished{}, 0, nil
	}
	if err != nil {
		return nil, 0, b.storeErr(err)
	}
	if f.Outcome != "" && r.Outcome != f.Outcome {
		return []task.Finished{}, 0, nil
	}
	return []task.Finished{finished(r)}, 0, nil
}

// finished is the history's record r as the service answers it.
func finished(r store.Finished) task.Finished {
	return task.Finished{
		ID:        r.ID,
		JobID:     r.JobID,
		Queue:     r.Queue,
		Outcome:   r.Outcome,
		Finished:  time.Unix(0, r.Finished).UTC(),
		Attempts:  int(r.Attempts),
		LastError: r.LastError,
	}
}
