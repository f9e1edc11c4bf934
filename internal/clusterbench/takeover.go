package clusterbench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hourglass-go/hourglass/cluster"
)

// Takeover is what the takeover phase measured: the partitions the node
// killed held, how long after the kill the other nodes held every
// partition under a live lease, and the lateness of the tasks due from
// the kill to the end of the due stream.
type Takeover struct {
	Partitions int
	Time       time.Duration
	Lateness   Lateness
}

func (t Takeover) String() string {
	return fmt.Sprintf("%d partitions held by the others %v after the kill; tasks due since: %v", t.Partitions, t.Time, t.Lateness)
}

// Victim is the node a takeover kills: its name in the cluster, and how
// to kill it. It holds partitions, but none of the due stream's load
// goes through it.
type Victim struct {
	Name string
	Kill func() error
}

// Cut takes node i out of the load and returns it as the victim of a
// takeover, killed in this process as a SIGKILL would kill it, from the
// database's view: every connection it opened is closed and it can open
// none (its pool's, the flusher's own and its LISTEN connection), so it
// renews no lease, fires no timer, writes nothing and releases nothing.
// A node of another process is a truer victim: see Victim.
func (c *Cluster) Cut(i int) Victim {
	c.killed = i
	return Victim{Name: c.Nodes[i].Name(), Kill: func() error {
		c.links[i].cut()
		c.pools[i].Close()
		return nil
	}}
}

// links are one node's connections to the database: its dialer, wrapped,
// that refuses once they are cut.
type links struct {
	dial  pgconn.DialFunc
	mu    sync.Mutex
	conns map[net.Conn]bool
	done  bool
}

// errCut is what a node that Cut killed gets when it dials.
var errCut = errors.New("hourglass: clusterbench: the node was cut off")

// Dial dials as the node's dialer does, unless the links are cut.
func (l *links) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := l.dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		conn.Close()
		return nil, errCut
	}
	l.conns[conn] = true
	return &link{Conn: conn, l: l}, nil
}

// cut closes every connection and refuses new ones.
func (l *links) cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done = true
	for conn := range l.conns {
		conn.Close()
	}
	clear(l.conns)
}

// link is one of links' connections, forgotten when closed.
type link struct {
	net.Conn
	l *links
}

func (k *link) Close() error {
	k.l.mu.Lock()
	delete(k.l.conns, k.Conn)
	k.l.mu.Unlock()
	return k.Conn.Close()
}

// Takeover waits until v holds its share of the partitions, then runs a
// due stream on queue (rate tasks a second, put, reserved and acked
// through the nodes of this process, v's excepted) and a second into it
// kills v. The others take v's partitions over when its leases run out
// (within one lease, cluster.DefaultLease); meanwhile the tasks due in
// those partitions wait. The stream lasts until two seconds after a lease
// from the kill. Run it last: v stays dead.
func (c *Cluster) Takeover(ctx context.Context, queue string, rate int, v Victim) (Takeover, error) {
	nodes := c.live()
	if len(nodes) == 0 {
		return Takeover{}, errors.New("hourglass: clusterbench: a takeover needs a node besides the victim")
	}
	partitions := nodes[0].Partitions()
	var res Takeover
	// v's share: the lease loops settle a join within a few ticks.
	share := partitions / (len(nodes) + 1)
	for deadline := time.Now().Add(5 * cluster.DefaultLease); ; {
		err := c.admin.QueryRow(ctx, `SELECT count(*) FROM hourglass_partitions
			WHERE owner = $1 AND lease_until > clock_timestamp()`, v.Name).Scan(&res.Partitions)
		if err != nil {
			return Takeover{}, fmt.Errorf("hourglass: clusterbench: %w", err)
		}
		if res.Partitions >= share {
			break
		}
		if time.Now().After(deadline) {
			return Takeover{}, fmt.Errorf("hourglass: clusterbench: %s holds %d partitions after %v, want %d",
				v.Name, res.Partitions, 5*cluster.DefaultLease, share)
		}
		time.Sleep(50 * time.Millisecond)
	}
	const before = time.Second
	var killed time.Time
	var waitErr error
	kill := func() {
		killed = time.Now()
		if waitErr = v.Kill(); waitErr != nil {
			return
		}
		deadline := killed.Add(3 * cluster.DefaultLease)
		for {
			var held int
			err := c.admin.QueryRow(ctx, `SELECT count(*) FROM hourglass_partitions
				WHERE owner IS NOT NULL AND owner <> $1 AND lease_until > clock_timestamp()`, v.Name).Scan(&held)
			if err == nil && held == partitions {
				res.Time = time.Since(killed)
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
	st, err := c.stream(ctx, queue, rate, before+cluster.DefaultLease+2*time.Second, nodes, before, kill)
	if err != nil {
		return Takeover{}, err
	}
	if waitErr != nil {
		return Takeover{}, waitErr
	}
	if killed.IsZero() {
		return Takeover{}, errors.New("hourglass: clusterbench: the stream ended before the kill")
	}
	var since []sample
	for _, s := range st.samples {
		if !s.due.Before(killed) {
			since = append(since, s)
		}
	}
	due := 0
	for _, d := range st.dues {
		if !d.Before(killed) {
			due++
		}
	}
	res.Lateness = summarise(since, due)
	res.Lateness.PutLag = st.putLag
	if res.Lateness.Delivered < due {
		res.Lateness.Stragglers = c.stragglers(ctx, queue, st, killed)
	}
	return res, nil
}
