package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/hourglass-go/hourglass/internal/clusterbench"
	"github.com/hourglass-go/hourglass/internal/pgtest"
)

// clusterScenario measures a cluster of nodes (package cluster) on one
// PostgreSQL database, against the targets of issue 14. The bench starts
// its own PostgreSQL server (package internal/pgtest: initdb into a
// temporary directory, fsync and synchronous_commit on, loopback) and
// runs the nodes in this process, each on a pool of its own, as separate
// processes would; the phases are package cluster/clusterbench's. Its
// rows, for 1 node and then 3 nodes on a fresh server and database each:
//
//   - put ×64: durable single puts from 64 callers, spread over the
//     nodes, each task due in an hour;
//   - batch 100 ×8: the same by PutBatch of 100 from 8 callers;
//   - lateness 5k/s, n: n tasks put a day ahead (the row's fill/s is
//     that rate), then tasks falling due at 5,000 a second, put a second
//     ahead through the nodes in turn, reserved by 4 waiting reservers on
//     every node (max 100) and acked beside them; lateness = reserve
//     returned − due; stmts/task = the statements the nodes sent over
//     the stream (puts, the owners' flushes, reservations, acks, and
//     their lease loops and notifications) per task delivered;
//   - takeover: on a server and database of their own, 3 nodes in this
//     process and a fourth, `hourglass serve --postgres` (the binary
//     ServeFlags names), which holds its share of the partitions (16 of 64) and
//     none of the load; a second into a due stream of 5k/s through the
//     3, the fourth is killed with SIGKILL; takeover = from the kill
//     until the 3 hold every partition under a live lease (within one
//     lease, 5 s), and the lateness of the tasks due since the kill
//     (those of its partitions wait for the takeover).
//
// n is the largest size: 100k with --quick, 1M otherwise; the lateness
// streams last 5× StreamFor (1.5 s quick, 10 s full), the takeover's a
// lease and 3 s, and the puts 5× Budget. The tasks of the put rows stay
// pending during the lateness row. The scenario runs only when named
// (--scenario cluster), and skips where PostgreSQL is not installed.
var clusterScenario = Scenario{
	Name: "cluster",
	Doc: "nodes of one cluster (package cluster) in this process, each on a pool of its own, on a PostgreSQL server the bench starts (fsync and synchronous_commit on, loopback), 1 node then 3: " +
		"durable puts/s from 64 callers one task per call, and from 8 by batches of 100, tasks due in 1 h; " +
		"lateness n: n tasks pending a day ahead (fill/s: their put rate), then tasks falling due at 5k/s, put 1 s ahead through the nodes in turn, reserved by 4 waiting reservers per node (max 100) and acked beside them, lateness = reserve returned − due, stmts/task = statements the nodes sent during the stream per task delivered; " +
		"takeover: 3 nodes and a fourth, a process of `hourglass serve --postgres` holding its share of the partitions and none of the load, killed with SIGKILL a second into a 5k/s due stream through the 3: takeover = from the kill until the 3 hold every partition under a live lease, and the lateness of the tasks due since the kill",
	jobs: clusterJobs,
}

// Sizes and rates of the cluster scenario.
const (
	clusterClients  = 64
	clusterBatchers = 8
	clusterBatch    = 100
	clusterDueRate  = 5000
)

// clusterOptIn is the note of the cluster scenario in a run that does not
// name it.
const clusterOptIn = "skipped: runs only when named (--scenario cluster): it starts PostgreSQL and fills it with 1M tasks"

// clusterSession is one PostgreSQL server and the nodes on a database of
// it, shared by the rows of one node count.
type clusterSession struct {
	pg  *pgtest.Server
	url string // of the database
	c   *clusterbench.Cluster
}

func (s *clusterSession) close() {
	s.c.Close()
	s.pg.Close()
}

