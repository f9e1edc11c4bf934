package cluster

import (
	"fmt"
	"time"

	"github.com/hourglass-go/hourglass/broker"
)

// The limits and their messages are package broker's (validate.go), so
// that a client cannot tell a node from a broker by its answers.

// checkQueue checks a queue (or schedule) name: 1 to 200 bytes of
// [A-Za-z0-9._-].
func checkQueue(name string) error {
	if len(name) == 0 || len(name) > broker.MaxNameLen {
		return fmt.Errorf("%w: queue name must be 1 to %d characters", broker.ErrInvalid, broker.MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: queue name %q: only letters, digits, '.', '_' and '-'", broker.ErrInvalid, name)
		}
	}
	return nil
}

// checkID checks a task id: 1 to 200 printable ASCII bytes, no '/' or
// space.
func checkID(id string) error {
	if len(id) == 0 || len(id) > broker.MaxNameLen {
		return fmt.Errorf("%w: task id must be 1 to %d characters", broker.ErrInvalid, broker.MaxNameLen)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c > '~' || c == '/' {
			return fmt.Errorf("%w: task id %q: printable ASCII only, no '/' or space", broker.ErrInvalid, id)
		}
	}
	return nil
}

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
	if r.ID != "" {
		if err := checkID(r.ID); err != nil {
			return timing{}, err
		}
	}
	if len(r.Payload) > n.opts.MaxPayload {
		return timing{}, fmt.Errorf("%w: %d bytes, over the limit of %d", broker.ErrTooLarge, len(r.Payload), n.opts.MaxPayload)
	}
	if r.Delay != 0 && !r.At.IsZero() {
		return timing{}, fmt.Errorf("%w: give delay or at, not both", broker.ErrInvalid)
	}
	if r.Delay < 0 {
		return timing{}, fmt.Errorf("%w: negative delay %s", broker.ErrInvalid, r.Delay)
	}
	if r.Delay > n.opts.MaxDelay {
		return timing{}, fmt.Errorf("%w: delay %s over the limit of %s", broker.ErrInvalid, r.Delay, n.opts.MaxDelay)
	}
	if r.TTR < 0 {
		return timing{}, fmt.Errorf("%w: negative ttr %s", broker.ErrInvalid, r.TTR)
	}
	if r.TTR != 0 && r.TTR < time.Millisecond {
		return timing{}, fmt.Errorf("%w: ttr %s under 1ms", broker.ErrInvalid, r.TTR)
	}
	if r.MaxAttempts < 0 || int64(r.MaxAttempts) > int64(^uint32(0)) {
		return timing{}, fmt.Errorf("%w: max_attempts %d out of range", broker.ErrInvalid, r.MaxAttempts)
	}
	if !r.At.IsZero() {
		if r.At.Sub(now) > n.opts.MaxDelay {
			return timing{}, fmt.Errorf("%w: at %s is further than %s away", broker.ErrInvalid, r.At.UTC().Format(time.RFC3339Nano), n.opts.MaxDelay)
		}
		if y := r.At.Year(); y < 1970 || y > 2262 {
			return timing{}, fmt.Errorf("%w: at %s out of range", broker.ErrInvalid, r.At.UTC().Format(time.RFC3339Nano))
		}
		return timing{hasAt: true, at: r.At.UnixNano()}, nil
	}
	return timing{delay: int64(r.Delay)}, nil
}
