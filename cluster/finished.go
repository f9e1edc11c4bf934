package cluster

import (
	"context"
	"time"

	"github.com/hourglass-go/hourglass/task"
	"github.com/jackc/pgx/v5"
)

// LastFinished returns the newest record of the task id that left queue,
// while the history keeps it (any node's); task.ErrNotFound otherwise.
// One read of an index of hourglass_history.
func (n *Node) LastFinished(ctx context.Context, queue, id string) (task.Finished, error) {
	if err := n.Err(); err != nil {
		return task.Finished{}, err
	}
	var f task.Finished
	var seq, job, finished, attempts int64
	err := n.db.QueryRow(ctx, `SELECT `+finishedColumns+` FROM hourglass_history
		WHERE id = $2 AND queue = $1 ORDER BY seq DESC LIMIT 1`, queue, id).
		Scan(&seq, &job, &f.Queue, &f.ID, &f.Outcome, &finished, &attempts, &f.LastError)
	if err == pgx.ErrNoRows {
		return task.Finished{}, task.ErrNotFound
	}
	if err != nil {
		return task.Finished{}, dbErr(err)
	}
	f.JobID, f.Finished, f.Attempts = uint64(job), time.Unix(0, finished).UTC(), int(attempts)
	return f, nil
}