// openClusterSession starts a server and nodes nodes on a new database.
// A missing PostgreSQL is reported as a note.
func openClusterSession(nodes int) (*clusterSession, string, error) {
	pg, err := pgtest.Launch(pgtest.Set("max_connections", "400"))
	if errors.Is(err, pgtest.ErrNoBinaries) {
		return nil, "skipped: " + err.Error(), nil
	}
	if err != nil {
		return nil, "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url, err := pg.NewDatabase(ctx)
	if err != nil {
		pg.Close()
		return nil, "", err
	}
	c, err := clusterbench.Start(ctx, url, nodes, clusterClients, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		pg.Close()
		return nil, "", err
	}
	return &clusterSession{pg: pg, url: url, c: c}, "", nil
}

// clusterJobs plans a round of the cluster scenario: for each node count
// the put rows and the lateness row on one session, which the first row
// opens and the last closes; then the takeover row, on a session of its
// own.
func clusterJobs(c *Config, _ []Structure) []Job {
	if !slices.Contains(c.Scenarios, "cluster") {
		return []Job{{Scenario: "cluster", Structure: "3 nodes", run: func() Result {
			return Result{Note: clusterOptIn}
		}}}
	}
	if ClusterLight.Only {
		return lightJobs()
	}
	n := slices.Max(c.Sizes)
	putFor := min(max(5*c.Budget, 50*time.Millisecond), 10*time.Second)
	streamFor := max(5*c.StreamFor, 200*time.Millisecond)
	ctx := context.Background()

	var jobs []Job
	for _, nodes := range []int{1, 3} {
		structure := fmt.Sprintf("%d nodes", nodes)
		if nodes == 1 {
			structure = "1 node"
		}
		var s *clusterSession
		closeSession := func() {
			if s != nil {
				s.close()
				s = nil
			}
		}
		// step runs f on the session, opening it first if open is set and
		// closing it after if last is set or f fails.
		step := func(rows int, cs string, open, last bool, f func() (Result, error)) Job {
			return Job{Scenario: "cluster", Structure: structure, N: rows, Case: cs, run: func() Result {
				if open {
					closeSession()
					var note string
					var err error
					if s, note, err = openClusterSession(nodes); err != nil || note != "" {
						if err != nil {
							return failed(err)
						}
						return Result{Note: note}
					}
				}
				if s == nil {
					return Result{Note: "skipped: no cluster (the row that starts it did not)"}
				}
				r, err := f()
				if err != nil || last {
					closeSession()
				}
				if err != nil {
					return failed(err)
				}
				return r
			}}
		}
		jobs = append(jobs,
			step(0, fmt.Sprintf("put ×%d", clusterClients), true, false, func() (Result, error) {
				rate, err := s.c.Puts(ctx, "bench-single", clusterClients, 1, putFor)
				var r Result
				r.add("tasks/s", unitRate, rate)
				return r, err
			}),
			step(0, fmt.Sprintf("batch %d ×%d", clusterBatch, clusterBatchers), false, false, func() (Result, error) {
				rate, err := s.c.Puts(ctx, "bench-batch", clusterBatchers, clusterBatch, putFor)
				var r Result
				r.add("tasks/s", unitRate, rate)
				return r, err
			}),
			step(n, fmt.Sprintf("lateness %s/s", formatRate(clusterDueRate)), false, true, func() (Result, error) {
				var r Result
				fill, err := s.c.Fill(ctx, "bench-late", n)
				if err != nil {
					return r, err
				}
				r.add("fill/s", unitRate, fill)
				l, err := s.c.Lateness(ctx, "bench-due", clusterDueRate, streamFor)
				addLateness(&r, l)
				r.add("stmts/task", unitRatio, l.StatementsPerTask)
				return r, err
			}),
		)
	}
	jobs = append(jobs, Job{Scenario: "cluster", Structure: "3 nodes", Case: "takeover", run: clusterTakeover})
	return append(jobs, lightJobs()...)
}

// clusterTakeover is the takeover row: 3 nodes in this process and a
// fourth, `hourglass serve --postgres` (serveCommand's binary), killed with
// SIGKILL a second into a due stream through the 3, on a server and
// database of their own.
func clusterTakeover() Result {
	bin, skip := serveCommand()
	if skip != "" {
		return Result{Note: skip}
	}
	s, note, err := openClusterSession(3)
	if err != nil {
		return failed(err)
	}
	if note != "" {
		return Result{Note: note}
	}
	defer s.close()
	const name = "bench-victim"
	p := newNodeProcess(bin, s.url, name)
	defer p.kill()
	if _, err := p.start(); err != nil {
		return failed(err)
	}
	t, err := s.c.Takeover(context.Background(), "bench-takeover", clusterDueRate, clusterbench.Victim{
		Name: name,
		Kill: func() error { p.kill(); return nil },
	})
	if err != nil {
		return failed(err)
	}
	var r Result
	r.add("takeover", unitSec, t.Time.Seconds())
	r.add("partitions", unitCount, float64(t.Partitions))
	addLateness(&r, t.Lateness)
	return r
}

// addLateness adds a due stream's figures to r.
func addLateness(r *Result, l clusterbench.Lateness) {
	if l.Delivered > 0 {
		r.add("late p50", unitSec, l.P50.Seconds())
		r.add("late p99", unitSec, l.P99.Seconds())
		r.add("late max", unitSec, l.Max.Seconds())
	}
	r.add("early", unitCount, float64(l.Early))
	r.add("samples", unitCount, float64(l.Delivered))
	if l.PutLag > 0 { // a stream of the bench's own putter (not the light row's)
		r.add("put lag", unitSec, l.PutLag.Seconds())
	}
	if missed := l.Due - l.Delivered; missed > 0 {
		r.Note = fmt.Sprintf("%d of %d tasks not delivered within 10 s of the last due time or put: %s", missed, l.Due, l.Stragglers)
	}
}
