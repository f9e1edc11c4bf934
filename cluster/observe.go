package cluster

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// The methods in this file look at the whole cluster, as the dashboard
// does: counts and pages of tasks from the database, counters and lateness
// from every node's report (report.go), and what falls due when.

// Queues returns every queue that holds tasks, is paused or has a
// policy, by name, with its counts by state from the database, its pause
// and policy (hourglass_queues), and its counters summed over the nodes'
// reports (report.go). The counts scan the tasks table: O(tasks).
func (n *Node) Queues(ctx context.Context) ([]task.QueueStats, error) {
	byName := map[string]*task.QueueStats{}
	rows, err := n.db.Query(ctx, `WITH c AS (SELECT queue,
			count(*) FILTER (WHERE state = 1 AND fire_at IS NOT NULL) AS delayed,
			count(*) FILTER (WHERE state = 1 AND fire_at IS NULL) AS ready,
			count(*) FILTER (WHERE state = 2) AS reserved,
			count(*) FILTER (WHERE state = 3) AS dead
		FROM hourglass_tasks GROUP BY queue)
		SELECT coalesce(c.queue, p.queue), c.queue IS NOT NULL, coalesce(c.delayed, 0), coalesce(c.ready, 0),
			coalesce(c.reserved, 0), coalesce(c.dead, 0),
			CASE WHEN p.paused_until > hourglass_now() THEN p.paused_until ELSE 0 END, `+policyColumnsOf("p")+`
		FROM c FULL JOIN hourglass_queues p ON p.queue = c.queue`)
	if err != nil {
		return nil, dbErr(err)
	}
	for rows.Next() {
		var s task.QueueStats
		var hasTasks bool
		var until int64
		var p policyRow
		if err := rows.Scan(append([]any{&s.Name, &hasTasks, &s.Delayed, &s.Ready, &s.Reserved, &s.Dead, &until}, p.dest()...)...); err != nil {
			rows.Close()
			return nil, dbErr(err)
		}
		s.Policy = p.policy()
		if until > 0 {
			s.PausedUntil = time.Unix(0, until).UTC()
		}
		if hasTasks || until > 0 || !s.Policy.IsZero() {
			byName[s.Name] = &s
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, dbErr(err)
	}
	reps, err := n.reports(ctx)
	if err != nil {
		return nil, err
	}
	for _, rep := range reps {
		for q, c := range rep.queues {
			if s := byName[q]; s != nil {
				s.Puts += c[0]
				s.Deliveries += c[1]
				s.Acks += c[2]
			}
		}
	}
	out := make([]task.QueueStats, 0, len(byName))
	for _, s := range byName {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Lateness returns the cluster's delivery lateness: every node's windows
// of the last 15 minutes, added up (service.MergeLateness).
func (n *Node) Lateness(ctx context.Context) ([]task.LatenessWindow, error) {
	reps, err := n.reports(ctx)
	if err != nil {
		return nil, err
	}
	counts := make([][]service.LatenessCounts, len(reps))
	for i, rep := range reps {
		counts[i] = rep.lateness
	}
	return service.MergeLateness(time.Now(), counts...), nil
}

// listColumns are taskColumns without the payload, which a listing does
// not show.
var listColumns = strings.Replace(taskColumns, "payload", "''::bytea", 1)

// stateWhere is the condition on hourglass_tasks of each state.
var stateWhere = map[task.State]string{
	0:             "true",
	task.Delayed:  "state = 1 AND fire_at IS NOT NULL",
	task.Ready:    "state = 1 AND fire_at IS NULL",
	task.Reserved: "state = 2",
	task.Dead:     "state = 3",
}

// DueHistogram counts the delayed tasks of queue (every queue for "")
// that fall due in each of n windows of width from now (the database's
// clock): counts[i] is the number due in [now+i·width, now+(i+1)·width)
// (service.DueWindow, whose bounds the statement compares). One statement
// that reads every delayed task: O(delayed).
func (n *Node) DueHistogram(ctx context.Context, queue string, width time.Duration, k int) (time.Time, []int, error) {
	rows, err := n.db.Query(ctx, `WITH now AS (SELECT hourglass_now() AS ns)
		SELECT now.ns, coalesce(b.i, -1), coalesce(b.c, 0) FROM now LEFT JOIN (
			SELECT (t.due - now.ns) / $2 AS i, count(*) AS c FROM hourglass_tasks t, now
			WHERE t.state = 1 AND t.fire_at IS NOT NULL AND ($1 = '' OR t.queue = $1)
				AND t.due >= now.ns AND t.due < now.ns + $2 * $3
			GROUP BY 1) b ON true`, queue, int64(width), int64(k))
	if err != nil {
		return time.Time{}, nil, dbErr(err)
	}
	defer rows.Close()
	counts := make([]int, k)
	var now int64
	for rows.Next() {
		var i, c int64
		if err := rows.Scan(&now, &i, &c); err != nil {
			return time.Time{}, nil, dbErr(err)
		}
		if i >= 0 && i < int64(k) {
			counts[i] = int(c)
		}
	}
	if err := rows.Err(); err != nil {
		return time.Time{}, nil, dbErr(err)
	}
	return time.Unix(0, now).UTC(), counts, nil
}
