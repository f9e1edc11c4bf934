package clusterbench

import (
	"fmt"
	"maps"
	"os"
	"runtime/trace"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// A stall is a stretch of a due stream whose tasks came late: the tasks
// due in a window of stallWindow, the latest of them more than stallLate
// late. The bench names each (when, how late, on which node) and, with
// Cluster.SampleWaits, shows what PostgreSQL's backends were doing
// meanwhile, from the sampled timeline; with Cluster.TraceTo, the Go
// runtime's execution trace of the seconds before the first stall is
// written to a file. A stall is not hidden or taken out of the figures:
// this only names it.
const (
	stallWindow = 50 * time.Millisecond
	stallLate   = 50 * time.Millisecond
)

// stall is one stretch of late tasks: the due times of its first and
// last windows, the latest delivery, and the late tasks by the node that
// delivered them.
type stall struct {
	from, to time.Time
	worst    time.Duration
	late     int
	byNode   map[int]int
}

// stalls returns the stalls among samples (any order), earliest first:
// windows of stallWindow by due time whose latest task was more than
// stallLate late, adjacent ones merged. O(n log n).
func stalls(samples []sample) []stall {
	s := slices.Clone(samples)
	slices.SortFunc(s, func(a, b sample) int { return a.due.Compare(b.due) })
	var out []stall
	for i := 0; i < len(s); {
		w := s[i].due.Truncate(stallWindow)
		j := i
		var worst time.Duration
		for j < len(s) && s[j].due.Truncate(stallWindow).Equal(w) {
			worst = max(worst, s[j].late)
			j++
		}
		if worst > stallLate {
			if n := len(out); n == 0 || out[n-1].to.Add(stallWindow).Before(w) {
				out = append(out, stall{from: w, byNode: map[int]int{}})
			}
			st := &out[len(out)-1]
			st.to, st.worst = w.Add(stallWindow), max(st.worst, worst)
			for _, x := range s[i:j] {
				if x.late > stallLate {
					st.late++
					st.byNode[x.node]++
				}
			}
		}
		i = j
	}
	return out
}

// describeStalls names the stalls of samples, each with what the waits
// timeline saw from a stallWindow before it until its latest delivery
// (every sample then: the backends of the nodes that were not idle, with
// how long their statement had run), at most maxStalls of them. start
// is the stream's start, for the times.
func describeStalls(samples []sample, timeline []waitSample, start time.Time) string {
	const maxStalls = 4
	ss := stalls(samples)
	if len(ss) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d stalls (tasks due in a %v window more than %v late):", len(ss), stallWindow, stallLate)
	for k, st := range ss {
		if k == maxStalls {
			fmt.Fprintf(&b, "\n  (%d more)", len(ss)-k)
			break
		}
		var nodes []string
		for _, n := range slices.Sorted(maps.Keys(st.byNode)) {
			nodes = append(nodes, fmt.Sprintf("bench-%d: %d", n, st.byNode[n]))
		}
		fmt.Fprintf(&b, "\n  due +%v to +%v: %d late, worst %v; delivered by %s",
			st.from.Sub(start).Round(time.Millisecond), st.to.Sub(start).Round(time.Millisecond), st.late,
			round(st.worst), strings.Join(nodes, ", "))
		lo, hi := st.from.Add(-stallWindow), st.to.Add(st.worst)
		var in []waitSample
		for _, w := range timeline {
			if !w.at.Before(lo) && !w.at.After(hi) {
				in = append(in, w)
			}
		}
		if m, o, x := cores(in); m > 0 {
			fmt.Fprintf(&b, "\n    CPUs busy meanwhile: %.2f, the bench and its PostgreSQL %.2f, other work %.2f", m, o, x)
		}
		for _, w := range in {
			fmt.Fprintf(&b, "\n    +%v (took %v):", w.at.Sub(start).Round(time.Millisecond), round(w.took))
			for _, r := range w.rows {
				fmt.Fprintf(&b, "\n      %s", r)
			}
		}
	}
	return b.String()
}

// waitSample is one look at pg_stat_activity: when it was taken (its
// query's start, by this process's clock), how long the query took, and
// a line per backend of the database (and background process) that was
// not idle.
//
// machine is the machine's busy CPU time then (machineCPU), and ours
// that of this process and the bench's PostgreSQL server (serverCPU):
// between two samples, the difference of the two is what other work on
// the machine took.
type waitSample struct {
	at            time.Time
	took          time.Duration
	rows          []string
	machine, ours time.Duration
}

// cores returns, between the first and last of samples, the CPUs kept
// busy on average by the machine, by the bench and its server, and by
// everything else; zeros for fewer than two samples.
func cores(samples []waitSample) (machine, ours, others float64) {
	if len(samples) < 2 {
		return 0, 0, 0
	}
	a, b := samples[0], samples[len(samples)-1]
	wall := b.at.Sub(a.at).Seconds()
	if wall <= 0 {
		return 0, 0, 0
	}
	machine, ours = (b.machine-a.machine).Seconds()/wall, (b.ours-a.ours).Seconds()/wall
	return machine, ours, machine - ours
}

// PoolStat is what one node's pool went through over a due stream:
// acquisitions, those that found no idle connection and had to wait (for
// one released or opened), the time spent waiting for connections in
// all, the connections opened, and the most open at the end.
type PoolStat struct {
	Acquires, EmptyAcquires int64
	AcquireWait             time.Duration
	NewConns                int64
	Total, Max              int32
}

func (p PoolStat) String() string {
	return fmt.Sprintf("%d acquires, %d found none idle, %v waiting in all, %d opened, %d of %d open",
		p.Acquires, p.EmptyAcquires, p.AcquireWait.Round(time.Millisecond), p.NewConns, p.Total, p.Max)
}

// poolStats returns each pool's statistics now.
func poolStats(pools []*pgxpool.Pool) []*pgxpool.Stat {
	out := make([]*pgxpool.Stat, len(pools))
	for i, p := range pools {
		out[i] = p.Stat()
	}
	return out
}

// poolDiff returns what each pool went through from before to after.
func poolDiff(before, after []*pgxpool.Stat) []PoolStat {
	out := make([]PoolStat, len(after))
	for i, a := range after {
		b := before[i]
		out[i] = PoolStat{
			Acquires:      a.AcquireCount() - b.AcquireCount(),
			EmptyAcquires: a.EmptyAcquireCount() - b.EmptyAcquireCount(),
			AcquireWait:   a.AcquireDuration() - b.AcquireDuration(),
			NewConns:      a.NewConnsCount() - b.NewConnsCount(),
			Total:         a.TotalConns(),
			Max:           a.MaxConns(),
		}
	}
	return out
}

// recorder keeps the Go runtime's execution trace of the last seconds
// (a flight recorder) and writes it to a file at the first stall a
// stream sees, a while after it began, so that the file holds the stall
// and what led to it. Nil when not asked for; safe for concurrent use.
type recorder struct {
	fr   *trace.FlightRecorder
	path string
	once sync.Once
	wg   sync.WaitGroup
	err  error
}

// startRecorder starts a flight recorder that writes to path; nil for
// an empty path, or when it cannot start (the error is returned).
func startRecorder(path string) (*recorder, error) {
	if path == "" {
		return nil, nil
	}
	fr := trace.NewFlightRecorder(trace.FlightRecorderConfig{MinAge: 3 * time.Second, MaxBytes: 64 << 20})
	if err := fr.Start(); err != nil {
		return nil, fmt.Errorf("hourglass: clusterbench: flight recorder: %w", err)
	}
	return &recorder{fr: fr, path: path}, nil
}

// late notes a delivery late by d: at the first over stallLate*2, the
// trace is written half a second later.
func (r *recorder) late(d time.Duration) {
	if r == nil || d <= 2*stallLate {
		return
	}
	r.once.Do(func() {
		r.wg.Go(func() {
			time.Sleep(500 * time.Millisecond)
			f, err := os.Create(r.path)
			if err != nil {
				r.err = err
				return
			}
			defer f.Close()
			_, r.err = r.fr.WriteTo(f)
		})
	})
}

// stop waits for a trace being written and stops the recorder; it
// returns the writing's error, if any.
func (r *recorder) stop() error {
	if r == nil {
		return nil
	}
	r.wg.Wait()
	r.fr.Stop()
	return r.err
}
