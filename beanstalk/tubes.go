package beanstalk

import (
	"context"
	"sort"
	"sync"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// defaultTube is the tube every connection uses and watches at first. It
// always exists.
const defaultTube = "default"

// tubes is what the server knows of tubes beyond the broker's queues:
// which connections use, watch and wait on each, and the per-tube
// counters the broker does not keep, while a connection refers to the
// tube. A tube exists, as in beanstalkd, while a connection uses or
// watches it or it holds a job; "default" always does.
//
// tubes is safe for concurrent use.
type tubes struct {
	mu sync.Mutex
	// m holds an entry per tube a connection refers to, and "default".
	// Guarded by mu.
	m map[string]*tubeCounts
}

// tubeCounts is one tube's entry in [tubes].
type tubeCounts struct {
	using, watching, waiting int
	// deletes counts delete commands of the tube's jobs (cmd-delete);
	// puts the jobs put and pauses the pause-tube commands over this
	// protocol, for total-jobs and cmd-pause-tube once the broker's
	// queue has gone (a queue that holds nothing is dropped, its counts
	// with it). Counted only while the entry exists: while a
	// connection refers to the tube.
	deletes, puts, pauses uint64
	// pause is the delay of the last pause-tube, in seconds.
	pause uint32
}

func newTubes() *tubes {
	return &tubes{m: map[string]*tubeCounts{defaultTube: {}}}
}

// entry returns name's entry, making it. t.mu is held.
func (t *tubes) entry(name string) *tubeCounts {
	e := t.m[name]
	if e == nil {
		e = &tubeCounts{}
		t.m[name] = e
	}
	return e
}

// prune drops name's entry, its counters with it, once no connection
// uses, watches or waits on the tube: so the server keeps nothing for a
// tube no connection refers to. t.mu is held.
func (t *tubes) prune(name string) {
	if e := t.m[name]; e != nil && name != defaultTube && e.using+e.watching+e.waiting == 0 {
		delete(t.m, name)
	}
}

// use moves one connection's use from old to new ("" for none).
func (t *tubes) use(old, new string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if new != "" {
		t.entry(new).using++
	}
	if old != "" {
		t.entry(old).using--
		t.prune(old)
	}
}

// watch adds d (1 or -1) to the connections watching name.
func (t *tubes) watch(name string, d int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.entry(name).watching += d
	t.prune(name)
}

// wait adds d to the connections waiting in a reserve on each of names.
func (t *tubes) wait(names []string, d int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, n := range names {
		t.entry(n).waiting += d
		t.prune(n)
	}
}

// deleted counts one delete of a job of name, if a connection refers
// to the tube.
func (t *tubes) deleted(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.m[name]; e != nil {
		e.deletes++
	}
}

// paused records a pause-tube of name for secs seconds.
func (t *tubes) paused(name string, secs uint32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.m[name]; e != nil {
		e.pause = secs
		e.pauses++
	}
}

// put counts k jobs put into name, if a connection refers to the tube.
func (t *tubes) put(name string, k int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.m[name]; e != nil {
		e.puts += uint64(k)
	}
}

// counts returns name's entry (zeros for none).
func (t *tubes) counts(name string) tubeCounts {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.m[name]; e != nil {
		return *e
	}
	return tubeCounts{}
}

// existing returns the tubes that exist, by name, with the broker's
// statistics of their queues (zeros for a tube whose queue has never had
// a task): those connections refer to, "default", and those whose queue
// holds a job. Queues with no tube name are left out. It takes
// O(queues + tubes).
func (t *tubes) existing(b service.Service) map[string]task.QueueStats {
	out := make(map[string]task.QueueStats)
	qs, _ := b.Queues(context.Background()) // on an error: the tubes known here
	for _, q := range qs {
		if q.Delayed+q.Ready+q.Reserved+q.Dead == 0 {
			continue
		}
		if name, ok := tubeName(q.Name); ok {
			out[name] = q
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for name, e := range t.m {
		if _, ok := out[name]; !ok && (name == defaultTube || e.using+e.watching+e.waiting > 0) {
			qn, _ := queueName(name)
			out[name] = task.QueueStats{Name: qn}
		}
	}
	return out
}

// exists reports whether the tube name exists (see existing): a tube
// connections refer to, "default", or one whose queue holds a job. It
// asks the broker of that one queue only (Broker.Queue).
func (t *tubes) exists(b service.Service, name string) bool {
	t.mu.Lock()
	e := t.m[name]
	referred := name == defaultTube || e != nil && e.using+e.watching+e.waiting > 0
	t.mu.Unlock()
	if referred {
		return true
	}
	q, ok := queueName(name)
	if !ok {
		return false
	}
	d, err := b.Queue(q)
	return err == nil && d.Delayed+d.Ready+d.Reserved+d.Dead > 0
}

// sortedNames returns m's keys in order.
func sortedNames(m map[string]task.QueueStats) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
