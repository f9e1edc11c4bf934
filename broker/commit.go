package broker

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hourglass-go/hourglass/store"
	"github.com/hourglass-go/hourglass/task"
)

// group is one group commit: the writes of every operation sequenced while
// the group was open, committed to the store with one [store.Store.Commit]
// (one fsync). Operations wait on done before they answer, so an answer
// is never sent for a write that a crash could lose.
//
// The broker applies an operation to its memory at once, under b.mu, and
// appends the operation's writes to the open group; the committer takes
// the open group, opens the next, and commits. While one group commits
// the next one fills, so with many requests waiting each fsync carries
// many of them, and with one request at a time each fsync carries one.
// Over a [store.Pipeliner] a group is applied while the one before it
// syncs only when it is large (see hold). Groups commit in the order they
// were opened.
type group struct {
	seq   uint64 // groups are opened, and commit, in seq order
	batch store.Batch
	tasks int // task writes, for the tasks-per-commit metric
	// wrote lists the overlay entries the group wrote (a job or a key
	// may be listed more than once), so that finish visits only these:
	// a scan of the whole overlay, whose maps keep the size of their
	// largest load (a bulk put's), cost a tenth of the server's CPU under
	// a worker's reserves and acks. Guarded by Broker.mu.
	wrote overlayKeys
	done  chan struct{} // closed once committed (or failed)
	err   error         // set before done is closed
}

// overlayKeys are the keys of the overlay's entries a group wrote.
type overlayKeys struct {
	jobs    []uint64
	index   []qid
	deduped []qid
}

func newGroup(seq uint64) *group { return &group{seq: seq, done: make(chan struct{})} }

// wait blocks until g is committed and returns its error.
func (g *group) wait() error {
	<-g.done
	return g.err
}

// overlay holds what the open and committing groups write, for reads that
// must see an operation's effect before its group is committed: the store
// shows only committed groups. An entry is dropped once the group that
// wrote it last is committed. Guarded by Broker.mu.
type overlay struct {
	tasks   map[uint64]pendingTask // job id → latest record (deleted: gone)
	index   map[qid]pendingIndex   // (queue, id) → job id (0: deleted)
	deduped map[qid]pendingDeduped // (queue, id) → finished-id record (dedupe.go)
}

type qid struct{ queue, id string }

type pendingTask struct {
	g    *group
	gone bool
	t    store.Task
}

type pendingIndex struct {
	g   *group
	job uint64
}

type pendingDeduped struct {
	g *group
	d store.Deduped
}

// writeTaskLocked records t as written by the open group (put, update or
// delete). b.mu must be held.
func (b *Broker) writeTaskLocked(kind store.OpKind, t store.Task) {
	g := b.open
	switch kind {
	case store.PutTask:
		g.batch.Put(t)
		b.overIndexLocked(g, qid{t.Queue, t.ID}, t.JobID)
		b.overTaskLocked(g, t.JobID, pendingTask{g: g, t: t})
	case store.UpdateTask:
		g.batch.Update(t)
		if p, ok := b.over.tasks[t.JobID]; ok && t.Payload == nil {
			t.Payload = p.t.Payload
		}
		b.overTaskLocked(g, t.JobID, pendingTask{g: g, t: t})
	case store.DeleteTask:
		g.batch.Delete(t)
		b.overIndexLocked(g, qid{t.Queue, t.ID}, 0)
		b.overTaskLocked(g, t.JobID, pendingTask{g: g, gone: true})
	}
	g.tasks++
	b.last = g
	b.kickLocked()
}

// overTaskLocked shows p, g's write of job, in the overlay. b.mu must be
// held.
func (b *Broker) overTaskLocked(g *group, job uint64, p pendingTask) {
	b.over.tasks[job] = p
	g.wrote.jobs = append(g.wrote.jobs, job)
}

// overIndexLocked shows in the overlay that g gives k to job (0: deleted).
// b.mu must be held.
func (b *Broker) overIndexLocked(g *group, k qid, job uint64) {
	b.over.index[k] = pendingIndex{g, job}
	g.wrote.index = append(g.wrote.index, k)
}

// moveTaskLocked records t, payload included, as put whole by the open
// group under its job id, moved from the queue and id old (a dead task
// moved to its dead-letter queue): the store removes the old index and list
// entries, and the overlay shows old gone at once. b.mu must be held.
func (b *Broker) moveTaskLocked(old qid, t store.Task) {
	b.writeTaskLocked(store.PutTask, t)
	if old != (qid{t.Queue, t.ID}) {
		b.overIndexLocked(b.open, old, 0)
	}
}

