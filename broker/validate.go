package broker

import (
	"fmt"
	"time"
)

// Limits on names a client chooses.
const (
	// MaxNameLen bounds queue names, task ids and schedule names.
	MaxNameLen = 200
	// MaxBatch bounds the tasks of one PutBatch.
	MaxBatch = 1000
	// MaxReserve bounds the tasks one Reserve hands out.
	MaxReserve = 1000
	// MaxWait bounds how long one Reserve waits.
	MaxWait = 5 * time.Minute
)

// CheckQueue returns an error wrapping ErrInvalid, saying what is wrong,
// if name is not a valid queue name: 1 to 200 bytes of [A-Za-z0-9._-],
// not "." or "..". Adapters use it to refuse a request as a whole.
func CheckQueue(name string) error { return checkQueue(name) }

// checkQueue checks a queue (or schedule) name: 1 to 200 bytes of
// [A-Za-z0-9._-].
func checkQueue(name string) error {
	if len(name) == 0 || len(name) > MaxNameLen {
		return fmt.Errorf("%w: queue name must be 1 to %d characters", ErrInvalid, MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: queue name %q: only letters, digits, '.', '_' and '-'", ErrInvalid, name)
		}
	}
	if name == "." || name == ".." {
		return fmt.Errorf("%w: queue name %q cannot be a path segment", ErrInvalid, name)
	}
	return nil
}

// checkID checks a task id: 1 to 200 printable ASCII bytes, no '/' or
// space.
func checkID(id string) error {
	if len(id) == 0 || len(id) > MaxNameLen {
		return fmt.Errorf("%w: task id must be 1 to %d characters", ErrInvalid, MaxNameLen)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c > '~' || c == '/' {
			return fmt.Errorf("%w: task id %q: printable ASCII only, no '/' or space", ErrInvalid, id)
		}
	}
	if id == "." || id == ".." {
		return fmt.Errorf("%w: task id %q cannot be a path segment", ErrInvalid, id)
	}
	return nil
}

// checkPut checks r against the broker's limits and returns the task's
// due time (Unix ns) for a put at now.
func (b *Broker) checkPut(r *PutRequest, now time.Time) (int64, error) {
	return CheckPut(r, now, b.cfg.MaxDelay, b.cfg.MaxPayload)
}

// CheckID returns an error wrapping ErrInvalid, saying what is wrong, if
// id is not a valid task id: 1 to 200 printable ASCII bytes, no '/' or
// space, not "." or "..".
func CheckID(id string) error { return checkID(id) }

// CheckPut checks r against the limits maxDelay and maxPayload as Put does
// and returns the task's due time (Unix ns) for a put at now. Errors wrap
// ErrInvalid or ErrTooLarge and say what is wrong. Other implementations
// of the API (package cluster) use it, so that a client cannot tell them
// from a Broker by their answers.
func CheckPut(r *PutRequest, now time.Time, maxDelay time.Duration, maxPayload int) (int64, error) {
	if r.ID != "" {
		if err := checkID(r.ID); err != nil {
			return 0, err
		}
	}
	if len(r.Payload) > maxPayload {
		return 0, fmt.Errorf("%w: %d bytes, over the limit of %d", ErrTooLarge, len(r.Payload), maxPayload)
	}
	if r.Delay != 0 && !r.At.IsZero() {
		return 0, fmt.Errorf("%w: give delay or at, not both", ErrInvalid)
	}
	if r.Delay < 0 {
		return 0, fmt.Errorf("%w: negative delay %s", ErrInvalid, r.Delay)
	}
	if r.Delay > maxDelay {
		return 0, fmt.Errorf("%w: delay %s over the limit of %s", ErrInvalid, r.Delay, maxDelay)
	}
	if r.TTR < 0 {
		return 0, fmt.Errorf("%w: negative ttr %s", ErrInvalid, r.TTR)
	}
	if r.TTR != 0 && r.TTR < time.Millisecond {
		return 0, fmt.Errorf("%w: ttr %s under 1ms", ErrInvalid, r.TTR)
	}
	if r.MaxAttempts < 0 || int64(r.MaxAttempts) > int64(^uint32(0)) {
		return 0, fmt.Errorf("%w: max_attempts %d out of range", ErrInvalid, r.MaxAttempts)
	}
	if !r.At.IsZero() {
		if r.At.Sub(now) > maxDelay {
			return 0, fmt.Errorf("%w: at %s is further than %s away", ErrInvalid, r.At.UTC().Format(time.RFC3339Nano), maxDelay)
		}
		if y := r.At.Year(); y < 1970 || y > 2262 {
			return 0, fmt.Errorf("%w: at %s out of range", ErrInvalid, r.At.UTC().Format(time.RFC3339Nano))
		}
		return r.At.UnixNano(), nil
	}
	return now.Add(r.Delay).UnixNano(), nil
}

var errBatch = fmt.Errorf("%w: over %d tasks in one batch", ErrInvalid, MaxBatch)
