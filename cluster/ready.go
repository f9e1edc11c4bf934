package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Readiness: a node that cannot reach its database cannot serve, though
// its process is fine. Its heartbeat, which the lease loop (and the
// keeper of a slow round) writes every third of a lease, says whether it
// can: once none went through for a whole lease, the node's own
// heartbeat and leases have run out in the database, the other nodes take
// its partitions over, and Ready reports the database unreachable
// (/readyz answers 503, so that a load balancer sends its traffic
// elsewhere) until a heartbeat goes through again. While it fails, the
// lease loop tries again at least every second (leaseLoop), so the node
// is ready again about a second after the database is back. So Ready
// fails from one lease to one lease and a tick (the database timeout or
// the lease, the sooner) after the database was lost: within two leases.

// reach records when the node's heartbeat last went through, and the
// last failure since. The zero reach has never reached the database. It
// is safe for concurrent use.
type reach struct {
	mu sync.Mutex
	// last is when the heartbeat last went through. Guarded by mu.
	last time.Time
	// err is the last failure of the lease loop since. Guarded by mu.
	err error
}

// ok records a heartbeat that went through. O(1).
func (r *reach) ok() {
	r.mu.Lock()
	r.last, r.err = time.Now(), nil
	r.mu.Unlock()
}

// failed records a failure of the lease loop. O(1).
func (r *reach) failed(err error) {
	r.mu.Lock()
	r.err = err
	r.mu.Unlock()
}

// check returns an unreachableError once no heartbeat went through for
// lease, nil before. O(1).
func (r *reach) check(lease time.Duration) error {
	r.mu.Lock()
	last, err := r.last, r.err
	r.mu.Unlock()
	since := time.Since(last)
	if since <= lease {
		return nil
	}
	msg := fmt.Sprintf("no heartbeat for %v", since.Round(time.Millisecond))
	if err != nil {
		msg += ": " + reason(err)
	}
	return &unreachableError{msg}
}

// reason says why a call to the database failed, for a client or a
// probe: without what pgx's errors quote of the connection (host, port,
// user, database), which /readyz, open to anyone, should not tell.
func reason(err error) string {
	var (
		ue *unreachableError
		ce *pgconn.ConnectError
		pe *pgconn.PgError
		oe *net.OpError
	)
	why := ""
	switch {
	case errors.As(err, &ue):
		return ue.msg
	case errors.As(err, &pe):
		why = pe.Message + " (SQLSTATE " + pe.Code + ")"
	case errors.Is(err, context.DeadlineExceeded):
		why = "no answer in time"
	case errors.As(err, &oe) && oe.Err != nil:
		why = oe.Err.Error() // e.g. "connect: connection refused"
	case errors.As(err, &ce):
	default:
		why = strings.TrimPrefix(err.Error(), "hourglass: ")
	}
	if errors.As(err, &ce) {
		if why == "" {
			return "cannot connect"
		}
		return "cannot connect: " + why
	}
	return why
}

// Ready reports whether the node can serve: Err's error, an error saying
// that the database is unreachable once the node's heartbeat has not
// gone through for a lease (see above), nil while it serves. O(1);
// safe for concurrent use (service.Readiness).
func (n *Node) Ready() error {
	if err := n.Err(); err != nil {
		return err
	}
	return n.members.reach.check(n.opts.Lease)
}