// writeScheduleLocked records a schedule write in the open group. b.mu must
// be held.
func (b *Broker) writeScheduleLocked(s store.Schedule, del bool) {
	g := b.open
	if del {
		g.batch.DeleteSchedule(s.Name)
	} else {
		g.batch.PutSchedule(s)
	}
	b.last = g
	b.kickLocked()
}

// kickLocked tells the committer that the open group has writes. b.mu must
// be held.
func (b *Broker) kickLocked() {
	select {
	case b.work <- struct{}{}:
	default:
	}
}

// barrierLocked returns the newest group with writes, which an operation
// that wrote nothing waits on before answering from memory: everything it
// saw is then durable. b.mu must be held.
func (b *Broker) barrierLocked() *group { return b.last }

// recordLocked returns the current record of job: from the overlay when a
// group not yet committed wrote it, else from the store (payload included).
// b.mu must be held.
func (b *Broker) recordLocked(job uint64) (store.Task, error) {
	if p, ok := b.over.tasks[job]; ok {
		if p.gone {
			return store.Task{}, task.ErrNotFound
		}
		if p.t.Payload == nil {
			// An update over a committed put: the payload is in the store.
			if pl, ok := b.recent.payload(job); ok {
				p.t.Payload = pl
				return p.t, nil
			}
			st, err := b.st.Task(job)
			if err != nil {
				return store.Task{}, b.storeErr(err)
			}
			p.t.Payload = st.Payload
		}
		return p.t, nil
	}
	if t, ok := b.recent.m[job]; ok {
		return t, nil
	}
	t, err := b.st.Task(job)
	if err != nil {
		return t, b.storeErr(err) // t: the record, if only the payload is damaged
	}
	return t, nil
}

// metaLocked returns the current record of job, whose Payload may be nil:
// from the overlay, the records of reserved tasks, or the store. A record
// whose payload is damaged in the store is returned without it, so that
// the task can still be deleted. b.mu must be held.
func (b *Broker) metaLocked(job uint64) (store.Task, error) {
	if p, ok := b.over.tasks[job]; ok {
		if p.gone {
			return store.Task{}, task.ErrNotFound
		}
		return p.t, nil
	}
	if t, ok := b.leased[job]; ok {
		return t, nil
	}
	t, err := b.recordLocked(job)
	if err != nil && t.JobID != 0 && errors.Is(err, store.ErrCorrupt) {
		t.Payload = nil
		return t, nil
	}
	return t, err
}

// lookupLocked returns the job id of the live task id in queue. b.mu must
// be held.
func (b *Broker) lookupLocked(queue, id string) (uint64, error) {
	if p, ok := b.over.index[qid{queue, id}]; ok {
		if p.job == 0 {
			return 0, task.ErrNotFound
		}
		return p.job, nil
	}
	job, err := b.st.Lookup(queue, id)
	if err != nil {
		return 0, b.storeErr(err)
	}
	return job, nil
}

// storeErr maps the store's not-found to the broker's and keeps others.
func (b *Broker) storeErr(err error) error {
	if err == store.ErrNotFound {
		return task.ErrNotFound
	}
	return err
}

// commitLoop is the committer goroutine: it commits the open group each
// time it has writes, until Close, then commits what is left and exits.
//
// Over a [store.Pipeliner] it only applies each group and hands its wait
// to a second goroutine (syncLoop), which finishes groups in order as
// their fsyncs complete: the next group is applied while the last one
// syncs, and one fsync may cover several groups. At most pipelineDepth
// groups wait for their fsyncs at a time.
func (b *Broker) commitLoop() {
	defer close(b.committerDone)
	p, pipelined := b.st.(store.Pipeliner)
	var syncs chan syncing
	var synced chan struct{}
	var pl *pipeline
	if pipelined {
		syncs = make(chan syncing, pipelineDepth)
		synced = make(chan struct{})
		pl = &pipeline{drained: make(chan struct{}, 1)}
		go b.syncLoop(syncs, synced, pl)
		defer func() {
			close(syncs)
			<-synced
		}()
	}
	commit := func() {
		if pipelined {
			b.hold(pl)
			b.applyOpen(p, syncs, pl)
		} else {
			b.commitOpen()
		}
	}
	for {
		select {
		case <-b.work:
		case c := <-b.chores:
			commit() // the writes waiting go first
			c.fn()
			close(c.done)
			continue
		case <-b.quit:
			commit() // writes sequenced before Close
			return
		}
		commit()
	}
}

