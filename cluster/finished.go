package cluster

import (
	"context"
	"time"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
	"github.com/jackc/pgx/v5"
)

// lastFinished is FinishedTasks of f.ID: the newest record of that task
// id that left queue (any node's), if f.Outcome matches it, while the
// history keeps it. One read of an index of hourglass_history.
func (n *Node) lastFinished(ctx context.Context, queue string, f service.FinishedFilter) ([]task.Finished, uint64, error) {
	var r task.Finished
	var seq, job, finished, attempts int64
	err := n.db.QueryRow(ctx, `SELECT `+finishedColumns+` FROM hourglass_history
		WHERE id = $2 AND queue = $1 ORDER BY seq DESC LIMIT 1`, queue, f.ID).
		Scan(&seq, &job, &r.Queue, &r.ID, &r.Outcome, &finished, &attempts, &r.LastError)
	if err == pgx.ErrNoRows || err == nil && f.Outcome != "" && r.Outcome != f.Outcome {
		return []task.Finished{}, 0, nil
	}
	if err != nil {
		return nil, 0, dbErr(err)
	}
	r.JobID, r.Finished, r.Attempts = uint64(job), time.Unix(0, finished).UTC(), int(attempts)
	return []task.Finished{r}, 0, nil
}
