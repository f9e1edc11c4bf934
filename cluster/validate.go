package cluster

import (
	"time"

	"github.com/hourglass-go/hourglass/broker"
)

// The limits and their messages are package broker's (validate.go), so
// that a client cannot tell a node from a broker by its answers.

// checkQueue checks a queue (or schedule) name as package broker does.
func checkQueue(name string) error { return broker.CheckQueue(name) }

// checkID checks a task id as package broker does.
func checkID(id string) error { return broker.CheckID(id) }

// timing is when a put's task is due: at an instant (at), or delay after
// the database's clock reads at the insert.
type timing struct {
	hasAt bool
	at    int64 // Unix ns
	delay int64 // ns
}

// checkPut checks r against the limits, as broker.Broker.Put does, and
// returns when the task is due.
func (n *Node) checkPut(r *broker.PutRequest, now time.Time) (timing, error) {
	due, err := broker.CheckPut(r, now, n.opts.MaxDelay, n.opts.MaxPayload)
	if err != nil {
		return timing{}, err
	}
	if !r.At.IsZero() {
		return timing{hasAt: true, at: due}, nil
	}
	return timing{delay: int64(r.Delay)}, nil
}
