package clusterbench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hourglass-go/hourglass/cluster"
)

// Takeover is what the takeover phase measured: the partitions the node
// cut off held, how long after the cut the other nodes held every
// partition under a live lease, and the lateness of the tasks due from
// the cut to the end of the due stream.
type Takeover struct {
	Partitions int
	Time       time.Duration
	Lateness   Lateness
}

func (t Takeover) String() string {
	return fmt.Sprintf("%d partitions held by the others %v after the cut; tasks due since: %v", t.Partitions, t.Time, t.Lateness)
}

// Takeover runs a due stream on queue (rate tasks a second, put,
// reserved and acked through every node but the first) and a second into
// it cuts the first node off as a SIGKILL would, from the database's
// view: its pool is closed, so it renews no lease, fires no timer and
// writes nothing, and it releases nothing. The others take its
// partitions over when its leases run out (within one lease,
// cluster.DefaultLease); meanwhile the tasks due in those partitions
// wait. The stream lasts until two seconds after a lease from the cut.
// The node stays cut off: run Takeover last.
func (c *Cluster) Takeover(ctx context.Context, queue string, rate int) (Takeover, error) {
	if len(c.live()) < 2 || c.killed >= 0 {
		return Takeover{}, errors.New("hourglass: clusterbench: a takeover needs two nodes or more, none cut off")
	}
	victim := c.Nodes[0]
	var res Takeover
	if err := c.admin.QueryRow(ctx, "SELECT count(*) FROM hourglass_partitions WHERE owner = $1",
		victim.Name()).Scan(&res.Partitions); err != nil {
		return Takeover{}, fmt.Errorf("hourglass: clusterbench: %w", err)
	}
	c.killed = 0
	survivors := c.live()
	const before = time.Second
	var cut time.Time
	var waitErr error
	kill := func() {
		cut = time.Now()
		c.pools[0].Close()
		deadline := cut.Add(3 * cluster.DefaultLease)
		for {
			var held int
			err := c.admin.QueryRow(ctx, `SELECT count(*) FROM hourglass_partitions
				WHERE owner IS NOT NULL AND owner <> $1 AND lease_until > clock_timestamp()`, victim.Name()).Scan(&held)
			if err == nil && held == victim.Partitions() {
				res.Time = time.Since(cut)
				return
			}
			if time.Now().After(deadline) {
				waitErr = fmt.Errorf("hourglass: clusterbench: partitions not taken over within %v (%d held, %v)",
					3*cluster.DefaultLease, held, err)
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	samples, dues, err := c.stream(ctx, queue, rate, before+cluster.DefaultLease+2*time.Second, survivors, before, kill)
	if err != nil {
		return Takeover{}, err
	}
	if waitErr != nil {
		return Takeover{}, waitErr
	}
	if cut.IsZero() {
		return Takeover{}, errors.New("hourglass: clusterbench: the stream ended before the cut")
	}
	var since []sample
	for _, s := range samples {
		if !s.due.Before(cut) {
			since = append(since, s)
		}
	}
	due := 0
	for _, d := range dues {
		if !d.Before(cut) {
			due++
		}
	}
	res.Lateness = summarise(since, due)
	return res, nil
}
