package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/hourglass-go/hourglass/internal/retry"
	"log/slog"
	"sync"
	"time"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// A node counts what it serves (puts, deliveries and acks per queue, and
// the lateness of its deliveries) in memory; so that every node answers
// for the whole cluster, each one writes those counts into its row of
// hourglass_node_reports when they changed, at most every reportEvery
// (and every reportRefresh when they did not), and a reader adds up every
// node's row (its own counts read from memory instead). A row not
// written for LatenessWindows×LatenessWindow (15 minutes) is a dead node's
// and is left out and deleted: its lateness windows are older than what
// the dashboard shows, and its counters stop counting. So the cluster's
// counters are the sums, over the nodes that reported in the last 15
// minutes, of each one's counts since it started; another node's share is
// at most reportEvery old.

// reportEvery is how often a node writes its report when its counts
// changed; reportRefresh is how often it writes an unchanged one, so that
// a live node's report never ages out.
const (
	reportEvery   = time.Second
	reportRefresh = time.Minute
)

// reportAge is how long a report counts after its last write.
const reportAge = service.LatenessWindows * service.LatenessWindow

// queueCounts are a queue's counters in a report: puts, deliveries, acks.
type queueCounts [3]uint64

// nodeReport is one row of hourglass_node_reports.
type nodeReport struct {
	node     string
	queues   map[string]queueCounts
	lateness []service.LatenessCounts
}

// reporter writes the node's report (see above), from start until stop,
// on a goroutine of its own. Its source reads the node's counts.
type reporter struct {
	db      *pool
	node    string
	started int64 // database ns
	source  func() nodeReport
	log     *slog.Logger

	quit chan struct{}
	wg   sync.WaitGroup

	// last is the last report written, and when. Used by the loop only.
	last      []byte
	lastWrite time.Time
}

// start begins writing reports.
func (r *reporter) start() {
	r.quit = make(chan struct{})
	r.wg.Add(1)
	go r.loop()
}

// stop ends the writes and waits for the one in progress.
func (r *reporter) stop() {
	close(r.quit)
	r.wg.Wait()
}

// loop writes the report every reportEvery; after a failed write, after
// a back-off (up to retry.DefaultMax) instead.
func (r *reporter) loop() {
	defer r.wg.Done()
	backoff := retry.Backoff{Base: reportEvery, Max: retry.DefaultMax}
	failures := retry.NewFailureLog(r.log, "hourglass: writing the node's report failed", "hourglass: writing the node's report works again")
	wait := reportEvery
	for {
		select {
		case <-r.quit:
			return
		case <-time.After(wait):
		}
		ctx, cancel := context.WithTimeout(context.Background(), reportEvery)
		err := r.write(ctx, r.source())
		cancel()
		if err != nil {
			failures.Failed(err)
			wait = backoff.Next()
		} else {
			failures.OK()
			backoff.Reset()
			wait = reportEvery
		}
	}
}

// write upserts rep, unless it is the last one written and that is less
// than reportRefresh old (an idle node writes once a minute), and deletes
// the reports of nodes gone for reportAge.
func (r *reporter) write(ctx context.Context, rep nodeReport) error {
	qs, err := json.Marshal(rep.queues)
	if err != nil {
		return err
	}
	late, err := json.Marshal(rep.lateness)
	if err != nil {
		return err
	}
	both := append(append(append([]byte(nil), qs...), 0), late...)
	if bytes.Equal(both, r.last) && time.Since(r.lastWrite) < reportRefresh {
		return nil
	}
	defer func() {
		if err == nil {
			r.last, r.lastWrite = both, time.Now()
		}
	}()
	_, err = r.db.Exec(ctx, `WITH del AS (
			DELETE FROM hourglass_node_reports WHERE updated < hourglass_now() - $5::bigint AND node <> $1)
		INSERT INTO hourglass_node_reports (node, started, updated, queues, lateness)
		VALUES ($1, $2, hourglass_now(), $3, $4)
		ON CONFLICT (node) DO UPDATE SET started = EXCLUDED.started, updated = EXCLUDED.updated,
			queues = EXCLUDED.queues, lateness = EXCLUDED.lateness`,
		r.node, r.started, qs, late, int64(reportAge))
	return err
}

// readReports returns the reports of the nodes other than self written in
// the last reportAge.
func readReports(ctx context.Context, db *pool, self string) ([]nodeReport, error) {
	rows, err := db.Query(ctx, `SELECT node, queues, lateness FROM hourglass_node_reports
		WHERE node <> $1 AND updated >= hourglass_now() - $2::bigint`, self, int64(reportAge))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []nodeReport
	for rows.Next() {
		var rep nodeReport
		var qs, late []byte
		if err := rows.Scan(&rep.node, &qs, &late); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(qs, &rep.queues); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(late, &rep.lateness); err != nil {
			return nil, err
		}
		out = append(out, rep)
	}
	return out, rows.Err()
}

// counters are what a node counts of its own work: puts, deliveries and
// acks per queue, and the lateness of its deliveries. They have a lock of
// their own, apart from the node's. The zero counters are ready to use and
// safe for concurrent use.
type counters struct {
	mu sync.Mutex
	// queues and late are guarded by mu.
	queues map[string]*counts
	late   service.Lateness
}

// counts are one queue's counters.
type counts struct{ puts, deliveries, acks uint64 }

// count applies f to queue's counters.
func (c *counters) count(queue string, f func(*counts)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f(c.get(queue))
}

// get returns queue's counters, made on first use. c.mu is held.
func (c *counters) get(queue string) *counts {
	q := c.queues[queue]
	if q == nil {
		if c.queues == nil {
			c.queues = make(map[string]*counts)
		}
		q = &counts{}
		c.queues[queue] = q
	}
	return q
}

// delivered counts the hand-over of tasks, due at dues and made ready
// at readies (0: at due), at dbNow (database ns).
func (c *counters) delivered(tasks []task.Task, dues, readies []int64, dbNow int64) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, t := range tasks {
		c.get(t.Queue).deliveries++
		late, ready := service.SplitLateness(dues[i], readies[i], dbNow)
		c.late.Add(now, late, ready)
	}
}

// report returns the counts as the node's report (without its name).
func (c *counters) report() nodeReport {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	rep := nodeReport{queues: make(map[string]queueCounts, len(c.queues)), lateness: c.late.Counts(now)}
	for q, n := range c.queues {
		rep.queues[q] = queueCounts{n.puts, n.deliveries, n.acks}
	}
	return rep
}

// reports returns every live node's report, this node's from memory.
func (n *Node) reports(ctx context.Context) ([]nodeReport, error) {
	others, err := readReports(ctx, n.db, n.name)
	if err != nil {
		return nil, dbErr(err)
	}
	own := n.counters.report()
	own.node = n.name
	return append(others, own), nil
}