// chore is work that writes to the store outside the groups (a prune of
// the history, history.go): the committer does it between two groups, so
// that the store is written from one goroutine at a time (see
// [store.Store]), and closes done after.
type chore struct {
	fn   func()
	done chan struct{}
}

// between runs fn on the committer goroutine between two groups, after
// the open group is committed (applied, over a Pipeliner), and returns
// once fn has. ok is false, and fn is not run, when the broker shuts down
// first.
func (b *Broker) between(fn func()) (ok bool) {
	c := chore{fn: fn, done: make(chan struct{})}
	select {
	case b.chores <- c:
	case <-b.quit:
		return false
	}
	<-c.done
	return true
}

// pipelineDepth bounds the groups applied and waiting for their fsyncs.
const pipelineDepth = 8

// pipeline is what the committer and syncLoop share over a Pipeliner.
type pipeline struct {
	syncing atomic.Int32  // groups applied, not yet finished
	drained chan struct{} // buffered 1: syncing fell to 0
}

// bigGroup is the number of task writes from which the open group is
// applied at once, while groups before it still wait for their fsync
// (see hold).
const bigGroup = 256

// hold waits, before the open group is applied, while groups applied
// before it wait for their fsync, unless it has bigGroup task writes or
// more. Runs on the committer.
//
// Pebble runs one fsync at a time, and one covers every batch applied
// before it began, so applying a small group while another syncs does not
// make it durable sooner: it waits for the next fsync either way. Held
// instead, it gathers the writes that arrive until that fsync could begin,
// and the broker makes one group, one Pebble batch and one hand-off to
// syncLoop where it made several: fewer, larger groups, so less CPU a
// put for the same throughput (BenchmarkBroker_PutDurable and
// BenchmarkBroker_WorkedDurable measure it). A group of bigGroup writes or
// more (a batch put over HTTP) is still applied at once: its memtable
// inserts take long enough to be worth running during the fsync before.
func (b *Broker) hold(pl *pipeline) {
	for pl.syncing.Load() > 0 && b.openTasks() < bigGroup {
		select {
		case <-pl.drained:
		case <-b.work:
		}
	}
}

// openTasks returns the open group's task writes.
func (b *Broker) openTasks() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.open.tasks
}

// syncing is a group applied to a Pipeliner, waiting for its fsync.
type syncing struct {
	g     *group
	wait  func() error // nil if err is set
	err   error
	start time.Time
}

// takeOpen takes the open group if it has writes, opening the next, and
// returns it with the broker's failure, if any.
func (b *Broker) takeOpen() (*group, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	g := b.open
	if g.batch.Len() == 0 && g.batch.NextJobID == 0 {
		return nil, nil
	}
	b.open = newGroup(g.seq + 1)
	if n := len(b.spare); n > 0 {
		b.open.batch.Ops, b.spare[n-1] = b.spare[n-1], nil
		b.spare = b.spare[:n-1]
	}
	if w, ok := spareKeys.Get().(*overlayKeys); ok {
		b.open.wrote = *w
	}
	return g, b.failed
}

// Committed groups hand their batch's storage to the groups opened after
// them (Broker.spare), so that a group's writes cost no allocation once
// the broker runs: an Op is over 500 bytes, and an ack writes three (the
// attempt, the finish and the delete). Up to maxSpare of them are kept,
// of at most maxSpareOps ops each; a larger batch (a burst) is left to
// the collector. maxSpareOps is above the groups of a steady load (four
// ops a round trip with the history, with 64 clients reserving and
// acking), so that such a group reuses a spare instead of growing a
// fresh slice and leaving it to the collector
// (BenchmarkBroker_ReserveAckHistory measures the bytes a round trip).
// The spares hold at most maxSpare × maxSpareOps Ops, and only after
// such groups.
const (
	maxSpare    = pipelineDepth + 2 // the groups syncing, committing and open
	maxSpareOps = 1024
)

// spareKeys holds *overlayKeys of committed groups, emptied, for the
// groups to come; lists longer than maxSpareOps are left to the
// collector.
var spareKeys sync.Pool

// recycleLocked keeps g's batch storage for a group to come, g committed.
// b.mu must be held.
func (b *Broker) recycleLocked(g *group) {
	if ops := g.batch.Ops; cap(ops) <= maxSpareOps && len(b.spare) < maxSpare {
		b.spare = append(b.spare, ops[:0])
	}
	if w := g.wrote; cap(w.jobs) <= maxSpareOps && cap(w.index) <= maxSpareOps {
		clear(w.index) // the names are the collector's
		spareKeys.Put(&overlayKeys{jobs: w.jobs[:0], index: w.index[:0]})
	}
	g.batch.Ops, g.wrote = nil, overlayKeys{}
}

