package broker

import (
	"sync"
	"time"

	"github.com/hourglass-go/hourglass/store"
	"github.com/hourglass-go/hourglass/task"
)

// Records of tasks about to be delivered, kept in memory so that reserving
// them reads nothing from the store.
//
// A reserve must hand out each task's record and payload. Those of a task
// whose put is still in a group being committed come from the overlay; the
// others would be read from the store, two point reads a task, a large
// share of the server's CPU per reserve→delete round trip. Yet most tasks are
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
// Coherence: every write of a task goes through writeTaskLocked into the
// overlay, and the overlay is read before recent; when the group that
// wrote it is committed, finish gives the write to recent (keep, update
// or forget), so recent holds, for a job, the record the store holds, or
// nothing.

// Read ahead: the records of a backlog put long before (beyond the budget
// when it was put, or put before a restart) are read from the store when
// reserved, each with two point reads, which cost a tenth of the
// server's CPU with a worker taking tasks from a million ready ones. Such
// tasks are mostly handed out in job id order (put order, when they share
// a priority and were put ready), so when a reserve misses for a job
// above the last miss, or takes a record read ahead near the end of what
// was read, recent reads ahead: it picks the next aheadTasks ready tasks
// in job id order that it does not keep (under b.mu, scanning at most
// aheadScan job ids) and reads their records on a goroutine of its own
// (readAhead), through the store's Tasks when it has it (pebblestore: one
// iterator stepping from key to key, far cheaper than a Get each), then
// keeps those still ready and unchanged, within half the budget: what a
// read ahead takes in a load it does not fit (tasks handed out in another
// order) leaves the other half to the tasks put. One read ahead runs at
// a time.
//
// Coherence with the store: a write committed while the records are read
// may have come after the read; committed notes every job a group
// commits while a read ahead runs (changed), and the read ahead keeps no
// record of a job noted, nor of one the overlay holds (a write not yet
// committed, which may or may not have been read).

// Read ahead's sizes: aheadTasks records at a time (about 400 KB of the
// bench's 200-byte payloads), found among at most aheadScan job ids; the
// next read ahead starts when a reserve takes one of the last aheadLow
// records read.
const (
	aheadTasks = 1024
	aheadScan  = 4 * aheadTasks
	aheadLow   = aheadTasks / 2
)

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

	// readAhead, when set, reads ahead from a job id on a goroutine of
	// its own (Broker.readAhead); set by recover.
	readAhead func(from uint64)
	// fetching is set while a read ahead runs; changed then holds the
	// jobs whose writes were committed since it picked its jobs.
	fetching bool
	changed  map[uint64]struct{}
	// running counts the read ahead's goroutine, for Close to wait on.
	running sync.WaitGroup
	// ahead is the highest job id the last read ahead picked (0: none);
	// lastMiss the job of the last take that missed.
	ahead, lastMiss uint64
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
	return int64(len(t.Payload) + len(t.Queue) + len(t.ID) + len(t.LastError) + len(t.TraceParent) + len(t.TraceState) + len(t.Key) + recentOverhead)
}

// committed gives r a write of job whose group is committed: t its record
// as the overlay held it, gone for a delete. now is Unix ns.
func (r *recent) committed(job uint64, t *store.Task, gone bool, now int64) {
	if r.changed != nil {
		r.changed[job] = struct{}{}
	}
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
// A miss for a job above the last miss, or a take of one of the last
// records read ahead, starts a read ahead.
func (r *recent) take(job uint64) (store.Task, bool) {
	t, ok := r.m[job]
	if !ok {
		if job > r.lastMiss {
			r.startAhead(job + 1)
		}
		r.lastMiss = job
		return store.Task{}, false
	}
	r.drop(job, t)
	if job <= r.ahead && job+aheadLow > r.ahead {
		r.startAhead(r.ahead + 1)
	}
	return t, true
}

// startAhead starts a read ahead from job id from, unless one runs.
func (r *recent) startAhead(from uint64) {
	if r.fetching || r.readAhead == nil || r.budget == 0 {
		return
	}
	r.fetching = true
	r.running.Go(func() { r.readAhead(from) })
}

// readAhead reads into b.recent the records of the next ready tasks from
// job id from on, in job id order (see "Read ahead" above); it runs on a
// goroutine of its own, started by startAhead, with b.mu not held.
func (b *Broker) readAhead(from uint64) {
	b.mu.Lock()
	r := &b.recent
	var jobs []uint64
	end := min(from+aheadScan, b.nextJob)
	for job := from; job < end && len(jobs) < aheadTasks; job++ {
		if s, ok := b.tasks.get(job); !ok || s.state() != task.Ready {
			continue
		}
		if _, ok := r.m[job]; ok {
			continue
		}
		if _, ok := b.over.tasks[job]; ok {
			continue
		}
		jobs = append(jobs, job)
	}
	r.ahead = 0
	if len(jobs) == 0 || b.closed || b.failed != nil {
		r.fetching = false
		b.mu.Unlock()
		return
	}
	r.ahead = jobs[len(jobs)-1]
	r.changed = make(map[uint64]struct{})
	b.mu.Unlock()

	got := make([]store.Task, 0, len(jobs))
	if tr, ok := b.st.(tasksReader); ok {
		_ = tr.Tasks(jobs, func(t store.Task) bool { // a record not read is read when reserved
			got = append(got, t)
			return true
		})
	} else {
		for _, job := range jobs {
			if t, err := b.st.Task(job); err == nil {
				got = append(got, t)
			}
		}
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	for i := range got {
		t := &got[i]
		job := t.JobID
		if _, ok := r.changed[job]; ok || t.State != store.Waiting {
			continue
		}
		if _, ok := b.over.tasks[job]; ok {
			continue
		}
		if s, ok := b.tasks.get(job); !ok || s.state() != task.Ready {
			continue
		}
		if _, ok := r.m[job]; ok {
			continue
		}
		if r.used+recentSize(t) > r.budget/2 {
			break
		}
		r.set(job, store.Task{}, *t)
	}
	r.fetching, r.changed = false, nil
}

// tasksReader is a store that reads many tasks at once more cheaply than
// a Task each (pebblestore.Store.Tasks).
type tasksReader interface {
	Tasks(jobs []uint64, f func(store.Task) bool) error
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
