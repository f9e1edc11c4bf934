package clusterbench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hourglass-go/hourglass/cluster"
)

// Takeover is what the takeover phase measured: the partitions the node
// killed held, how long after the kill the other nodes held every
// partition under a live lease, and the lateness of the tasks due from
// the kill to the end of the due stream.
//
// Its times are the machine's one clock: the database's clock_timestamp()
// for what the database holds, the bench's for the kill and the rounds.
type Takeover struct {
	Partitions int
	Time       time.Duration // from the kill until every partition was held
	// Killed is when the victim was killed. LastRenewal is when its
	// leases were last renewed: the latest lease_until of the partitions
	// it held, seen from the kill until none was its, less a lease.
	// HeartbeatEnd is when its heartbeat (alive_until) ran out. Held is
	// when the others were first seen holding every partition (polled
	// every 5 ms), and FromRenewal is Held less LastRenewal.
	Killed, LastRenewal, HeartbeatEnd, Held time.Time
	FromRenewal                             time.Duration
	// Rounds are the others' lease rounds that took partitions over
	// from another node, from the kill on (their log lines).
	Rounds   []TakeoverRound
	Lateness Lateness
}

func (t Takeover) String() string {
	return fmt.Sprintf("%d partitions held by the others %v after the kill; tasks due since: %v", t.Partitions, t.Time, t.Lateness)
}

// Timeline returns t's times on one line, each after the victim's last
// renewal, then the rounds that took partitions over.
func (t Takeover) Timeline() string {
	at := func(x time.Time) string {
		if x.IsZero() || t.LastRenewal.IsZero() {
			return "?"
		}
		return fmt.Sprintf("%+.3fs", x.Sub(t.LastRenewal).Seconds())
	}
	var b strings.Builder
	fmt.Fprintf(&b, "from the last renewal: kill %s, heartbeat ends %s, all held %s; takeover %.3fs from the kill, %.3fs from the last renewal",
		at(t.Killed), at(t.HeartbeatEnd), at(t.Held), t.Time.Seconds(), t.FromRenewal.Seconds())
	for _, r := range t.Rounds {
		fmt.Fprintf(&b, "; %s took %d (%s): planned %s, began %s, acquired %s, ended %s",
			r.Node, r.Over, r.Woke, at(r.Planned), at(r.Began), at(r.Acquired), at(r.Ended))
	}
	return b.String()
}

// TakeoverRound is one lease round of a node that took partitions over
// from another: how many, what woke it (its timer or a kick), when its
// timer was meant to fire, when the round began, when its acquire's
// statement returned and when the round ended.
type TakeoverRound struct {
	Node                            string
	Over                            int
	Woke                            string
	Planned, Began, Acquired, Ended time.Time
}

// roundMsg is the message of the nodes' log line for a lease round that
// took partitions over (cluster/leases.go).
const roundMsg = "hourglass: lease round took partitions over"

// rounds collects the nodes' takeover rounds while on.
type rounds struct {
	mu  sync.Mutex
	on  bool
	got []TakeoverRound
}

// record starts collecting, dropping what was collected.
func (r *rounds) record() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.on, r.got = true, nil
}

// stop stops collecting and returns what was collected.
func (r *rounds) stop() []TakeoverRound {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.on = false
	return r.got
}

// roundLog is the nodes' log handler: it passes every record on to next
// (as next would take it) and keeps the takeover rounds in rec.
type roundLog struct {
	next  slog.Handler
	attrs []slog.Attr
	rec   *rounds
}

func (h *roundLog) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelInfo || h.next.Enabled(ctx, l)
}

func (h *roundLog) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == roundMsg {
		h.keep(r)
	}
	if h.next.Enabled(ctx, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}

func (h *roundLog) keep(r slog.Record) {
	var tr TakeoverRound
	set := func(a slog.Attr) bool {
		switch a.Key {
		case "node":
			tr.Node = a.Value.String()
		case "taken over":
			tr.Over = int(a.Value.Int64())
		case "woke":
			tr.Woke = a.Value.String()
		case "planned":
			tr.Planned = a.Value.Time()
		case "began":
			tr.Began = a.Value.Time()
		case "acquired":
			tr.Acquired = a.Value.Time()
		case "ended":
			tr.Ended = a.Value.Time()
		}
		return true
	}
	for _, a := range h.attrs {
		set(a)
	}
	r.Attrs(set)
	h.rec.mu.Lock()
	defer h.rec.mu.Unlock()
	if h.rec.on {
		h.rec.got = append(h.rec.got, tr)
	}
}

func (h *roundLog) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &roundLog{next: h.next.WithAttrs(attrs), attrs: append(h.attrs[:len(h.attrs):len(h.attrs)], attrs...), rec: h.rec}
}

func (h *roundLog) WithGroup(name string) slog.Handler {
	return &roundLog{next: h.next.WithGroup(name), attrs: h.attrs, rec: h.rec}
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
	before := time.Second
	if c.KillAt > 0 {
		before = c.KillAt
	}
	var killed time.Time
	var waitErr error
	c.rounds.record()
	defer c.rounds.stop()
	kill := func() {
		killed = time.Now()
		if waitErr = v.Kill(); waitErr != nil {
			return
		}
		deadline := killed.Add(3 * cluster.DefaultLease)
		for {
			// Every poll also reads the victim's latest lease and its
			// heartbeat: a renewal it sent before the kill may commit
			// after it.
			var held int
			var until, alive *time.Time
			var now time.Time
			err := c.admin.QueryRow(ctx, `SELECT
					count(*) FILTER (WHERE owner IS NOT NULL AND owner <> $1 AND lease_until > clock_timestamp()),
					max(lease_until) FILTER (WHERE owner = $1),
					(SELECT alive_until FROM hourglass_nodes WHERE name = $1),
					clock_timestamp()
				FROM hourglass_partitions`, v.Name).Scan(&held, &until, &alive, &now)
			if err == nil {
				if until != nil && until.Add(-cluster.DefaultLease).After(res.LastRenewal) {
					res.LastRenewal = until.Add(-cluster.DefaultLease)
				}
				if alive != nil && alive.After(res.HeartbeatEnd) {
					res.HeartbeatEnd = *alive
				}
			}
			if err == nil && held == partitions {
				res.Time = time.Since(killed)
				res.Killed, res.Held = killed, now
				if !res.LastRenewal.IsZero() {
					res.FromRenewal = now.Sub(res.LastRenewal)
				}
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
	for _, r := range c.rounds.stop() {
		if !r.Ended.Before(killed) {
			res.Rounds = append(res.Rounds, r)
		}
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