// commitOpen commits the open group, if it has writes.
func (b *Broker) commitOpen() {
	g, err := b.takeOpen()
	if g == nil {
		return
	}
	start := time.Now()
	if err == nil {
		err = b.st.Commit(&g.batch)
	}
	b.finish(g, err, start)
}

// applyOpen applies the open group, if it has writes, and queues it for
// syncLoop.
func (b *Broker) applyOpen(p store.Pipeliner, syncs chan<- syncing, pl *pipeline) {
	g, err := b.takeOpen()
	if g == nil {
		return
	}
	pl.syncing.Add(1)
	s := syncing{g: g, err: err, start: time.Now()}
	if err == nil {
		s.wait, s.err = p.Apply(&g.batch)
	}
	syncs <- s
}

// syncLoop finishes applied groups in order as their fsyncs complete.
func (b *Broker) syncLoop(syncs <-chan syncing, done chan<- struct{}, pl *pipeline) {
	defer close(done)
	for s := range syncs {
		err := s.err
		if err == nil {
			err = s.wait()
		}
		b.finish(s.g, err, s.start)
		if pl.syncing.Add(-1) == 0 {
			select {
			case pl.drained <- struct{}{}:
			default:
			}
		}
	}
}

// finish ends a group's commit: its overlay entries go (the store shows
// its writes now), a failure fails the broker, and its waiters are told.
func (b *Broker) finish(g *group, err error, start time.Time) {
	b.metrics.commit(time.Since(start), g.tasks)
	g.batch.Reset() // done with: the store keeps none of it
	b.mu.Lock()
	if err != nil && b.failed == nil {
		// Memory is ahead of the record and nothing can be promised any
		// more: every later write fails, and so do readiness and health.
		b.failed = err
		b.log.Error("hourglass: store commit failed; the broker refuses further writes until it is opened again", "err", err)
	}
	now := time.Now().UnixNano()
	// An entry g wrote that a later group wrote again stays for that
	// group; a job or key g wrote twice is dropped at its first visit.
	for _, job := range g.wrote.jobs {
		if p, ok := b.over.tasks[job]; ok && p.g == g {
			delete(b.over.tasks, job)
			if err == nil {
				b.recent.committed(job, &p.t, p.gone, now)
			}
		}
	}
	for _, k := range g.wrote.index {
		if p, ok := b.over.index[k]; ok && p.g == g {
			delete(b.over.index, k)
		}
	}
	for _, k := range g.wrote.deduped {
		if p, ok := b.over.deduped[k]; ok && p.g == g {
			delete(b.over.deduped, k)
		}
	}
	b.recycleLocked(g)
	b.mu.Unlock()
	g.err = err
	close(g.done)
}

// ErrNoSpace is task.ErrNoSpace: the error (wrapped, with the store's
// own) of every write after a commit failed because the store's disk is
// full. A failed commit fails the broker for good (see [Broker.Err]): what
// memory and the store show may be ahead of what is durable, and only
// reopening the store tells which. The errors of a failed broker also
// wrap [task.ErrClosed].
var ErrNoSpace = task.ErrNoSpace

// failure is the error of operations after a failed commit: it wraps
// ErrNoSpace when the disk is full, [task.ErrClosed], and the store's
// error.
type failure struct {
	err   error // the store's
	space bool  // err is ENOSPC
}

// failed returns the error operations report after the store's error err
// failed a commit.
func failed(err error) error {
	return &failure{err: err, space: errors.Is(err, syscall.ENOSPC)}
}

// Error says what failed and what to do, with the store's error after
// it (its "hourglass: " prefix dropped: an error carries one).
func (f *failure) Error() string {
	cause := strings.TrimPrefix(f.err.Error(), "hourglass: ")
	if f.space {
		return ErrNoSpace.Error() + ": writes are refused until the server is restarted with space free (" + cause + ")"
	}
	return "hourglass: store failed: writes are refused until the server is restarted (" + cause + ")"
}

// Unwrap returns the errors f wraps, for errors.Is and errors.As.
func (f *failure) Unwrap() []error {
	if f.space {
		return []error{ErrNoSpace, task.ErrClosed, f.err}
	}
	return []error{task.ErrClosed, f.err}
}
