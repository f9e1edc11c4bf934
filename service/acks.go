package service

import (
	"context"
	"fmt"
	"sync"

	"github.com/hourglass-go/hourglass/task"
)

// ackWorkers bounds the acks of one AckMany in flight at once. The
// engines gather concurrent acks into shared commits (the embedded
// engine's group commit; a cluster node's grouped statements), so that a
// batch of acks costs a few commits, not one each.
const ackWorkers = 64

// AckMany acknowledges each of acks on s and returns one error a task
// (nil where the ack took), in order; acks must be 1 to task.MaxAcks. It
// returns once every ack is durable or refused. It is written once over
// Service, for both engines.
func AckMany(ctx context.Context, s Service, acks []task.Ack) ([]error, error) {
	if len(acks) == 0 || len(acks) > task.MaxAcks {
		return nil, fmt.Errorf("%w: 1 to %d acks in a batch", task.ErrInvalid, task.MaxAcks)
	}
	errs := make([]error, len(acks))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(ackWorkers, len(acks)) {
		wg.Go(func() {
			for i := range next {
				a := acks[i]
				errs[i] = s.Ack(ctx, a.Queue, a.ID, a.Lease)
			}
		})
	}
	for i := range acks {
		next <- i
	}
	close(next)
	wg.Wait()
	return errs, nil
}
