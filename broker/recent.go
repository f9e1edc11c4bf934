package broker

import (
	"time"

	"github.com/hourglass-go/hourglass/store"
)

// Records of tasks about to be delivered, kept in memory so that reserving
// them reads nothing from the store.
//
// A reserve must hand out each task's record and payload. Those of a task
// whose put is still in a group being committed come from the overlay; the
// others were read from the store, two point reads a task, about a sixth
// of the server's CPU per reserve→delete round trip. Yet most tasks are
// put ready or due within seconds, and are reserved soon after: their
// records were in memory a moment before. recent keeps them, once their
// group is committed, while they are due within recentHorizon and the
// records kept fit in a byte budget; a task put an hour ahead is not kept
// (it would only take the room of those due sooner), nor is anything once
// the budget is spent until room is freed. Memory per waiting task does
// not grow: the budget is a fixed amount, whatever the number of tasks.
//
// Worked example, budget 1 KiB, horizon 10 s, records of 300 bytes: three
// tasks put ready are kept as their groups commit (900 bytes); a fourth is
// not (1,200 > 1,024); a task put 1 h ahead is not. A reserve takes the
// first: its record comes from recent and leaves it (300 bytes freed); the
// lease's update of the record is not kept (a reserved task is not taken
// again until a write makes it ready, and that write's record is then the
// one kept, if it carries the payload). The fourth task is read from the
// store when reserved, as before.
//
// Coherence: every write of a task goes through writeTask into the
// overlay, and the overlay is read before recent; when the group that
// wrote it is committed, finish gives the write to recent (keep, update
// or forget), so recent holds, for a job, the record the store holds, or
// nothing.

// recentHorizon: a committed record is kept only if its task is due
// within this long.
const recentHorizon = 10 * time.Second

// DefaultRecentBytes is the default budget of records kept for reserves
// (Config.RecentBytes).
const DefaultRecentBytes = 16 << 20

// recentOverhead approximates the bytes a kept record costs beyond its
// payload, queue and id: the map entry and the store.Task.
const recentOverhead = 200

// recent holds committed records (payload included) of tasks due soon.
// Guarded by Broker.mu; every method is O(1).
type recent struct {
	budget, used int64
	m            map[uint64]store.Task
	// hits and misses count the tasks reserves took in memory and those
	// they read from the store (count).
	hits, misses uint64
}

// recentBudget is the budget for Config.RecentBytes n.
func recentBudget(n int64) int64 {
	switch {
	case n == 0:
		return DefaultRecentBytes
	case n < 0:
		return 0
	}
	return n
}

func newRecent(budget int64) recent {
	return recent{budget: budget, m: make(map[uint64]store.Task)}
}

// size is what r counts for t.
func recentSize(t *store.Task) int64 {
	return int64(len(t.Payload) + len(t.Queue) + len(t.ID) + len(t.LastError) + recentOverhead)
}

// committed gives r a write of job whose group is committed: t its record
// as the overlay held it, gone for a delete. now is Unix ns.
func (r *recent) committed(job uint64, t *store.Task, gone bool, now int64) {
	old, had := r.m[job]
	switch {
	case gone || t.State != store.Waiting:
		// Deleted, reserved or dead: not to be taken by a reserve.
	case t.Payload == nil && had:
		// An update of the record: the payload never changes.
		nt := *t
		nt.Payload = old.Payload
		r.set(job, old, nt)
		return
	case t.Payload != nil && t.Due <= now+int64(recentHorizon):
		r.set(job, old, *t)
		return
	}
	if had {
		r.drop(job, old)
	}
}

// set keeps nt for job in place of old (zero if none), if the budget
// allows; else it forgets job.
func (r *recent) set(job uint64, old, nt store.Task) {
	had := old.JobID != 0
	grow := recentSize(&nt)
	if had {
		grow -= recentSize(&old)
	}
	if r.used+grow > r.budget {
		if had {
			r.drop(job, old)
		}
		return
	}
	nt.JobID = job
	r.m[job] = nt
	r.used += grow
}

func (r *recent) drop(job uint64, old store.Task) {
	delete(r.m, job)
	r.used -= recentSize(&old)
}

// take returns job's kept record and forgets it: a reserve hands it out.
func (r *recent) take(job uint64) (store.Task, bool) {
	t, ok := r.m[job]
	if !ok {
		return store.Task{}, false
	}
	r.drop(job, t)
	return t, true
}

// count counts a task taken by a reserve: in memory (its record kept, or
// still in the overlay) or to be read from the store.
func (r *recent) count(inMemory bool) {
	if inMemory {
		r.hits++
	} else {
		r.misses++
	}
}

// payload returns job's payload if r keeps its record.
func (r *recent) payload(job uint64) ([]byte, bool) {
	t, ok := r.m[job]
	return t.Payload, ok
}
