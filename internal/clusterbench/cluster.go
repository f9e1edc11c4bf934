package clusterbench

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hourglass-go/hourglass/cluster"
	"github.com/hourglass-go/hourglass/task"
)

// Cluster is nodes of one cluster in this process, each on a pool of its
// own, with every statement they send to the database counted. Make one
// with [Start] and close it with [Cluster.Close]. Its phases (Puts, Fill,
// Lateness, Takeover) run one at a time.
type Cluster struct {
	Nodes []*cluster.Node
	pools []*pgxpool.Pool
	// admin reads the partitions' table for the takeover; its statements
	// are not counted.
	admin *pgxpool.Pool
	// links are the nodes' connections to the database, a set per node,
	// that Cut closes.
	links []*links
	stmts *statements
	// regs are the nodes' metrics registries, one a node (Lateness reads
	// their hops).
	regs []*prometheus.Registry
	// killed is the node Cut took out of the load, -1 for none.
	killed int
	// straggle is how long a due stream waits for its tasks after the
	// last is due or put (default: straggle); beforePut, if set, runs
	// before each put of a stream. Both for tests.
	straggle  time.Duration
	beforePut func()
	// SampleWaits has Lateness sample what the server's backends wait on
	// (Lateness.Waits). Set it before Lateness.
	SampleWaits bool
	// TraceTo, if set, is a file to which Lateness writes the Go
	// runtime's execution trace of the seconds around the stream's first
	// stall (a flight recorder runs over the stream; see recorder). Set
	// it before Lateness.
	TraceTo string
	// rec is that recorder while a stream runs Lateness; nil otherwise.
	rec *recorder
	// srv reads the server's CPU time (snap).
	srv serverCPU
	// KillAt is how far into its due stream Takeover kills the victim;
	// default a second. Set it before Takeover.
	KillAt time.Duration
	// rounds keeps the nodes' lease rounds that took partitions over,
	// for Takeover (their log lines, through roundLog).
	rounds *rounds
}

// dbTimeout is the bench's nodes' database timeout (cluster.Options.
// DBTimeout), longer than the default of 5 s. A reserve cut short by the
// timeout after its statement committed leaves its tasks leased to no one
// until their TTR (60 s): the node answered "unreachable", which promises
// nothing. On a machine loaded enough that a reserve waits 5 s (the
// race detector, CPU hogs beside), that turned 100 tasks at a time into
// tasks "not delivered" by a due stream, a measure of the timeout rather
// than of delivery.
const dbTimeout = 30 * time.Second

// Start opens nodes nodes (named bench-0, bench-1, ...) on the database
// at url, with pools sized for clients concurrent callers in all.
func Start(ctx context.Context, url string, nodes, clients int, log *slog.Logger) (*Cluster, error) {
	c := &Cluster{stmts: &statements{}, killed: -1, straggle: straggle, rounds: &rounds{}}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = slog.New(&roundLog{next: log.Handler(), rec: c.rounds})
	admin, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("hourglass: clusterbench: %w", err)
	}
	c.admin = admin
	for i := range nodes {
		pc, err := pgxpool.ParseConfig(url)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("hourglass: clusterbench: %w", err)
		}
		pc.MaxConns = int32(max(4, clients/nodes+4))
		// Six connections open and warm from the start, as `hourglass
		// serve` keeps them (postgresPoolMinConns, cmd/hourglass): a pool
		// that opens each one as the stream's first load asks for it
		// makes its callers wait for the opening and the warm-up.
		pc.MinConns = min(6, pc.MaxConns)
		pc.ConnConfig.Tracer = c.stmts
		// Each node's backends carry its name, so that what they wait on
		// (Lateness.Waits, stalls) is told node by node.
		pc.ConnConfig.RuntimeParams["application_name"] = fmt.Sprintf("bench-%d", i)
		cluster.ConfigurePool(pc)
		l := &links{dial: pc.ConnConfig.DialFunc, conns: map[net.Conn]bool{}}
		pc.ConnConfig.DialFunc = l.Dial
		c.links = append(c.links, l)
		pool, err := pgxpool.NewWithConfig(ctx, pc)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("hourglass: clusterbench: %w", err)
		}
		c.pools = append(c.pools, pool)
		reg := prometheus.NewRegistry()
		c.regs = append(c.regs, reg)
		n, err := cluster.Open(ctx, pool, cluster.Options{Node: fmt.Sprintf("bench-%d", i), Logger: log, DBTimeout: dbTimeout, Registerer: reg})
		if err != nil {
			c.Close()
			return nil, err
		}
		c.Nodes = append(c.Nodes, n)
	}
	return c, nil
}

// Close closes the nodes and their pools.
func (c *Cluster) Close() {
	for _, n := range c.Nodes {
		n.Close()
	}
	for _, p := range c.pools {
		p.Close() // again, for the one Takeover closed: a no-op
	}
	c.admin.Close()
}

// Statements returns how many statements the nodes have sent so far:
// every query, exec and statement of a pipelined batch, transaction
// control and LISTEN included.
func (c *Cluster) Statements() int64 { return c.stmts.n.Load() }

// statements counts statements as a pgx tracer.
type statements struct{ n atomic.Int64 }

func (s *statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	s.n.Add(1)
	return ctx
}
func (s *statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (s *statements) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (s *statements) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) { s.n.Add(1) }
func (s *statements) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// live returns the nodes not cut off by Takeover.
func (c *Cluster) live() []*cluster.Node {
	var out []*cluster.Node
	for i, n := range c.Nodes {
		if i != c.killed {
			out = append(out, n)
		}
	}
	return out
}

// Puts puts tasks into queue for d from clients concurrent callers, each
// on node i%nodes, per tasks a call (one put, or a batch), each due in an
// hour, and returns the durable puts per second.
func (c *Cluster) Puts(ctx context.Context, queue string, clients, per int, d time.Duration) (float64, error) {
	nodes := c.live()
	var done atomic.Int64
	var firstErr atomic.Value
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	start := time.Now()
	for k := range clients {
		n := nodes[k%len(nodes)]
		wg.Go(func() {
			reqs := make([]task.PutRequest, per)
			for time.Now().Before(end) {
				for i := range reqs {
					reqs[i] = task.PutRequest{Payload: []byte(`{"bench":true}`), Delay: time.Hour}
				}
				for _, r := range n.PutBatch(ctx, queue, reqs) {
					if r.Err != nil {
						firstErr.CompareAndSwap(nil, r.Err)
						return
					}
				}
				done.Add(int64(per))
			}
		})
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return 0, err
	}
	return float64(done.Load()) / time.Since(start).Seconds(), nil
}

// Fill puts pending tasks into queue a day ahead, in batches of 1000,
// a putter per node, and returns the tasks put per second.
func (c *Cluster) Fill(ctx context.Context, queue string, pending int) (float64, error) {
	nodes := c.live()
	var wg sync.WaitGroup
	var firstErr atomic.Value
	start := time.Now()
	for i, n := range nodes {
		wg.Go(func() {
			for k := i * 1000; k < pending; k += 1000 * len(nodes) {
				reqs := make([]task.PutRequest, min(1000, pending-k))
				for i := range reqs {
					reqs[i] = task.PutRequest{Delay: 24 * time.Hour}
				}
				for _, r := range n.PutBatch(ctx, queue, reqs) {
					if r.Err != nil {
						firstErr.CompareAndSwap(nil, r.Err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return 0, err
	}
	return float64(pending) / time.Since(start).Seconds(), nil
}
