package broker

import (
	"context"
	"time"

	"github.com/hourglass-go/hourglass/task"
)

// LastFinished returns the newest record of the task id that left queue,
// while the history keeps it; task.ErrNotFound otherwise. What it
// answers is durable (it waits for the writes before it to commit); it
// reads one index entry of the store with b.mu released.
func (b *Broker) LastFinished(ctx context.Context, queue, id string) (task.Finished, error) {
	b.mu.Lock()
	if err := b.usable(); err != nil {
		b.mu.Unlock()
		return task.Finished{}, err
	}
	g := b.answerGroup()
	b.mu.Unlock()
	if err := b.wait(ctx, g); err != nil {
		return task.Finished{}, err
	}
	f, err := b.st.LastFinished(queue, id)
	if err != nil {
		return task.Finished{}, b.storeErr(err)
	}
	return task.Finished{
		ID:        f.ID,
		JobID:     f.JobID,
		Queue:     f.Queue,
		Outcome:   f.Outcome,
		Finished:  time.Unix(0, f.Finished).UTC(),
		Attempts:  int(f.Attempts),
		LastError: f.LastError,
	}, nil
}
